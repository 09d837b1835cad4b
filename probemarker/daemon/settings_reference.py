"""docs/configuration.md, rendered from the settings object.

Stage: none (documentation). `python -m probemarker.daemon.settings_reference > docs/configuration.md`
writes it; a test compares the file with `render()`, so a setting added, renamed or
re-described without regenerating the page fails CI.
"""

from __future__ import annotations

import sys

from probemarker.daemon.settings import SettingDoc, describe

COMMAND = "python -m probemarker.daemon.settings_reference > docs/configuration.md"

_HEAD = f"""\
# Configuration reference

<!-- Generated from probemarker/daemon/settings.py by `{COMMAND}`;
     do not edit by hand (tests/unit/test_configuration_doc.py checks it is current). -->

`probemarker run` takes every setting as a flag or as an environment variable
`PROBEMARKER_*`; a flag wins over its variable, a variable over the default. A value that
cannot be used (an empty flag or variable, `nan`, `inf`, a number outside the range its
row gives, an unknown choice, a node name that is not a DNS subdomain) stops the daemon
before it starts, with one line naming the flag or variable, the value and what is
accepted (exit 2). An empty variable is such a value, not "unset": unset it to get the
default. `probemarker run --help` prints the same list.

In the DaemonSet (`manifests/daemonset.yaml`) set them as `env:` entries or `args:`.

| Flag | Variable | Default | Meaning |
|---|---|---|---|
"""

_TAIL = """
## Budgets shared by namespaces

One daemon serves every namespace on its node, so the write budgets are shared by
tenants ([kube-writes.md](kube-writes.md#shared-by-namespaces)):

- `--write-qps`/`--write-burst`: the namespaces with a pod whose write is due take
  turns, one write each. A namespace alone may take the whole budget; with N waiting,
  each gets at least `write-qps / N` writes a second, and a pod's write waits for at
  most one write of each other namespace per pod of its own ahead of it.
- `--event-qps`/`--event-burst`: the same turns for events. At most 1,000 event series
  wait, for all namespaces together; when they are all taken, the namespace holding
  the most gives a place to one holding fewer, so a namespace that floods drops its
  own events, counted by namespace (`probemarker_namespace_events_dropped_total`),
  and with N namespaces queuing each keeps at least 1000 / N - 1 places.

Raising a budget gives every namespace more; no setting lets one namespace take
another's share.

## Variables read besides these

- `NODE_NAME`: the node name when neither `--node` nor `PROBEMARKER_NODE` is set. The
  DaemonSet sets it from the downward API (`fieldRef: spec.nodeName`).
- `KUBECONFIG`: kubectl's variable (a list of files, merged as kubectl merges them),
  read when neither `--kubeconfig` nor `PROBEMARKER_KUBECONFIG` is set. With none of the
  three the daemon uses the in-cluster configuration: the pod's service-account token
  (re-read as the kubelet rotates it), CA and `KUBERNETES_SERVICE_HOST`/`_PORT`.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row(doc: SettingDoc) -> str:
    return (
        f"| `{doc.flag} {doc.metavar}` | `{doc.env}` | {_cell(doc.default)} | {_cell(doc.help)} |"
    )


def render() -> str:
    return _HEAD + "\n".join(row(doc) for doc in describe()) + "\n" + _TAIL


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
