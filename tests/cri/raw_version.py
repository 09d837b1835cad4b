"""One CRI Version call over a unix socket with the standard library only.

Run by tests/cri/test_socket_access.py as an unprivileged user, with a system Python
(the test environment's interpreter may sit where that user cannot read): connects,
speaks just enough HTTP/2 for one gRPC unary call (a client preface, a HEADERS frame with
literal header fields, a DATA frame with the empty VersionRequest) and prints one line:

    connect failed: <strerror> (errno <n>)     exit 1
    runtime_name=<name>                        exit 0, the runtime answered Version
    no answer: <what came back>                exit 2

Usage: python3 -I raw_version.py SOCKET_PATH
"""

import socket
import struct
import sys

DATA, HEADERS, SETTINGS = 0x0, 0x1, 0x4
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def literal(name: bytes, value: bytes) -> bytes:
    # HPACK "literal header field without indexing, new name", no Huffman coding
    # (names and values here are shorter than 127 bytes).
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def runtime_name(message: bytes) -> str:
    """Field 2 (runtime_name) of a VersionResponse: all its fields are strings."""
    i, fields = 0, {}
    while i < len(message):
        key = message[i]
        i += 1
        size = shift = 0
        while True:
            byte = message[i]
            i += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        fields[key >> 3] = message[i : i + size].decode()
        i += size
    return fields.get(2, "")


def main(path: str) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(path)
    except OSError as error:
        print(f"connect failed: {error.strerror} (errno {error.errno})")
        return 1
    headers = (
        b"\x83"  # :method POST (static table 3)
        b"\x86"  # :scheme http (static table 6)
        + literal(b":path", b"/runtime.v1.RuntimeService/Version")
        + literal(b":authority", b"localhost")
        + literal(b"content-type", b"application/grpc")
        + literal(b"te", b"trailers")
    )
    sock.sendall(
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + frame(SETTINGS, 0, 0, b"")
        + frame(HEADERS, END_HEADERS, 1, headers)
        + frame(DATA, END_STREAM, 1, b"\x00\x00\x00\x00\x00")  # the empty VersionRequest
    )
    body = b""
    seen = []
    while True:
        try:
            head = read_exact(sock, 9)
        except (EOFError, OSError) as error:
            print(f"no answer: {error}; frames {seen}")
            return 2
        size = int.from_bytes(head[:3], "big")
        kind, flags = head[3], head[4]
        stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
        payload = read_exact(sock, size)
        seen.append(kind)
        if kind == SETTINGS and not flags & ACK:
            sock.sendall(frame(SETTINGS, ACK, 0, b""))
        elif kind == DATA and stream == 1:
            body += payload
        if stream == 1 and flags & END_STREAM:
            break
    if len(body) < 5:
        print(f"no answer: no gRPC message (frames {seen})")
        return 2
    print(f"runtime_name={runtime_name(body[5:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
