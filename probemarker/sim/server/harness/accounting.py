"""Request accounting for the simulated API server.

Every request the server answers is recorded once, after its status code is
known, as a `RequestRecord`.  Verbs are named the way Kubernetes' audit log
and `apiserver_request_total` name them (RequestInfo verbs): get, list,
watch, create, update, patch, delete, deletecollection; requests outside the
resource API (discovery, /version, /openapi) get the lower-cased HTTP method
and an empty resource.

Invariants: a request is recorded when its response's status line is sent,
so a client that has seen any answer (including the start of a watch or exec
stream) finds its request counted; records are never rewritten; `count` and
`counts` are derived from the same list, so they always agree.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One answered request."""

    verb: str
    resource: str
    subresource: str
    code: int
    group: str = ""
    version: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


class Accounting:
    """The request log and counters a test or benchmark reads."""

    def __init__(self) -> None:
        self._records: list[RequestRecord] = []
        self._recorded = asyncio.Event()

    def record(self, record: RequestRecord) -> None:
        self._records.append(record)
        self._recorded.set()

    async def wait_for(
        self,
        *,
        at_least: int = 1,
        within: float = 5.0,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        code: int | None = None,
    ) -> int:
        """Wait until `count(...)` with these filters reaches `at_least`; returns the count."""
        async with asyncio.timeout(within):
            while True:
                found = self.count(verb=verb, resource=resource, subresource=subresource, code=code)
                if found >= at_least:
                    return found
                self._recorded.clear()
                await self._recorded.wait()

    @property
    def records(self) -> tuple[RequestRecord, ...]:
        return tuple(self._records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(tuple(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def reset(self) -> None:
        """Forget everything recorded so far (counts start again from zero)."""
        self._records.clear()

    def count(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        code: int | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> int:
        """How many recorded requests match every filter given.

        `subresource=""` matches requests to the main resource only; `None`
        means "any".
        """
        return sum(
            1
            for r in self._records
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and (subresource is None or r.subresource == subresource)
            and (code is None or r.code == code)
            and (namespace is None or r.namespace == namespace)
            and (name is None or r.name == name)
        )

    def counts(self) -> Counter[tuple[str, str, str, int]]:
        """Counts keyed by (verb, resource, subresource, code)."""
        return Counter((r.verb, r.resource, r.subresource, r.code) for r in self._records)
