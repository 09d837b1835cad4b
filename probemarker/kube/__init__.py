"""The client layer: everything the daemon says to the API server goes through here.

Three rooms, one activity each, the other two resting on `connect`:
- `connect/`: where the API server is (kubeconfig or in-cluster: `config`,
  `kubeconfig`, `kubecontext`) -> `Connection`; the Authorization header, re-read as
  tokens rotate (`credentials`, `execcredential`); TLS session resumption
  (`tlsresume`); the one HTTP edge (`client`, over its aiohttp `sessions`: connection
  pools, deadlines, the answers read as they arrive in `streams` and `listbody`, the
  exec WebSocket in `websocket`); the one error tree, mapped once from HTTP answers
  (`errors`); the resources the daemon names (`resources`);
- `watch/`: list+watch informers (`informer`, `informertypes`, `informerfailures`),
  the watch event parser (`watchevents`) and their store (`cache`);
- `write/`: pods/status patches (`statuswrite`), events (`events`), and the
  client-side write budget (`ratelimit`).

The `pods/exec` stream is the api backend's exec transport, so it is probe/'s
(`probe/execstream.py`, `probe/execresult.py`), beside the other probes' transports.
Nothing here imports `probemarker.sim` or a stage of the daemon; only `api/` and
`kit/` below it.
"""
