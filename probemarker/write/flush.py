"""One flush of one pod: what to send of the newest plan, and what the answer means.

Stage: decide -> **write** (I/O), under the writer (write/writer.py), which decides
when a pod is flushed and whose turn it is; this module does the flush it is handed,
its token of the write budget already taken. Input: a pod's UID. Output: at most one
`pods/status` JSON patch, built by `patch.build_patch` from the engine's `plan`
(desired state) and the freshest view of the pod, and what follows from the answer
(the next flush booked on the writer's queue, a hold, a smaller patch).

Rules (docs/engine.md):
- steady state is zero writes: no request when the pod already matches, and none for
  a pod the plan leaves alone (None: terminating, finished or unknown);
- the newest desired state always wins: the plan is computed when the request is
  built (`prepare`, with the token in hand), never queued;
- a message-only change (`restrict.defer_messages` leaves nothing to send) waits until
  `message_refresh` seconds after the pod's last write, or after the daemon first saw
  the pod when it has not written it yet (`restrict.message_due`: a restart writes
  only where a state differs); a transition goes at once and carries every message
  with it. The shutdown flush defers a message-only change too, so a restart
  (stop, then start) writes only where a state differs;
- a failed `test` (422) or a 409: re-read the pod (GET) and recompute at once, up to
  `reread_limit` times in a row, then back off. A re-read that finds another UID
  means the pod was re-created under the same name: everything kept for the old UID
  is forgotten, and nothing planned for it is sent again (the uid `test` in every
  patch made the server refuse it). 429 waits at least `Retry-After`; 5xx and an
  unreachable server back off (capped, jittered) and retry; a pod that is gone (404)
  is forgotten;
- any other 422 (the patched pod would be invalid, e.g. past the 256 KiB annotation
  total): a Warning event on the pod with the server's cause, and at once a smaller
  patch (`restrict.Scope`: without new annotations, without annotations, conditions
  only), so one refused key never blocks the pod's conditions; the full patch is
  tried again after `scope_backoff`. Other refusals (403, 400) are logged with the
  pod and retried with backoff, since they can only be fixed from outside;
- each write is one log line at info (pod, keys set and removed, conditions); what
  a marker author controls is bounded in every line: at most `LOGGED_KEYS` keys of
  each kind, a server's message and a refused patch cut to `LOGGED_TEXT` bytes.

Freshness: after a write, the API server's answer is the newest pod. Until the watch
delivers that version, the flush plans against the answer rather than the informer's
older copy, so a kubelet status update racing with our write does not make us send
the same change twice. Versions are compared as integers (etcd revisions; Kubernetes
1.34 made resourceVersions comparable, KEP-5504); a server whose versions are not
integers gets the informer's copy, at worst one redundant, idempotent write.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog

from probemarker.kit.backoff import Backoff, BackoffSettings
from probemarker.kit.clock import Clock
from probemarker.kit.text import trim_utf8
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.errors import (
    ApiConflict,
    ApiError,
    ApiInvalid,
    ApiMalformed,
    ApiNotFound,
    ApiPatchTestFailed,
    ApiServerError,
    ApiTooManyRequests,
    ApiUnreachable,
    KubeError,
)
from probemarker.kube.connect.resources import PODS
from probemarker.kube.write.statuswrite import patch_pod_status
from probemarker.watch.pods import PodUID, PodView, pod_projection, pod_view
from probemarker.write.desired import DesiredPod
from probemarker.write.patch import build_patch, changes_of
from probemarker.write.queue import FlushQueue
from probemarker.write.restrict import Scope, defer_messages, message_due, restrict

log = structlog.get_logger(__name__)

Lookup = Callable[[PodUID], "tuple[PodView, str] | None"]
# The desired state of a pod, or None: write nothing to it (terminating or finished).
Plan = Callable[[PodView], "DesiredPod | None"]
# A refused write, for a Warning event on the pod: (pod, what the server said).
Refused = Callable[[PodView, str], None]


def ignore_refusal(pod: PodView, cause: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class WriterSettings:
    coalesce: float = 0.05  # seconds from a pod's first mark to its flush
    concurrency: int = 8  # pods flushed at once
    request_timeout: float = 10.0
    reread_limit: int = 5  # re-reads in a row after a failed test or 409, then back off
    backoff: BackoffSettings = field(
        default_factory=lambda: BackoffSettings(initial=0.5, maximum=30.0)
    )
    retry_after_max: float = 60.0
    message_refresh: float = 10.0  # seconds between message-only changes of one pod
    # After a refused (422) write: how long the smaller patch is kept before the full
    # one is tried again.
    scope_backoff: BackoffSettings = field(
        default_factory=lambda: BackoffSettings(initial=30.0, maximum=600.0)
    )

    def __post_init__(self) -> None:
        if self.coalesce < 0 or self.concurrency < 1 or self.request_timeout <= 0:
            raise ValueError("writer needs coalesce >= 0, concurrency >= 1, deadline > 0")
        if self.message_refresh < 0:
            raise ValueError("writer needs message_refresh >= 0")


# A log line of the writer lists at most this many keys (or condition types) of each
# kind, and cuts a server's message and a refused patch to these many bytes: what a
# marker author controls (how many keys, how long a value) never makes a line grow
# without bound.
LOGGED_KEYS = 8
LOGGED_TEXT = 1024


@dataclass(slots=True)
class WriterStats:
    """What the writer did, for the metrics."""

    flushes: int = 0  # plans computed
    writes: int = 0  # patches the API server accepted
    unchanged: int = 0  # flushes that needed no request
    rereads: int = 0  # GETs after a failed test or a 409
    retries: int = 0  # flushes scheduled again after an error
    failures: dict[str, int] = field(default_factory=dict)  # by error class
    replaced: int = 0  # pods found re-created under the same name (another UID)
    messages_held: int = 0  # flushes whose only change, a message, was held back
    narrowed: int = 0  # refused (422) writes answered with a smaller patch
    # Status write requests sent, by the pod's namespace (a token of the budget each);
    # a namespace is dropped when the writer forgets its last pod.
    sent_by_namespace: dict[str, int] = field(default_factory=dict)


def revision(text: str) -> int | None:
    """A resourceVersion as an integer (an etcd revision), or None when it is not one."""
    return int(text) if text.isdigit() else None


@dataclass(slots=True)
class PodState:
    """What the writer keeps of one pod between flushes (when it is flushed next is
    the queue's)."""

    seen: float  # when the writer first saw the pod (its first mark)
    namespace: str = ""  # "" when the pod was gone already at its first mark
    rereads: int = 0
    backoff: Backoff | None = None
    fresh: tuple[int, PodView] | None = None  # the API server's answer to our last write
    written: float | None = None  # when our last write to it was accepted
    scope: Scope = Scope.FULL  # how much a patch carries after a refusal
    scope_until: float = 0.0  # when the full patch is tried again
    scope_backoff: Backoff | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """A planned write: the pod as planned against, what it should show, the patch."""

    state: PodState
    view: PodView
    target: DesiredPod
    ops: list[dict[str, Any]]


class Flusher:
    """One pod's flush at a time, for the writer; keeps what it needs of each pod
    between flushes (`pods`). The writer's queue is shared: a flush books the pod's
    next flush on it (a deferred message, a pause after an error, a re-read)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        lookup: Lookup,
        plan: Plan,
        queue: FlushQueue[PodUID],
        now_text: Callable[[], str],
        clock: Clock,
        settings: WriterSettings,
        rng: random.Random,
        refused: Refused,
    ) -> None:
        self._client = client
        self._lookup = lookup
        self._plan = plan
        self._queue = queue
        self._now_text = now_text
        self._clock = clock
        self.settings = settings
        self._rng = rng
        self._refused = refused
        self.pods: dict[PodUID, PodState] = {}
        self._per_namespace: dict[str, int] = {}  # pods kept, by namespace
        self.stats = WriterStats()

    def track(self, uid: PodUID) -> PodState:
        """What is kept of `uid`, from its first mark on."""
        state = self.pods.get(uid)
        if state is None:
            current = self._lookup(uid)
            namespace = "" if current is None else current[0].namespace
            state = self.pods[uid] = PodState(seen=self._clock.now(), namespace=namespace)
            self._per_namespace[namespace] = self._per_namespace.get(namespace, 0) + 1
        return state

    def forget(self, uid: PodUID) -> None:
        state = self.pods.pop(uid, None)
        self._queue.forget(uid)
        if state is None:
            return
        left = self._per_namespace[state.namespace] - 1
        if left:
            self._per_namespace[state.namespace] = left
        else:  # its last pod: nothing of the namespace is kept (bounded by the node's pods)
            del self._per_namespace[state.namespace]
            self.stats.sent_by_namespace.pop(state.namespace, None)

    def base(self, uid: PodUID, state: PodState) -> PodView | None:
        """The freshest view of the pod: the informer's, or our last write's answer."""
        current = self._lookup(uid)
        if current is None:
            return None
        view, resource_version = current
        if state.fresh is not None:
            seen = revision(resource_version)
            if seen is not None and state.fresh[0] > seen:
                return state.fresh[1]
            state.fresh = None
        return view

    def prepare(self, uid: PodUID) -> Send | None:
        """The start of `uid`'s flush, with its token in hand: the plan, and what to send
        of it; None when nothing is sent (the pod is gone, matches, or only a message
        differs before its time)."""
        state = self.pods.get(uid)
        if state is None:
            return None
        view = self.base(uid, state)
        if view is None:
            self.forget(uid)
            return None
        self.stats.flushes += 1
        desired = self._plan(view)
        now = self._clock.now()
        if desired is not None and desired.revisit_after is not None:
            self._queue.at(uid, now + desired.revisit_after)
        to_send = None if desired is None else self._to_send(uid, state, view, desired, now)
        if to_send is None or not to_send[1]:
            self.stats.unchanged += 1
            state.rereads = 0
            self._queue.defer(uid, 0.0)
            return None
        sent = self.stats.sent_by_namespace
        sent[state.namespace] = sent.get(state.namespace, 0) + 1
        return Send(state, view, *to_send)

    async def send(self, uid: PodUID, send: Send) -> None:
        """The request, its token already taken, and what its answer means."""
        state, view = send.state, send.view
        try:
            answer = await patch_pod_status(
                self._client,
                namespace=view.namespace,
                name=view.name,
                ops=send.ops,
                limiter=None,
                wait=self.settings.request_timeout,
            )
        except KubeError as err:
            await self._failed(uid, state, view, err, send.ops)
            return
        self._written(uid, state, view, send.target, answer)

    def _to_send(
        self, uid: PodUID, state: PodState, view: PodView, desired: DesiredPod, now: float
    ) -> tuple[DesiredPod, list[dict[str, Any]]] | None:
        """What to send of `desired` now, and its patch: within the scope a refusal left,
        and without a message-only change before its time (then None, and a flush at
        that time)."""
        if state.scope is not Scope.FULL and now >= state.scope_until:
            state.scope = Scope.FULL  # time to try the full patch again
        target = restrict(desired, view, state.scope)
        ops = build_patch(pod=view, desired=target, now=self._now_text())
        due = message_due(
            seen=state.seen, written=state.written, refresh=self.settings.message_refresh
        )
        if not ops or now >= due:
            return target, ops
        if build_patch(pod=view, desired=defer_messages(target, view), now=""):
            return target, ops  # a real change goes now, with every message
        self.stats.messages_held += 1
        self._queue.at(uid, due)
        return None

    def _written(
        self,
        uid: PodUID,
        state: PodState,
        view: PodView,
        target: DesiredPod,
        answer: Mapping[str, Any],
    ) -> None:
        now = self._clock.now()
        self.stats.writes += 1
        state.rereads = 0
        self._queue.defer(uid, 0.0)
        state.written = now
        if state.backoff is not None:
            state.backoff.reset()
        if state.scope is Scope.FULL and state.scope_backoff is not None:
            state.scope_backoff.reset()
        elif state.scope is not Scope.FULL:
            self._queue.at(uid, state.scope_until)  # the full patch is still owed
        self._remember(state, answer)
        log.info(
            "write.patched",
            pod=f"{view.namespace}/{view.name}",
            **logged_changes(changes_of(view, target)),
            **({} if state.scope is Scope.FULL else {"scope": state.scope.name}),
        )

    def _remember(self, state: PodState, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata")
        version = revision(str(meta.get("resourceVersion", ""))) if isinstance(meta, dict) else None
        if version is not None:
            state.fresh = (version, pod_view(pod_projection(raw)))

    async def _failed(
        self,
        uid: PodUID,
        state: PodState,
        view: PodView,
        err: KubeError,
        ops: list[dict[str, Any]],
    ) -> None:
        name = type(err).__name__
        self.stats.failures[name] = self.stats.failures.get(name, 0) + 1
        pod = f"{view.namespace}/{view.name}"
        if isinstance(err, ApiNotFound):
            self.forget(uid)  # the pod is gone: nothing to write
            return
        if isinstance(err, ApiPatchTestFailed | ApiConflict) and state.rereads < (
            self.settings.reread_limit
        ):
            state.rereads += 1
            self.stats.rereads += 1
            reread = await self._reread(uid, state, view)
            if reread is Reread.REPLACED:
                return
            if reread is Reread.READ:
                # flushed again as soon as this flush ends
                self._queue.mark(uid, flow=state.namespace)
                return
        if (
            isinstance(err, ApiInvalid)
            and not isinstance(err, ApiPatchTestFailed)
            and self._narrow(uid, state, view, err)
        ):
            return  # a refused write: a smaller one goes at once
        backoff = state.backoff or Backoff(self.settings.backoff, rng=self._rng)
        state.backoff = backoff
        retry_after = err.retry_after if isinstance(err, ApiError) else None
        delay = backoff.next_delay(at_least=min(retry_after or 0.0, self.settings.retry_after_max))
        self.stats.retries += 1
        transient = isinstance(
            err, ApiTooManyRequests | ApiServerError | ApiUnreachable | ApiMalformed
        )
        (log.info if transient else log.error)(
            "write.retry",
            pod=pod,
            reason=name,
            error=trim_utf8(str(err), LOGGED_TEXT),
            retry_in=round(delay, 3),
            failures=backoff.failures,
            **({} if transient else {"patch": _logged_patch(ops)}),
        )
        self._queue.defer(uid, self._clock.now() + delay)
        # flushed again when the hold ends, with the newest plan
        self._queue.mark(uid, flow=state.namespace)

    def _narrow(self, uid: PodUID, state: PodState, view: PodView, err: ApiInvalid) -> bool:
        """A refused write: step down to a smaller patch, flushed again at once; False
        when there is none smaller (then the caller backs off as for any error)."""
        narrower = state.scope.narrower
        if narrower is None:
            return False
        if state.scope is Scope.FULL:
            backoff = state.scope_backoff or Backoff(self.settings.scope_backoff, rng=self._rng)
            state.scope_backoff = backoff
            state.scope_until = self._clock.now() + backoff.next_delay()
            self._refused(view, refusal_cause(err))
        state.scope = narrower
        self.stats.narrowed += 1
        log.warning(
            "write.refused",
            pod=f"{view.namespace}/{view.name}",
            error=trim_utf8(str(err), LOGGED_TEXT),
            next_scope=narrower.name,
        )
        self._queue.mark(uid, flow=state.namespace)
        return True

    async def _reread(self, uid: PodUID, state: PodState, view: PodView) -> Reread:
        """GET the pod, so the next plan starts from what the server holds now. Another
        UID under the name: the pod was re-created, and this one is forgotten."""
        pod = f"{view.namespace}/{view.name}"
        try:
            raw = await self._client.request(
                "GET",
                PODS.path(view.namespace, view.name),
                info=PODS.info("get", view.namespace, view.name),
                wait=self.settings.request_timeout,
            )
        except ApiNotFound:
            self.forget(uid)
            return Reread.REPLACED
        except KubeError as err:
            log.info("write.reread_failed", pod=pod, error=trim_utf8(str(err), LOGGED_TEXT))
            return Reread.FAILED
        meta = raw.get("metadata")
        found = meta.get("uid") if isinstance(meta, dict) else None
        if found != uid:
            self.forget(uid)
            self.stats.replaced += 1
            log.info("write.pod_replaced", pod=pod, uid=uid, found_uid=found)
            return Reread.REPLACED
        self._remember(state, raw)
        return Reread.READ


class Reread(enum.Enum):
    READ = "read"
    FAILED = "failed"
    REPLACED = "replaced"  # gone, or another pod under the name: forgotten


def logged_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """`patch.changes_of` for a log line: at most `LOGGED_KEYS` entries of each part,
    and how many more there were (`<part>_more`)."""
    out: dict[str, Any] = {}
    for part, entries in changes.items():
        if isinstance(entries, Mapping):
            out[part] = dict(list(entries.items())[:LOGGED_KEYS])
        else:
            out[part] = list(entries)[:LOGGED_KEYS]
        if len(entries) > LOGGED_KEYS:
            out[f"{part}_more"] = len(entries) - LOGGED_KEYS
    return out


def _logged_patch(ops: list[dict[str, Any]]) -> str:
    """A refused patch for its log line (a bug to look into), cut to `LOGGED_TEXT`."""
    text = orjson.dumps(ops, default=str).decode()
    cut = trim_utf8(text, LOGGED_TEXT)
    return cut if cut == text else f"{cut}... ({len(ops)} operations)"


def refusal_cause(err: ApiInvalid) -> str:
    """The server's reason for refusing a write, for the pod's Warning event."""
    # A real API server may list one cause several times (1.32 gives the annotation
    # total three times, from the metadata and the pod status validations): once each.
    causes = dict.fromkeys(
        f"{c.field}: {c.message}" if c.field else c.message for c in err.causes if c.message
    )
    return "; ".join(causes) or err.message
