"""Connect: from a kubeconfig or the pod's service account to an HTTP client that
speaks to the API server (`config` -> `Connection` -> `client.KubeClient`), the error
tree its answers map to (`errors`), and the resources the daemon names (`resources`)."""
