"""The simulated API server's aiohttp application: routing, auth, faults, accounting.

Stage: the top of the sim's API server, over its rooms (`harness/`, `handlers/`,
`admission/`, `kinds/`, `discovery/`, `request/`); `SimCluster` starts it.

One catch-all route sends every request through `ApiServer.handle`, which:

1. authenticates (when a token is configured: `Authorization: Bearer <token>`,
   otherwise 401 Unauthorized; /version, /healthz, /livez, /readyz stay open
   to anonymous requests as kube-apiserver's system:public-info-viewer has it);
2. parses resource requests into a `RequestInfo` (request/requestinfo.py);
3. applies injected faults (latency, then 429/500/503 failures: harness/faults.py);
4. serves discovery (discovery/catalog.py), OpenAPI v3 (discovery/openapi.py),
   /version, or the resource verbs (handlers/resources.py, deletion.py, watching.py,
   exec via the sim's exec module, and the pods/proxy subresource,
   handlers/podproxy.py);
5. records the request in the accounting (harness/accounting.py) with its status
   code, when the response's status line is sent (so before the client sees any of it).

Every refusal is a Kubernetes `Status` (ApiError.to_status()).  Responses are
JSON (orjson); get, list and watch answer with a meta.k8s.io/v1 Table when the
client asks for one (handlers/tables.py), as `kubectl get` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from probemarker.sim.errors import (
    ApiError,
    InternalError,
    NotFound,
    TooLargeResourceVersion,
)
from probemarker.sim.exec.runners import ExecRunner
from probemarker.sim.exec.session import (
    ExecSessions,
    build_exec_target,
    exec_target_error,
    serve_exec,
)
from probemarker.sim.server.admission.crdserving import CrdController
from probemarker.sim.server.admission.writeoptions import WriteOptions, decode_body
from probemarker.sim.server.discovery import openapi
from probemarker.sim.server.discovery.catalog import CRDS, EVENTS_V1, PODS, Catalog
from probemarker.sim.server.handlers.deletion import Deletions
from probemarker.sim.server.handlers.podproxy import serve_pod_proxy
from probemarker.sim.server.handlers.resources import Resources
from probemarker.sim.server.handlers.tables import build_table, wants_table
from probemarker.sim.server.handlers.watching import WatchRegistry, serve_watch
from probemarker.sim.server.harness.accounting import Accounting, RequestRecord
from probemarker.sim.server.harness.faults import Faults, RequestKey
from probemarker.sim.server.kinds.eventconv import field_selector_to_core
from probemarker.sim.server.request.protobuf import ProtobufError, decode_object
from probemarker.sim.server.request.requestinfo import RequestInfo, parse_request_info
from probemarker.sim.server.request.status import (
    StatusError,
    bad_request,
    error_response,
    injected_failure,
    json_response,
    method_not_allowed,
    not_found_path,
    unauthorized,
    unsupported_media_type,
)
from probemarker.sim.store.listing import make_matcher
from probemarker.sim.store.listopts import list_read, watch_start
from probemarker.sim.store.objects import ResourceType, Store

log = logging.getLogger(__name__)

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.2",
    "gitCommit": "67a30c0adcf52bd3f56ff0893ce19966be12991f",
    "gitTreeState": "clean",
    "buildDate": "2025-02-12T21:19:47Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}
PROTOBUF = "application/vnd.kubernetes.protobuf"
_BODY_TYPES = ["application/json", "application/yaml", PROTOBUF]
_INFO_KEY = web.RequestKey[RequestInfo | None]("probemarker.sim.request_info")
_PUBLIC_PATHS = frozenset({"/version", "/version/", "/healthz", "/livez", "/readyz"})


class ApiServer:
    """Serves the Kubernetes API from a `Store`; see the module docstring."""

    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        resources: Resources,
        crds: CrdController,
        accounting: Accounting,
        faults: Faults,
        exec_runner: ExecRunner,
        workdir_root: Path,
        token: str | None,
        server_address: Callable[[], str],
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._resources = resources
        self._crds = crds
        self._deletions = Deletions(
            store=store, catalog=catalog, crds=crds, resources=resources, clock=clock
        )
        self._accounting = accounting
        self._faults = faults
        self._exec_runner = exec_runner
        self._workdir_root = workdir_root
        # Accepted bearer tokens; `SimCluster.set_tokens` changes them at run time
        # (a rotated service-account token, a revoked one).
        self.tokens: set[str] | None = {token} if token is not None else None
        self._server_address = server_address
        self._clock = clock
        self.watches = WatchRegistry()
        self.exec_sessions = ExecSessions()

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_response_prepare.append(self._on_response_prepare)
        return app

    # -- entry point -----------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        info = parse_request_info(request.method, request.path, request.query)
        request[_INFO_KEY] = info
        try:
            self._authenticate(request)
            if info is not None:
                await self._apply_faults(info)
            return await self._route(request, info)
        except ApiError as error:
            return error_response(error)
        except Exception as exc:  # a sim bug: answer as kube-apiserver's panic recovery does
            log.exception("sim.request_failed", extra={"path": request.path})
            return error_response(InternalError(repr(exc)))

    async def _on_response_prepare(
        self, request: web.Request, response: web.StreamResponse
    ) -> None:
        # Recorded when the status line is about to be sent: once a client sees any
        # answer (even of a watch or exec stream), its request is in the accounting.
        self._record(request, request.get(_INFO_KEY), response.status)

    def _authenticate(self, request: web.Request) -> None:
        if self.tokens is None:
            return
        header = request.headers.get("Authorization")
        if header is None and request.path in _PUBLIC_PATHS:
            return
        scheme, _, token = (header or "").partition(" ")
        if scheme != "Bearer" or token not in self.tokens:
            raise unauthorized()

    async def _apply_faults(self, info: RequestInfo) -> None:
        key = RequestKey(info.verb, info.resource, info.subresource)
        delay = self._faults.latency_for(key)
        if delay > 0:
            await asyncio.sleep(delay)
        rule = self._faults.failure_for(key)
        if rule is not None:
            raise injected_failure(rule.code, rule.retry_after, info)

    def _record(self, request: web.Request, info: RequestInfo | None, code: int) -> None:
        if info is None:
            record = RequestRecord(request.method.lower(), "", "", code, path=request.path)
        else:
            record = RequestRecord(
                info.verb,
                info.resource,
                info.subresource,
                code,
                group=info.group,
                version=info.version,
                namespace=info.namespace,
                name=info.name,
                path=request.path,
            )
        self._accounting.record(record)

    # -- routing ---------------------------------------------------------------------

    async def _route(self, request: web.Request, info: RequestInfo | None) -> web.StreamResponse:
        if info is not None:
            return await self._serve_resource(request, info)
        path = request.path.rstrip("/") or "/"
        if request.method != "GET":
            raise not_found_path()
        if path in ("/version",):
            return json_response(KUBERNETES_VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok", content_type="text/plain")
        return self._discovery(path)

    def _discovery(self, path: str) -> web.Response:
        body = openapi.document_for(
            self._catalog, path, server_address=self._server_address(), crd_of=self._crd
        )
        if body is None:
            raise not_found_path()
        return web.Response(body=body, content_type="application/json")

    def _crd(self, name: str) -> dict[str, Any] | None:
        try:
            return self._store.get(CRDS, None, name)
        except NotFound:
            return None

    async def _serve_resource(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        rt = self._resources.resolve(info)
        if info.subresource == "proxy" and info.resource == "pods" and not info.group:
            return await self._pod_proxy(request, info)
        if info.subresource == "exec":
            if info.verb not in ("get", "create"):
                raise method_not_allowed(info.verb, "pods/exec")
            return await self._exec(request, info)
        if info.subresource and info.verb not in ("get", "update", "patch"):
            raise method_not_allowed(info.verb, f"{rt.qualified}/{info.subresource}")
        verb = info.verb
        query = request.query
        table = wants_table(request.headers.get("Accept", ""))
        if verb == "get":
            obj = self._resources.get(rt, info)
            return json_response(self._table(request, rt, [obj], {}) if table else obj)
        if verb == "list":
            limit = query.get("limit") or ""
            read = list_read(
                query,
                limit=int(limit) if limit.isdigit() else None,
                continue_token=query.get("continue") or None,
            )
            await self._store.wait_fresh(read.min_rv, within=None if read.wait else 0.0)
            listed = self._resources.list(rt, info, query)
            if table:
                return json_response(self._table(request, rt, listed["items"], listed["metadata"]))
            return json_response(listed)
        if verb == "watch":
            return await self._watch(request, rt, info)
        if verb in ("update", "patch") and not info.name:
            raise method_not_allowed(info.verb, rt.qualified)
        if verb in ("create", "update", "patch"):
            return await self._write(request, rt, info)
        if verb == "delete":
            return json_response(self._deletions.delete(rt, info, query, await request.read()))
        if verb == "deletecollection":
            return json_response(self._deletions.delete_collection(rt, info, query))
        raise method_not_allowed(info.verb, rt.qualified)

    def _table(
        self,
        request: web.Request,
        rt: ResourceType,
        objects: list[dict[str, Any]],
        list_meta: dict[str, Any],
    ) -> dict[str, Any]:
        return build_table(
            rt,
            objects,
            now=self._clock(),
            include_object=request.query.get("includeObject") or "PartialObjectMetadata",
            list_meta=list_meta,
            printer_columns=self._crds.printer_columns(rt) if rt.is_custom else None,
        )

    async def _write(
        self, request: web.Request, rt: ResourceType, info: RequestInfo
    ) -> web.Response:
        kinds = {"create": "CreateOptions", "update": "UpdateOptions"}
        options = WriteOptions.from_query(request.query, kind=kinds.get(info.verb, "PatchOptions"))
        if info.verb == "create":
            if info.name:
                raise method_not_allowed("create", rt.qualified)
            body = await self._read_object(request)
            obj, status = self._resources.create(rt, info, body, options), 201
        elif info.verb == "update":
            body = await self._read_object(request)
            obj, status = self._resources.update(rt, info, body, options), 200
        else:
            data = await request.read()
            obj, status = self._resources.patch(rt, info, request.content_type, data, options), 200
        response = json_response(obj, status=status)
        for warning in options.warnings:
            escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
            response.headers.add("Warning", f'299 - "{escaped}"')
        return response

    @staticmethod
    async def _read_object(request: web.Request) -> Any:
        data = await request.read()
        if request.content_type == PROTOBUF:
            try:
                return decode_object(data)
            except ProtobufError:
                raise unsupported_media_type(request.content_type, _BODY_TYPES) from None
        if request.content_type in ("application/yaml", "application/x-yaml"):
            try:
                return yaml.safe_load(data)
            except yaml.YAMLError as exc:
                raise bad_request(f"error decoding request body: {exc}") from None
        return decode_body(data)

    async def _watch(
        self, request: web.Request, rt: ResourceType, info: RequestInfo
    ) -> web.StreamResponse:
        query = request.query
        field_selector = query.get("fieldSelector") or None
        if info.name:
            name_term = f"metadata.name={info.name}"
            field_selector = f"{field_selector},{name_term}" if field_selector else name_term
        if field_selector and rt == EVENTS_V1:
            field_selector = field_selector_to_core(field_selector)
        timeout_text = query.get("timeoutSeconds")
        timeout: float | None = None
        if timeout_text:
            try:
                timeout = float(int(timeout_text))
            except ValueError:
                raise bad_request(f'invalid timeoutSeconds "{timeout_text}"') from None
            if timeout == 0:
                timeout = None  # 0 is "not set": the server's own request timeout
        start = watch_start(query)
        srt = self._resources.storage_type(rt)
        label_selector = query.get("labelSelector") or None
        make_matcher(srt, info.namespace or None, label_selector, field_selector)  # 400s first
        try:
            await self._store.wait_fresh(start.wait_rv)
        except TooLargeResourceVersion as error:
            # Cacher.Watch: past validation, errors are an ERROR event in a 200 stream.
            watch = self._store.error_watch(srt, error)
        else:
            watch = self._store.watch(
                srt,
                namespace=info.namespace or None,
                label_selector=label_selector,
                field_selector=field_selector,
                start=start,
            )

        def convert(obj: dict[str, Any]) -> dict[str, Any]:
            view = self._resources.to_view(rt, obj)
            return self._table(request, rt, [view], {}) if table else view

        table = wants_table(request.headers.get("Accept", ""))
        return await serve_watch(
            request,
            watch=watch,
            registry=self.watches,
            timeout_seconds=timeout,
            convert=convert,
            api_version=rt.api_version,
            kind=rt.kind,
        )

    async def _pod_proxy(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        prefix = f"/api/{info.version}/namespaces/{info.namespace}/pods/{info.name}/proxy"
        path = request.path[len(prefix) :] if request.path.startswith(prefix) else ""
        return await serve_pod_proxy(
            request,
            pod_of=lambda name: self._store.get(PODS, info.namespace, name),
            proxy_id=info.name,
            path=path,
        )

    async def _exec(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        pod = self._store.get(PODS, info.namespace, info.name)
        container = request.query.get("container") or None
        error = exec_target_error(pod, container)
        if error is not None:
            raise error
        target = build_exec_target(pod, container, workdir_root=self._workdir_root)
        return await serve_exec(
            request,
            target=target,
            runner=self._exec_runner,
            faults=self._faults.exec,
            sessions=self.exec_sessions,
        )


__all__ = ["KUBERNETES_VERSION", "ApiServer", "StatusError"]
