"""What one probe run came to: Succeeded, Failed or Unknown, with a message.

Stage: probe -> decide (values, pure). docs/engine.md: Succeeded and Failed are answers from
the container (or a timeout, or a container that is not running); Unknown means the
probe could not be run for reasons outside the container, and is thrown away by the
decide stage (neither counted nor written).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Result(enum.StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run's result.

    `message` is what may reach the pod and its events: for Succeeded the command's
    stdout, for Failed its stderr (or stdout when stderr is empty), or the reason
    (timeout, the runtime's error); already sanitised and at most 1 KiB of UTF-8
    (`probe.output.clean_message`). For Unknown it says why, for logs only.

    `answer` is what the container answered, the same in both states: an exec
    command's stdout (its stderr when stdout is empty), an httpGet's body, a gRPC
    health check's serving status (`SERVING`, `NOT_SERVING`, ...); "" for a tcpSocket
    connection (it answers nothing). None where nothing answered: a timeout, a refused
    or reset connection, a command the runtime could not start, a container not
    running. Cleaned, at most 1 KiB. `{{.Result}}` in a markerPolicy value is made of
    it (`probe.output.result_text`); the message is not (a failure's message is the
    status line of an httpGet, stderr of a command). A run with no answer never
    replaces a rendered value within its decided state (`decide.step`).
    """

    result: Result
    message: str = ""
    answer: str | None = None

    @property
    def answered(self) -> bool:
        """Whether the container answered (an exit status, a response, a status)."""
        return self.answer is not None

    @classmethod
    def succeeded(cls, message: str = "", *, answer: str | None = None) -> Outcome:
        return cls(Result.SUCCEEDED, message, answer)

    @classmethod
    def failed(cls, message: str = "", *, answer: str | None = None) -> Outcome:
        return cls(Result.FAILED, message, answer)

    @classmethod
    def unknown(cls, message: str) -> Outcome:
        return cls(Result.UNKNOWN, message)
