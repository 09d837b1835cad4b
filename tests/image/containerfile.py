"""Reading the repository's Containerfile for tests: its instructions, stage by stage.

Stage: a test helper. Input: Containerfile text. Output: `Instruction`s (keyword and
arguments, continuation lines joined, comments dropped) grouped into `Stage`s, the
instructions before the first FROM apart (the global ARGs). Only what the tests read is
understood: no parser directives, no heredocs (the Containerfile uses neither).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "Containerfile"


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY...
    arguments: str


@dataclass(slots=True)
class Stage:
    base: str  # what FROM names, as written
    name: str  # the AS name, or ""
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [i.arguments for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"stage {self.name or self.base!r} has no {keyword}"
        return found[-1]

    def env(self) -> dict[str, str]:
        """ENV key=value pairs (the form the Containerfile uses), later ones winning."""
        out: dict[str, str] = {}
        for arguments in self.all("ENV"):
            for key, value in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)', arguments):
                out[key] = value.strip('"')
        return out


def instructions(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # inside a continuation too, as BuildKit and buildah read it
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        keyword, _, arguments = (pending + line).partition(" ")
        out.append(Instruction(keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, f"the last instruction is continued into nothing: {pending!r}"
    return out


def stages(text: str) -> tuple[list[Instruction], list[Stage]]:
    """(the instructions before the first FROM, the stages in order)."""
    head: list[Instruction] = []
    out: list[Stage] = []
    for item in instructions(text):
        if item.keyword == "FROM":
            words = item.arguments.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            out.append(Stage(base=words[0], name=name))
        elif out:
            out[-1].instructions.append(item)
        else:
            head.append(item)
    return head, out


def load() -> tuple[list[Instruction], list[Stage]]:
    return stages(CONTAINERFILE.read_text())


def exec_form(arguments: str) -> list[str]:
    """The JSON array of an ENTRYPOINT or CMD in exec form (a shell form fails here)."""
    value = json.loads(arguments)
    assert isinstance(value, list), arguments
    assert all(isinstance(word, str) for word in value), arguments
    return value


def image_user() -> tuple[int, int]:
    """The final stage's USER as numbers (UID, GID)."""
    _, found = load()
    user = found[-1].last("USER")
    match = re.fullmatch(r"(\d+):(\d+)", user)
    assert match, f"Containerfile: USER {user!r} is not numeric UID:GID"
    return int(match[1]), int(match[2])
