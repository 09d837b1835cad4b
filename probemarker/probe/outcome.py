"""What one probe run came to: Succeeded, Failed or Unknown, with a message.

Stage: probe -> decide (values, pure). SPEC §2: Succeeded and Failed are answers from
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

    `answer` is what the container answered, where a handler keeps it apart from the
    message: an httpGet's body (cleaned, first 1 KiB), whatever the status, while a
    failure's message is only the status and a line of it (probe/http.py). Empty for
    the other handlers. Nothing writes it to a pod yet.
    """

    result: Result
    message: str = ""
    answer: str = ""

    @classmethod
    def succeeded(cls, message: str = "", *, answer: str = "") -> Outcome:
        return cls(Result.SUCCEEDED, message, answer)

    @classmethod
    def failed(cls, message: str = "", *, answer: str = "") -> Outcome:
        return cls(Result.FAILED, message, answer)

    @classmethod
    def unknown(cls, message: str) -> Outcome:
        return cls(Result.UNKNOWN, message)
