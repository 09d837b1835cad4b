"""Reading kubeconfig files as kubectl does, without kubernetes_asyncio (or its models).

Stage: start-up, before `kubecontext.choose_target` picks the context and
`config.load_kubeconfig` builds a `Connection`. Input: one path or a `KUBECONFIG`
list. Output: the files' named clusters, users and contexts, merged (`Merged`), or
`ConfigError` with one line that names the file and the fix.

Rules followed (client-go `tools/clientcmd/loader.go`):
- one path is an explicit file: it must exist. Several (a `KUBECONFIG` list) are
  merged; missing ones are skipped, but at least one must exist;
- merging: the first file that names a cluster, user or context wins, whole (a
  second file's entry of the same name is ignored, even its other fields); the first
  file that sets `current-context` wins;
- an empty file is an empty configuration;
- every entry remembers its file, so that relative paths in it (`resolve_path`) are
  relative to the directory of the file that declares it.

Everything here is pure except `read_kubeconfigs`, which stats and reads the files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from probemarker.kube.connect.errors import KubeError

__all__ = [
    "ConfigError",
    "Entry",
    "KubeconfigFile",
    "Merged",
    "merge_kubeconfigs",
    "parse_kubeconfig",
    "read_kubeconfigs",
    "resolve_path",
    "split_paths",
]

Body = Mapping[str, Any]


class ConfigError(KubeError):
    """The connection cannot be configured; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A named cluster, user or context, and the file that declared it."""

    name: str
    body: Body
    origin: Path


@dataclass(frozen=True, slots=True)
class KubeconfigFile:
    path: Path
    clusters: tuple[Entry, ...] = ()
    users: tuple[Entry, ...] = ()
    contexts: tuple[Entry, ...] = ()
    current_context: str = ""


@dataclass(frozen=True, slots=True)
class Merged:
    """Several files as one, by kubectl's merge rules."""

    paths: tuple[Path, ...]
    clusters: Mapping[str, Entry]
    users: Mapping[str, Entry]
    contexts: Mapping[str, Entry]
    current_context: str = ""

    @property
    def where(self) -> str:
        return os.pathsep.join(str(p) for p in self.paths)


def split_paths(paths: str) -> list[str]:
    """A `KUBECONFIG`-style list (os.pathsep), empty entries dropped, `~` expanded."""
    return [os.path.expanduser(p) for p in paths.split(os.pathsep) if p]


def resolve_path(value: str, origin: Path) -> str:
    """A path from a kubeconfig, relative to the file that names it; '' stays ''."""
    if not value or os.path.isabs(value):
        return value
    return str(Path(os.path.abspath(origin.parent)) / value)


# -- parsing one file ------------------------------------------------------------------


def parse_kubeconfig(text: str, path: Path) -> KubeconfigFile:
    """One file's named entries and current-context; an empty file is an empty config."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(
            f"kubeconfig {str(path)!r} is not YAML: {_yaml_problem(err)}; check it with "
            "`kubectl config view`"
        ) from None
    if document is None:
        return KubeconfigFile(path)
    if not isinstance(document, dict):
        raise ConfigError(
            f"kubeconfig {str(path)!r} is not a kubeconfig: its top level is a "
            f"{_kind(document)}, not a mapping with clusters, users and contexts"
        )
    current = document.get("current-context") or ""
    if not isinstance(current, str):
        raise ConfigError(f"kubeconfig {str(path)!r}: current-context must be a string")
    return KubeconfigFile(
        path,
        clusters=_entries(document, "clusters", "cluster", path),
        users=_entries(document, "users", "user", path),
        contexts=_entries(document, "contexts", "context", path),
        current_context=current,
    )


def _entries(document: Body, section: str, key: str, path: Path) -> tuple[Entry, ...]:
    items = document.get(section)
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ConfigError(f"kubeconfig {str(path)!r}: {section} must be a list")
    out = []
    for i, item in enumerate(items):
        where = f"kubeconfig {str(path)!r}: {section}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{where} needs a name")
        body = item.get(key)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise ConfigError(f"{where} ({item['name']}): {key} must be a mapping")
        out.append(Entry(item["name"], body, path))
    return tuple(out)


def merge_kubeconfigs(files: Sequence[KubeconfigFile]) -> Merged:
    """client-go's merge: per name, the first file's entry wins whole; so does the first
    non-empty current-context."""
    clusters: dict[str, Entry] = {}
    users: dict[str, Entry] = {}
    contexts: dict[str, Entry] = {}
    current = ""
    for one in files:
        for target, entries in ((clusters, one.clusters), (users, one.users)):
            for entry in entries:
                target.setdefault(entry.name, entry)
        for entry in one.contexts:
            contexts.setdefault(entry.name, entry)
        current = current or one.current_context
    return Merged(tuple(f.path for f in files), clusters, users, contexts, current)


# -- reading the files (I/O) -----------------------------------------------------------


def read_kubeconfigs(paths: Sequence[str]) -> list[KubeconfigFile]:
    """One path: that file, which must exist. Several: each that exists, merged in order;
    a missing one is skipped (as kubectl skips it in KUBECONFIG), but not all."""
    if not paths:
        raise ConfigError("no kubeconfig named: pass --kubeconfig FILE or set KUBECONFIG")
    files = []
    for name in paths:
        path = Path(name)
        if not path.exists() and len(paths) > 1:
            continue
        files.append(parse_kubeconfig(_read(path), path))
    if not files:
        raise ConfigError(
            f"none of the kubeconfig files {os.pathsep.join(paths)!r} exists: pass "
            "--kubeconfig FILE or fix KUBECONFIG"
        )
    return files


def _read(path: Path) -> str:
    if path.is_dir():
        raise ConfigError(
            f"kubeconfig {str(path)!r} is a directory, not a file: pass the kubeconfig "
            "file itself (e.g. ~/.kube/config)"
        )
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"kubeconfig {str(path)!r} does not exist: pass --kubeconfig FILE "
            "(or set KUBECONFIG), or run in a pod to use the in-cluster config"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else "not UTF-8"
        raise ConfigError(f"cannot read kubeconfig {str(path)!r}: {reason}") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What PyYAML found and where, on one line (its own text spans several)."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return f"{err.problem}{where}"
    return " ".join(str(err).split()) or type(err).__name__


def _kind(value: object) -> str:
    return {"list": "list", "str": "string"}.get(type(value).__name__, type(value).__name__)
