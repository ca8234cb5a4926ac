"""airflow-cdc: lock-free incremental-snapshot CDC from MySQL/MariaDB to Delta Lake on Airflow + Spark."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of a package whose names load their module on
    first use: ``homes`` maps each name to its module under ``package``."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{homes[name]}"), name)

    return __getattr__
