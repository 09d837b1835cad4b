"""The admissionregistration.k8s.io Go types, as the readiness-gates components are
checked against them (tests/manifests/test_readiness_gates.py).

Stage: a test helper. Input: `types.go` of a version of k8s.io/api's
admissionregistration (and, for the aliases `type X = v1.X`, the same commit's v1
file). Output: for each Go struct, its JSON fields (name -> Go type, inline or not);
for each string enum, its values. The extracted tables are kept in
tests/manifests/data/admissionregistration-types.json, with the commit each came from,
so that CI needs no network; regenerate them from a clone of kubernetes/api with

    python -m tests.manifests.admission_types GITDIR > tests/manifests/data/admissionregistration-types.json

(`GITDIR`: a clone, bare or not, e.g. what `git clone --bare
https://github.com/kubernetes/api` makes). The versions read are VERSIONS below: each
API version at the first release of Kubernetes that serves the MutatingAdmissionPolicy
kinds in it (v1alpha1: 1.32, v1beta1: 1.34, v1: 1.36).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

# API version -> (k8s.io/api tag, the Kubernetes release)
VERSIONS: dict[str, tuple[str, str]] = {
    "v1alpha1": ("v0.32.0", "1.32"),
    "v1beta1": ("v0.34.0", "1.34"),
    "v1": ("v0.36.0", "1.36"),
}

_TYPE = re.compile(r"^type (\w+) (?:= )?([\w.\[\]*]+)(?: struct \{)?", re.M)
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\t(?:(\w+) )?([\w.\[\]*]+) `json:\"([^\"]*)\"", re.M)
_CONST = re.compile(r"^\t(\w+)\s+(\w+)\s+=\s+(\"[^\"]*\"|v1\.\w+)", re.M)


def parse(source: str) -> dict[str, Any]:
    """Structs, aliases and enum values of one types.go."""
    structs: dict[str, dict[str, dict[str, Any]]] = {}
    for name, body in _STRUCT.findall(source):
        fields: dict[str, dict[str, Any]] = {}
        for _name, go_type, tag in _FIELD.findall(body):
            json_name = tag.split(",")[0]
            inline = "inline" in tag.split(",")[1:]
            key = json_name if json_name else f"<inline {go_type}>"
            fields[key] = {"type": go_type, "inline": inline or not json_name}
        structs[name] = fields
    aliases = {
        name: target
        for name, target in _TYPE.findall(source)
        if target.startswith("v1.") and name not in structs
    }
    enums: dict[str, list[str]] = {}
    for _const, type_name, value in _CONST.findall(source):
        enums.setdefault(type_name, []).append(value)
    return {"structs": structs, "aliases": aliases, "enums": enums}


def resolve(version: dict[str, Any], v1: dict[str, Any]) -> dict[str, Any]:
    """`version`'s tables with `v1.X` aliases and constants taken from the v1 file."""
    structs = dict(version["structs"])
    enums: dict[str, list[str]] = {}
    for name, target in version["aliases"].items():
        target = target.removeprefix("v1.")
        if target in v1["structs"]:
            structs[name] = v1["structs"][target]
    v1_consts = {}
    for const_re in _CONST.finditer(v1["_source"]):
        v1_consts[const_re.group(1)] = const_re.group(3)
    for type_name, values in version["enums"].items():
        enums[type_name] = [
            json.loads(v1_consts[v.removeprefix("v1.")]) if v.startswith("v1.") else json.loads(v)
            for v in values
        ]
    return {"structs": structs, "enums": enums}


def _show(gitdir: str, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", "show", f"{rev}:{path}"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip


def extract(gitdir: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for version, (tag, release) in VERSIONS.items():
        commit = subprocess.run(
            ["git", f"--git-dir={gitdir}", "rev-parse", f"{tag}^{{commit}}"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        path = f"admissionregistration/{version}/types.go"
        v1_source = _show(gitdir, commit, "admissionregistration/v1/types.go")
        v1 = {**parse(v1_source), "_source": v1_source}
        tables = resolve(parse(_show(gitdir, commit, path)), v1)
        out[version] = {
            "source": f"github.com/kubernetes/api {tag} ({commit}) {path}",
            "kubernetes": release,
            **tables,
        }
    return out


if __name__ == "__main__":
    print(json.dumps(extract(sys.argv[1]), indent=1, sort_keys=True))
