"""`probemarker check`: a dry run of one marker against pods (docs/cli.md); and
`probemarker validate`.

run.py (the probes run once against the pods; reads only), marker.py (the marker: a
file's, validated as `validate` does, or the cluster's), plan.py (pure: which pods and
probes, the daemon's desired state and patch), proxy.py (httpGet through the API
server's pod proxy), report.py (pure: text, JSON, exit code); validate.py
(`probemarker validate`: marker files checked offline with the API server's rules).
"""
