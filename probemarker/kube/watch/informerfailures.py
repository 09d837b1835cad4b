"""How an informer reports a failed LIST or WATCH: which line, saying what.

Stage: the informer's logging (pure). Input: the error, whether a LIST or a WATCH
failed, the resource, the API server's address, a hint for a resource that is not
served. Output: a `Failure`: the log event, its fields, and the key under which
`kit.repeats.Repeats` limits repeats to one line a minute.

- a 404 on a LIST: the API server does not serve the resource at all (a collection
  that exists answers a list, empty or not): for a custom resource, its CRD is not
  installed. One key per resource, whichever namespace's loop meets it.
- an unreachable server (refused, reset, TLS failure, a deadline): one key for all
  informers, since it is one problem; the line names the server's address.
- anything else: one key per informer, namespace, event and error type.
"""

from __future__ import annotations

from dataclasses import dataclass

from probemarker.kube.connect.errors import ApiNotFound, ApiUnreachable, KubeError
from probemarker.kube.connect.resources import Resource

__all__ = ["Failure", "describe_failure"]


@dataclass(frozen=True, slots=True)
class Failure:
    """How a failed LIST or WATCH is logged: its event, what it says, and the key under
    which repeats are limited (None: per informer, unit, event and error type)."""

    event: str
    fields: dict[str, str]
    key: tuple[str, ...] | None = None


def describe_failure(
    err: KubeError, *, listing: bool, resource: Resource, server: str, missing_hint: str
) -> Failure:
    """The line for a failed LIST (`listing`) or WATCH; see the module docstring."""
    full = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    if listing and isinstance(err, ApiNotFound):
        hint = missing_hint or "is its CustomResourceDefinition installed?"
        return Failure(
            "informer.not_served",
            {
                "resource": f"{full}/{resource.version}",
                "message": f"the API server does not serve {full}/{resource.version}: "
                f"{hint}; waiting for it",
            },
            key=("not_served", full),
        )
    if isinstance(err, ApiUnreachable):
        at = f" at {server}" if server else ""
        return Failure(
            "informer.unreachable",
            {
                "server": server,
                "message": f"cannot reach the API server{at}: {err.message}; retrying",
            },
            key=("unreachable",),
        )
    return Failure(
        "informer.list_failed" if listing else "informer.watch_restarted",
        {"error": str(err), "reason": type(err).__name__},
    )
