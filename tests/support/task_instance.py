"""A stand-in for the task instance an operator's ``execute`` gets in its context: it
records what the operator pushes to XCom."""

from __future__ import annotations

from typing import Any

__all__ = ["RecordingTI"]


class RecordingTI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value
