"""What an informer watches, how it behaves, and what it counts: its plain values.

Stage: configuration of `informer.Informer` (re-exported there, with `Resource` and
`PODS` of kube/connect/resources.py). `InformerSettings` the timing (watch timeouts,
read deadline margin, paging, backoff); `InformerCounters` what the informer did,
for the metrics; `ListWatchClient` the part of `KubeClient` an informer uses (a
Protocol, so a test may wrap the client). No I/O here.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from probemarker.kit.backoff import BackoffSettings
from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.connect.resources import PODS, Resource

__all__ = ["PODS", "InformerCounters", "InformerSettings", "ListWatchClient", "Resource"]


class ListWatchClient(Protocol):
    """What the informer needs of `KubeClient`."""

    async def list_page(
        self,
        path: str,
        *,
        info: RequestInfo,
        item: Callable[[dict[str, Any]], None],
        params: Sequence[tuple[str, str]] | None = None,
        wait: float | None = None,
    ) -> dict[str, Any]: ...

    def stream_lines(
        self,
        path: str,
        *,
        info: RequestInfo,
        params: Sequence[tuple[str, str]] | None = None,
        read_timeout: float,
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


@dataclass(frozen=True, slots=True)
class InformerSettings:
    # The server ends each watch after a random 5-10 minutes (client-go: minWatchTimeout
    # 5 min, random in [min, 2*min]), so reconnects of many clients spread out.
    watch_timeout_min: float = 300.0
    watch_timeout_max: float = 600.0
    # No byte for timeoutSeconds + read_margin: the connection is half-open.
    read_margin: float = 30.0
    page_size: int = 500  # client-go's pager default
    list_timeout: float = 60.0  # one LIST page, answer included
    backoff: BackoffSettings = field(default_factory=BackoffSettings)
    retry_after_max: float = 60.0  # a larger Retry-After is cut to this
    short_watch: float = 1.0  # closed sooner without a line: a failure (reflector.go)
    buffer: int = 1024  # changes queued for a slow consumer before the informer waits

    def __post_init__(self) -> None:
        if not 1 <= self.watch_timeout_min <= self.watch_timeout_max:
            raise ValueError("need 1 <= watch_timeout_min <= watch_timeout_max")
        if self.read_margin <= 0 or self.page_size < 0 or self.buffer < 0:
            raise ValueError("read_margin must be > 0, page_size and buffer >= 0")


@dataclass(slots=True)
class InformerCounters:
    """What the informer did, for the metrics (monotonic counts)."""

    lists: int = 0  # complete LISTs (all pages)
    watches: int = 0  # WATCH requests the server accepted
    restarts: int = 0  # watches that ended (any reason) and were started again
    gone: int = 0  # 410 Gone / too large resourceVersion answers (each forces a LIST)
    events: int = 0  # ADDED/MODIFIED/DELETED events received
    bookmarks: int = 0
    changes: int = 0  # changes emitted (after projection and re-list diffs)
    errors: Counter[str] = field(default_factory=Counter)  # by error class name
    # Clock time of the last sign of life: a LIST, a watch opened or ended normally, a
    # watch line (bookmarks included). Whether a loop is hung is `Informer.overdue()`:
    # a loop failing and retrying makes no progress either, but is not hung.
    last_progress: float = 0.0
