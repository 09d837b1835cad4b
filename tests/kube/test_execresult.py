"""The exec stream's pure core: the status parser, the capped output, the frame demux."""

from __future__ import annotations

import orjson
import pytest

from probemarker.probe.execresult import (
    CappedOutput,
    ExecExited,
    ExecFrames,
    ExecNotStarted,
    ExecTransportError,
    Exited,
    TransportFailure,
    parse_status,
)
from probemarker.probe.execstream import V4, ExecSettings

PROTOCOL = TransportFailure.PROTOCOL


def exit_status(message: str, *causes: dict[str, str]) -> bytes:
    return orjson.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "NonZeroExitCode",
            "details": {"causes": list(causes)},
        }
    )


TRANSLATOR_3 = exit_status(
    "command terminated with non-zero exit code: command terminated with exit code 3",
    {"reason": "ExitCode", "message": "3"},
)
KUBELET_2 = exit_status(
    "command terminated with non-zero exit code: error executing command [sh -c exit 2], "
    "exit code 2",
    {"reason": "ExitCode", "message": "2"},
)
MISSING = (
    'failed to exec in container: failed to start exec "0123": OCI runtime exec failed: '
    "exec failed: unable to start container process: "
    'exec: "nope": executable file not found in $PATH: unknown'
)


def internal(message: str) -> bytes:
    return orjson.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": f"Internal error occurred: {message}",
            "reason": "InternalError",
            "details": {"causes": [{"message": message}]},
            "code": 500,
        }
    )


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(b'{"metadata":{},"status":"Success"}', Exited(0), id="success"),
        pytest.param(TRANSLATOR_3, Exited(3), id="v5-translator-wording"),
        pytest.param(KUBELET_2, Exited(2), id="v4-kubelet-wording"),
        pytest.param(
            exit_status(
                "x", {"reason": "Other", "message": "9"}, {"reason": "ExitCode", "message": "255"}
            ),
            Exited(255),
            id="exit-code-cause-found-among-others",
        ),
        pytest.param(
            internal(f"Internal error occurred: error executing command in container: {MISSING}"),
            ExecNotStarted(
                "Internal error occurred: Internal error occurred: error executing command "
                f"in container: {MISSING}"
            ),
            id="missing-executable-through-translator",
        ),
        pytest.param(
            internal('unable to upgrade connection: container not found ("app")'),
            ExecNotStarted(
                'Internal error occurred: unable to upgrade connection: container not found ("app")'
            ),
            id="container-not-running-v5",
        ),
        pytest.param(
            b'{"status":"Failure","reason":"InternalError"}',
            ExecNotStarted("the server reported a failure (InternalError)"),
            id="failure-without-message",
        ),
    ],
)
def test_parse_status(payload: bytes, expected: object) -> None:
    assert parse_status(payload) == expected


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        pytest.param(b"not json", "not JSON", id="not-json"),
        pytest.param(b"[1]", "not a JSON object", id="not-an-object"),
        pytest.param(b'{"status":"Maybe"}', "unknown status 'Maybe'", id="unknown-status"),
        pytest.param(
            b'{"status":"Failure","reason":"NonZeroExitCode"}', "without details", id="no-details"
        ),
        pytest.param(
            exit_status("x", {"reason": "Other", "message": "1"}),
            "no ExitCode cause",
            id="no-cause",
        ),
        pytest.param(
            exit_status("x", {"reason": "ExitCode", "message": "three"}),
            "invalid exit code value 'three'",
            id="exit-code-not-a-number",
        ),
        pytest.param(
            exit_status("x", {"reason": "ExitCode", "message": "256"}),
            "invalid exit code value '256'",
            id="exit-code-over-255",
        ),
        pytest.param(
            exit_status("x", {"reason": "ExitCode", "message": "-1"}),
            "invalid exit code value '-1'",
            id="exit-code-negative",
        ),
        pytest.param(
            exit_status("x", {"reason": "ExitCode"}),
            "invalid exit code value None",
            id="exit-code-missing",
        ),
    ],
)
def test_malformed_status_is_a_protocol_error(payload: bytes, fragment: str) -> None:
    result = parse_status(payload)
    assert isinstance(result, ExecTransportError)
    assert result.kind is PROTOCOL
    assert fragment in result.message


@pytest.mark.parametrize(
    ("chunks", "keep", "text", "dropped"),
    [
        pytest.param([b"hello"], 1024, "hello", 0, id="under-the-cap"),
        pytest.param([b"a" * 600, b"b" * 600], 1024, "a" * 600 + "b" * 424, 176, id="cap"),
        pytest.param([b"x" * 2000] * 3, 1024, "x" * 1024, 4976, id="dropped-counted"),
        pytest.param([b"caf\xc3", b"\xa9!"], 1024, "café!", 0, id="char-split-across-frames"),
        pytest.param(
            [b"\xf0\x9f", b"\x98", b"\x80"], 1024, "\U0001f600", 0, id="4-byte-char-in-3-frames"
        ),
        pytest.param([b"ok \xff\xfe end"], 1024, "ok \ufffd\ufffd end", 0, id="invalid-utf8"),
        pytest.param([b"tail \xc3"], 1024, "tail \ufffd", 0, id="stream-ends-mid-char"),
        pytest.param([b"ab\xc3\xa9cd"], 3, "ab", 4, id="cap-cuts-a-2-byte-char"),
        pytest.param([b"a\xe2\x82\xac"], 3, "a", 3, id="cap-cuts-a-3-byte-char"),
        pytest.param([b"\xe2\x82\xac!"], 3, "\u20ac", 1, id="cap-ends-on-a-whole-char"),
        pytest.param([b"ab\xff\xff"], 3, "ab\ufffd", 1, id="cap-on-invalid-bytes"),
        pytest.param([b"", b""], 1024, "", 0, id="empty"),
    ],
)
def test_capped_output(chunks: list[bytes], keep: int, text: str, dropped: int) -> None:
    out = CappedOutput(keep=keep)
    for chunk in chunks:
        out.feed(chunk)
    assert out.decode() == (text, dropped)
    assert out.kept <= keep


def test_capped_output_holds_only_the_kept_bytes() -> None:
    out = CappedOutput(keep=1024)
    chunk = b"z" * 32768
    for _ in range(320):  # 10 MiB in the kubelet's 32 KiB io.Copy chunks
        out.feed(memoryview(chunk))
    assert out.kept == 1024
    assert out.dropped == 320 * 32768 - 1024


def frames(*items: bytes) -> ExecFrames:
    demux = ExecFrames(keep=1024, max_status=4096)
    for item in items:
        demux.feed(item)
    return demux


def test_frames_keep_streams_apart_and_ignore_other_channels() -> None:
    demux = frames(
        b"\x01",  # the "connection established" frame
        b"\x01out",
        b"\x02err",
        b"\x00stdin?",
        b'\x04{"Width":1}',
        b"\xff\x00",  # v5 close signal
        b"\x09future channel",
        b"",
        b'\x03{"metadata":{},"status":"Success"}',
    )
    assert demux.closed(code=1000, abnormal=False, detail="") == ExecExited(0, "out", "err", 0, 0)


def test_status_split_across_frames_is_joined() -> None:
    demux = frames(b'\x03{"status":', b'\x03"Success"}')
    assert demux.outcome == Exited(0)


def test_status_read_then_connection_dropped_is_a_normal_end() -> None:
    demux = frames(b"\x01hi", b"\x03" + TRANSLATOR_3)
    assert demux.closed(code=1006, abnormal=True, detail="reset") == ExecExited(3, "hi", "", 0, 0)


def test_only_the_first_status_counts() -> None:
    demux = frames(b"\x03" + TRANSLATOR_3, b'\x03{"status":"Success"}')
    assert demux.outcome == Exited(3)


@pytest.mark.parametrize(
    ("items", "close", "kind", "fragment"),
    [
        pytest.param(
            (b"\x01partial",),
            (1006, True, "reset by peer"),
            TransportFailure.LOST,
            "connection lost before the exit status (reset by peer)",
            id="lost-before-status",
        ),
        pytest.param(
            (b'\x03{"status":',),
            (1006, True, ""),
            TransportFailure.LOST,
            "in the middle of the status",
            id="lost-inside-status",
        ),
        pytest.param(
            (b"\x01out",),
            (1000, False, ""),
            TransportFailure.NO_STATUS,
            "closed the stream (code 1000) without an exit status",
            id="clean-close-without-status",
        ),
        pytest.param(
            (b'\x03{"status":',),
            (1000, False, ""),
            TransportFailure.PROTOCOL,
            "ended inside the status",
            id="clean-close-inside-status",
        ),
    ],
)
def test_stream_ending_without_status(
    items: tuple[bytes, ...], close: tuple[int, bool, str], kind: TransportFailure, fragment: str
) -> None:
    code, abnormal, detail = close
    result = frames(*items).closed(code=code, abnormal=abnormal, detail=detail)
    assert isinstance(result, ExecTransportError)
    assert result.kind is kind
    assert fragment in result.message


def test_oversized_status_is_a_protocol_error() -> None:
    demux = ExecFrames(keep=1024, max_status=10)
    demux.feed(b"\x03" + b" " * 11)
    assert isinstance(demux.outcome, ExecTransportError)
    assert "longer than 10 bytes" in demux.outcome.message


def test_transport_error_text_names_kind_and_status() -> None:
    err = ExecTransportError(TransportFailure.REFUSED, 'pods "x" not found', 404)
    assert str(err) == 'exec refused (HTTP 404): pods "x" not found'


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"protocols": ()}, id="no-protocol"),
        pytest.param({"protocols": (V4, "v4.base64.channel.k8s.io")}, id="base64"),
        pytest.param({"keep_bytes": -1}, id="negative-keep"),
    ],
)
def test_exec_settings_refuse_what_the_reader_cannot_read(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ExecSettings(**kwargs)  # type: ignore[arg-type]
