"""Connect: from a kubeconfig or the pod's service account to an HTTP client that
speaks to the API server (`config` -> `Connection` -> `client.KubeClient`).

- Where the API server is: `config` (a kubeconfig or in-cluster), `kubeconfig`
  (reading the files as kubectl does), `kubecontext` (choosing a context).
- Who we are: `credentials` (the Authorization header, re-read as tokens rotate),
  `execcredential` (a kubeconfig `exec` plugin, run by us).
- The HTTP edge: `client` (`KubeClient`: requests, deadlines, a 401 retried once),
  over `sessions` (its three aiohttp pools, the one place aiohttp's exceptions end)
  and `tlsresume` (TLS session resumption); `streams` (a watch line by line, a LIST
  item by item through `listbody`); `websocket` (an exec's open WebSocket).
- The error tree its answers map to (`errors`) and the resources the daemon names
  (`resources`).
"""
