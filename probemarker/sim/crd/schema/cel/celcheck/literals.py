"""CEL literal tokens (as celpy's lexer cuts them) to values, as cel-go's parser reads them.

Stage: used by celcheck.parse. Input: the token type and text. Output: the Python value and
its CEL type. Strings are unescaped (`\\n`, `\\x41`, `\\u00e9`, octal, raw `r'...'`, triple
quotes); bytes literals become `bytes`.
"""

from __future__ import annotations

from probemarker.sim.crd.schema.cel.celcheck import types as t

_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}  # fmt: skip
_HEX_WIDTH = {"x": 2, "X": 2, "u": 4, "U": 8}


def literal_value(kind: str, text: str) -> tuple[object, t.CelType]:
    """The value and type of a literal token (`INT_LIT`, `STRING_LIT`, ...)."""
    if kind == "INT_LIT":
        return _int(text), t.INT
    if kind == "UINT_LIT":
        return _int(text[:-1]), t.UINT
    if kind == "FLOAT_LIT":
        return float(text), t.DOUBLE
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return unquote(text, as_bytes=False), t.STRING
    if kind == "BYTES_LIT":
        return unquote(text[1:], as_bytes=True), t.BYTES
    if kind == "BOOL_LIT":
        return text == "true", t.BOOL
    return None, t.NULL


def _int(text: str) -> int:
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    value = int(digits[2:], 16) if digits[:2] in ("0x", "0X") else int(digits, 10)
    return -value if negative else value


def unquote(text: str, *, as_bytes: bool) -> str | bytes:
    """The value of a quoted (possibly raw, possibly triple-quoted) CEL string."""
    raw = text[:1] in ("r", "R")
    if raw:
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    body = text[quote:-quote]
    if raw:
        return body.encode() if as_bytes else body
    out = bytearray()
    pos = 0
    while pos < len(body):
        char = body[pos]
        if char != "\\" or pos + 1 >= len(body):
            out += char.encode()
            pos += 1
            continue
        pos = _escape(body, pos + 1, out, as_bytes=as_bytes)
    return bytes(out) if as_bytes else out.decode("utf-8", errors="replace")


def _escape(body: str, pos: int, out: bytearray, *, as_bytes: bool) -> int:
    """Append the value of the escape starting after the backslash at `pos`; the next position."""
    char = body[pos]
    if char in _SIMPLE_ESCAPES:
        out += _SIMPLE_ESCAPES[char].encode()
        return pos + 1
    width = _HEX_WIDTH.get(char)
    if width is not None:
        code = int(body[pos + 1 : pos + 1 + width], 16)
        if as_bytes and char in "xX":
            out.append(code)
        else:
            out += chr(code).encode()
        return pos + 1 + width
    if char in "0123":
        code = int(body[pos : pos + 3], 8)
        if as_bytes:
            out.append(code)
        else:
            out += chr(code).encode()
        return pos + 3
    out += ("\\" + char).encode()
    return pos + 1
