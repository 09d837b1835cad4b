"""What an exec came to: result values, the status-channel parser, capped output.

Stage: pure core of the exec stream (execstream.py feeds it frames). Inputs: the
payload of the error/status channel (3), the bytes of stdout (1) and stderr (2).
Outputs: one `ExecResult` value, never an exception:

- `ExecExited`: the command ran and exited; its code and its output (stdout and
  stderr apart, 1 KiB kept each, the rest counted in `*_dropped`).
- `ExecNotStarted`: the server reported a failure that is not an exit code, e.g.
  the executable does not exist or the container is not running (the probe fails,
  as the kubelet's own exec prober fails it).
- `ExecTransportError`: the exec could not be run or observed (handshake refused,
  connection lost, no status, deadline): the probe outcome is Unknown.

The Status parser follows client-go's `errorDecoderV4` (tools/remotecommand/v4.go),
which v5 shares: `Success` is exit 0; `Failure` with reason `NonZeroExitCode` takes
the exit code from the cause whose `reason` is `ExitCode` (a decimal 0..255, as its
`strconv.ParseUint(msg, 10, 8)`); any other `Failure` carries its message. The
message texts differ by server (the kubelet's v4 `command terminated with non-zero
exit code: error executing command [sh -c exit 3], exit code 3`; a 1.30+ API server
rebuilding it for v5 as `... command terminated with exit code 3`); only the cause
is read, never the message.

Invariants: no I/O; output memory is bounded by `keep` bytes per stream whatever
the server sends; UTF-8 is decoded once, at the end, with replacement, so a
character split across frames stays whole; a cut at the cap never leaves half a
character behind (the partial character counts as dropped).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import orjson

__all__ = [
    "CappedOutput",
    "ExecExited",
    "ExecFrames",
    "ExecNotStarted",
    "ExecResult",
    "ExecTransportError",
    "Exited",
    "TransportFailure",
    "parse_status",
]

# apimachinery/pkg/util/remotecommand constants.go
_NON_ZERO_EXIT = "NonZeroExitCode"
_EXIT_CODE_CAUSE = "ExitCode"


class TransportFailure(enum.Enum):
    """Why an exec could not be run or observed (each makes the probe Unknown)."""

    REFUSED = "refused"  # the handshake was answered with an HTTP error status
    UNREACHABLE = "unreachable"  # no connection (refused, reset, TLS) before the upgrade
    LOST = "lost"  # the connection dropped before a complete status arrived
    NO_STATUS = "no_status"  # the server closed the stream cleanly without a status
    DEADLINE = "deadline"  # no status within the deadline; the socket was dropped
    PROTOCOL = "protocol"  # the server broke the protocol (bad status, subprotocol)


@dataclass(frozen=True, slots=True)
class ExecExited:
    """The command ran and exited with `exit_code`."""

    exit_code: int
    stdout: str
    stderr: str
    stdout_dropped: int = 0
    stderr_dropped: int = 0


@dataclass(frozen=True, slots=True)
class ExecNotStarted:
    """The command could not be started in the container; `message` is the server's."""

    message: str


@dataclass(frozen=True, slots=True)
class ExecTransportError:
    """The exec could not be run or observed; `http_status` for a refused handshake.

    `upgraded`: the server had accepted the exec (the WebSocket was open) when this
    happened. `timed_out`: a `DEADLINE` that is the command's own: its time limit,
    counted from the server's "connection established" frame, ran out before its
    exit status (the probe is Failed, timed out); any other `DEADLINE` is the
    client's (a handshake or an established frame that came too late: Unknown).
    """

    kind: TransportFailure
    message: str
    http_status: int | None = None
    upgraded: bool = False
    timed_out: bool = False

    def __str__(self) -> str:
        status = f" (HTTP {self.http_status})" if self.http_status is not None else ""
        return f"exec {self.kind.value}{status}: {self.message}"


ExecResult = ExecExited | ExecNotStarted | ExecTransportError


@dataclass(frozen=True, slots=True)
class Exited:
    """A parsed status that says the command exited (0 for `Success`)."""

    code: int


def _exit_code_of(status: dict[str, object]) -> Exited | ExecTransportError:
    details = status.get("details")
    if not isinstance(details, dict):
        return _protocol("a NonZeroExitCode status without details")
    causes = details.get("causes")
    for cause in causes if isinstance(causes, list) else ():
        if not isinstance(cause, dict) or cause.get("reason") != _EXIT_CODE_CAUSE:
            continue
        text = cause.get("message")
        # strconv.ParseUint(text, 10, 8): ASCII digits only, no sign, no spaces.
        if isinstance(text, str) and text.isascii() and text.isdigit() and int(text) <= 255:
            return Exited(int(text))
        return _protocol(f"invalid exit code value {text!r}")
    return _protocol(f"no {_EXIT_CODE_CAUSE} cause in a {_NON_ZERO_EXIT} status")


def _protocol(message: str) -> ExecTransportError:
    return ExecTransportError(TransportFailure.PROTOCOL, f"error stream protocol error: {message}")


def _interpret(status: object, payload: bytes) -> Exited | ExecNotStarted | ExecTransportError:
    if not isinstance(status, dict):
        return _protocol(f"the status is not a JSON object: {payload[:200]!r}")
    outcome = status.get("status")
    if outcome == "Success":
        return Exited(0)
    if outcome != "Failure":
        return _protocol(f"unknown status {outcome!r}")
    if status.get("reason") == _NON_ZERO_EXIT:
        return _exit_code_of(status)
    message = status.get("message")
    if not isinstance(message, str) or not message:
        message = f"the server reported a failure ({status.get('reason') or 'no reason'})"
    return ExecNotStarted(message)


def parse_status(payload: bytes) -> Exited | ExecNotStarted | ExecTransportError:
    """Read the Status a v4/v5 server writes on the error channel (see module docstring)."""
    try:
        status = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return _protocol(f"the status is not JSON: {payload[:200]!r}")
    return _interpret(status, payload)


def _complete_utf8_prefix(data: bytes | bytearray) -> int:
    """Length of `data` without a UTF-8 sequence cut short at its end."""
    end = len(data)
    # A sequence is at most 4 bytes: look back for its lead byte.
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: keep looking for the lead
        if 0xC2 <= byte <= 0xDF:
            need = 2
        elif 0xE0 <= byte <= 0xEF:
            need = 3
        elif 0xF0 <= byte <= 0xF4:
            need = 4
        else:
            return end  # ASCII, or a byte no character starts with: nothing was cut
        return end if back >= need else end - back
    return end  # continuation bytes only: invalid anyway, decoding replaces them


class CappedOutput:
    """One output stream: the first `keep` bytes kept, the rest counted and dropped."""

    __slots__ = ("_data", "_keep", "dropped")

    def __init__(self, *, keep: int) -> None:
        self._keep = keep
        self._data = bytearray()
        self.dropped = 0

    def __repr__(self) -> str:
        return f"CappedOutput(kept={len(self._data)}, dropped={self.dropped})"

    @property
    def kept(self) -> int:
        return len(self._data)

    def feed(self, chunk: bytes | memoryview) -> None:
        """Keep what fits under the cap; only the kept part is ever copied."""
        room = self._keep - len(self._data)
        if room >= len(chunk):
            self._data += chunk
            return
        if room > 0:
            self._data += chunk[:room]
        self.dropped += len(chunk) - max(room, 0)

    def decode(self) -> tuple[str, int]:
        """The kept text and the bytes dropped.

        Invalid UTF-8 becomes U+FFFD; a character the cap cut in two is left out
        and counted as dropped, so the text never ends in a replacement character
        that the cap made.
        """
        data = self._data
        cut = _complete_utf8_prefix(data) if self.dropped else len(data)
        return bytes(data[:cut]).decode("utf-8", "replace"), self.dropped + len(data) - cut


class ExecFrames:
    """The frames of one exec session, demultiplexed by channel (pure).

    A frame is a channel byte and data (remotecommand v4/v5, binary framing):
    1 stdout, 2 stderr, 3 the Status. Everything else is ignored: 0 (stdin) and
    4 (resize) are the client's own channels, 255 is v5's close signal (a server
    does not send one to a client without stdin, but it is harmless), and a
    later protocol may add channels. Empty frames (the server's "connection
    established" frame) carry nothing.
    """

    __slots__ = ("_max_status", "_status", "outcome", "stderr", "stdout")

    def __init__(self, *, keep: int, max_status: int) -> None:
        self.stdout = CappedOutput(keep=keep)
        self.stderr = CappedOutput(keep=keep)
        self._status = bytearray()
        self._max_status = max_status
        # The parsed Status, once it is complete (a later close cannot undo it).
        self.outcome: Exited | ExecNotStarted | ExecTransportError | None = None

    def __repr__(self) -> str:
        return (
            f"ExecFrames(stdout={self.stdout!r}, stderr={self.stderr!r}, outcome={self.outcome!r})"
        )

    def feed(self, frame: bytes) -> None:
        if len(frame) < 2:
            return
        channel = frame[0]
        if channel == 1:
            self.stdout.feed(memoryview(frame)[1:])
        elif channel == 2:
            self.stderr.feed(memoryview(frame)[1:])
        elif channel == 3 and self.outcome is None:
            self._feed_status(frame)

    def _feed_status(self, frame: bytes) -> None:
        self._status += memoryview(frame)[1:]
        if len(self._status) > self._max_status:
            self.outcome = _protocol(f"a status longer than {self._max_status} bytes")
            return
        try:
            status = orjson.loads(self._status)
        except orjson.JSONDecodeError:
            return  # not complete yet: the rest may follow in the next frame
        self.outcome = _interpret(status, bytes(self._status))

    def result(self) -> ExecExited | ExecNotStarted | ExecTransportError | None:
        """The result the complete status gives, or None while there is none."""
        if isinstance(self.outcome, Exited):
            stdout, stdout_dropped = self.stdout.decode()
            stderr, stderr_dropped = self.stderr.decode()
            return ExecExited(self.outcome.code, stdout, stderr, stdout_dropped, stderr_dropped)
        return self.outcome

    def closed(self, *, code: int | None, abnormal: bool, detail: str) -> ExecResult:
        """The result once the stream has ended (a close frame or a dropped connection)."""
        done = self.result()
        if done is not None:
            # The server's status was complete: whatever happened to the connection
            # afterwards (a Go server drops TCP right after its close frame) is a
            # normal end.
            return done
        if abnormal:
            part = " in the middle of the status" if self._status else " before the exit status"
            why = f" ({detail})" if detail else ""
            return ExecTransportError(TransportFailure.LOST, f"connection lost{part}{why}")
        if self._status:
            # Never complete JSON (a complete one would have set the outcome).
            return _protocol(f"the stream ended inside the status: {bytes(self._status[:200])!r}")
        return ExecTransportError(
            TransportFailure.NO_STATUS,
            f"the server closed the stream (code {code}) without an exit status",
        )
