"""Validate a probe's `probe` field: its one handler and its timing.

Stage: api (pure), under validation.py. Input: the `probe` map of one entry of
`spec.probes` (untrusted) and its field path. Output: the problems, recorded in the
pass's `Errors`: not exactly one handler (exec, httpGet, tcpSocket, grpc), a field the
handler does not know, the refused `host`, the command, the port, the httpGet path,
scheme and headers, the gRPC service, a timing field under its minimum. The limits
and messages are `rules.py`'s, which the CRD's probe schema (probeschema.py) states
too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.api import names, rules
from probemarker.api.fieldchecks import check_max_items, required_str
from probemarker.api.fields import (
    Errors,
    as_int,
    as_list,
    as_map,
    as_str,
    check_known,
    child,
    describe,
    index,
    matches,
)

__all__ = ["check_probe_spec"]

_HANDLER_FIELDS = {
    "exec": ("command", "host"),
    "httpGet": ("path", "port", "host", "scheme", "httpHeaders"),
    "tcpSocket": ("port", "host"),
    "grpc": ("port", "service", "host"),
}
_PROBE_SPEC_FIELDS = (*rules.HANDLERS, *rules.TIMING_MINIMUMS)


def check_probe_spec(spec: Mapping[str, Any], path: str, errors: Errors) -> None:
    check_known(spec, _PROBE_SPEC_FIELDS, path, errors)
    handlers = [h for h in rules.HANDLERS if h in spec]
    if len(handlers) != 1:
        found = f" (found {', '.join(handlers)})" if handlers else ""
        errors.add(path, rules.MSG_ONE_HANDLER + found)
    for handler in handlers:
        action = as_map(spec[handler], child(path, handler), errors)
        if action is not None:
            _check_handler(handler, action, child(path, handler), errors)
    for field, minimum in rules.TIMING_MINIMUMS.items():
        if (
            field in spec
            and (number := as_int(spec[field], child(path, field), errors)) is not None
        ):
            _check_timing(field, number, minimum, child(path, field), errors)


def _check_timing(field: str, number: int, minimum: int, path: str, errors: Errors) -> None:
    if number < minimum:
        default = rules.TIMING_DEFAULTS.get(field)
        hint = f" (omit the field for the default of {default})" if default is not None else ""
        errors.add(path, f"must be at least {minimum}, got {number}{hint}")
    elif number > rules.INT32_MAX:
        errors.add(path, f"must be at most {rules.INT32_MAX}, got {number}")


def _check_handler(handler: str, action: Mapping[str, Any], path: str, errors: Errors) -> None:
    check_known(action, _HANDLER_FIELDS[handler], path, errors)
    if "host" in action:
        errors.add(child(path, "host"), rules.MSG_HOST)
    if handler == "exec":
        _check_command(action.get("command"), child(path, "command"), errors)
        return
    _check_port(action, handler, path, errors)
    if handler == "httpGet":
        _check_http(action, path, errors)
    elif handler == "grpc" and "service" in action:
        service = as_str(action["service"], child(path, "service"), errors)
        if service is not None and len(service) > rules.MAX_GRPC_SERVICE_LENGTH:
            errors.add(
                child(path, "service"),
                f"must be no more than {rules.MAX_GRPC_SERVICE_LENGTH} characters",
            )


def _check_command(value: Any, path: str, errors: Errors) -> None:
    if value is None:
        errors.add(path, "required: the command to run in the container, as a list of arguments")
        return
    command = as_list(value, path, errors)
    if command is None:
        return
    if not command:
        errors.add(path, rules.MSG_COMMAND_EMPTY)
    check_max_items(command, rules.MAX_COMMAND_ARGS, path, errors)
    for i, arg in enumerate(command):
        text = as_str(arg, index(path, i), errors)
        if text is None:
            continue
        if i == 0 and not text:
            errors.add(path, rules.MSG_COMMAND_EMPTY)
        if len(text) > rules.MAX_COMMAND_ARG_LENGTH:
            errors.add(
                index(path, i), f"must be no more than {rules.MAX_COMMAND_ARG_LENGTH} characters"
            )


def _check_port(action: Mapping[str, Any], handler: str, path: str, errors: Errors) -> None:
    port_path = child(path, "port")
    if "port" not in action:
        errors.add(port_path, "required: the container port to probe, a number or a port name")
        return
    raw = action["port"]
    port: int | str | None = raw if isinstance(raw, str) and handler != "grpc" else None
    if port is None and (port := as_int(raw, port_path, errors)) is None:
        return
    if handler == "grpc" and not (isinstance(port, int) and 1 <= port <= 65535):
        errors.add(
            port_path,
            "must be a port number between 1 and 65535 (gRPC probes take no port names), "
            f"got {describe(port)}",
        )
        return
    for problem in names.port_problems(port):
        errors.add(port_path, f"{problem}, got {describe(port)}")


# A header's two fields: (field, what it holds, most characters, form, what the form is).
_HEADER_FIELDS = (
    (
        "name",
        "the header name",
        rules.MAX_HTTP_HEADER_NAME_LENGTH,
        rules.HTTP_HEADER_NAME_RE,
        "must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
    ),
    (
        "value",
        "the header value",
        rules.MAX_HTTP_HEADER_VALUE_LENGTH,
        rules.HTTP_HEADER_VALUE_RE,
        "must not contain control characters other than tab (a line break would add "
        "a header of its own)",
    ),
)


def _check_http(action: Mapping[str, Any], path: str, errors: Errors) -> None:
    if (
        "path" in action
        and (text := as_str(action["path"], child(path, "path"), errors)) is not None
    ):
        _check_text(
            text,
            child(path, "path"),
            rules.MAX_HTTP_PATH_LENGTH,
            rules.HTTP_PATH_RE,
            "must be an absolute path starting with '/' without spaces or control characters",
            errors,
        )
    if "scheme" in action:
        scheme = as_str(action["scheme"], child(path, "scheme"), errors)
        if scheme is not None and scheme not in rules.SCHEMES:
            errors.add(child(path, "scheme"), f'must be "HTTP" or "HTTPS", got {describe(scheme)}')
    if "httpHeaders" in action:
        _check_headers(action["httpHeaders"], child(path, "httpHeaders"), errors)


def _check_headers(value: Any, path: str, errors: Errors) -> None:
    headers = as_list(value, path, errors)
    if headers is None:
        return
    check_max_items(headers, rules.MAX_HTTP_HEADERS, path, errors)
    for i, item in enumerate(headers):
        header = as_map(item, index(path, i), errors)
        if header is None:
            continue
        check_known(header, ("name", "value"), index(path, i), errors)
        for field, what, most, form, wrong_form in _HEADER_FIELDS:
            text = required_str(header, field, index(path, i), errors, what)
            if text is not None:
                _check_text(text, child(index(path, i), field), most, form, wrong_form, errors)


def _check_text(
    text: str, path: str, most: int, form: str, wrong_form: str, errors: Errors
) -> None:
    """A string of at most `most` characters, of the `form` (a pattern of rules.py)."""
    if len(text) > most:
        errors.add(path, f"must be no more than {most} characters")
    elif not matches(form, text):
        errors.add(path, f"{wrong_form}, got {describe(text)}")
