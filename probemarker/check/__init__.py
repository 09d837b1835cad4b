"""`probemarker check`: a dry run of one marker against pods (docs/cli.md).

plan.py (pure: which pods and probes, the daemon's desired state and patch),
proxy.py (httpGet through the API server's pod proxy), report.py (text, JSON, exit
code), run.py (the requests; reads only).
"""
