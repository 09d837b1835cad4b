"""Observe: what serves and counts.

- Logging (`logging`; what the event loop reports on its own, `looperrors`).
- Health (`health`: /healthz, /readyz) and metrics (/metrics: `metrics`, the one entry
  point that builds every family, over `probemetrics`, `clientmetrics`, `namespaced`
  and `metricfamily`), and the server that answers them (`serve`; its address,
  `address`; its accept loop, `accept`; the connections it keeps, `connections`, within
  the open-files share of `descriptors`; what aiohttp reports of it, `httplog`).
- The status socket (`statussocket`), its document (`snapshot`, pure) and the answer
  under its budget, shared by namespace (`answer`, pure).
"""
