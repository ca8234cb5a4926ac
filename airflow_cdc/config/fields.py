"""Configs to and from their fields: the job files' JSON form; and the checks fields share
(:func:`check_positive`, :func:`choice`)."""

from __future__ import annotations

import enum
import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Self, TypeVar, cast, get_origin, get_type_hints

from airflow_cdc.errors import ConfigurationError

__all__ = ["JobFile", "check_positive", "choice", "from_fields", "setting_types"]

T = TypeVar("T")
E = TypeVar("E", bound=enum.StrEnum)


class JobFile:
    """A spec the Airflow task writes to a private file (mode 0600) and the Spark job reads;
    the file's path is the job's only argument, so no secret is on a command line."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = asdict(cast(Any, self))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return from_fields(cls, data)

    def write(self, path: Path) -> Path:
        """Write the spec readable by the owner only."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.to_json(), handle)
        return path

    @staticmethod
    def failure_path(path: str | Path) -> Path:
        """Where the job leaves its error for the task that submitted it (next to the job
        file, in the same private folder)."""
        return Path(f"{path}.error")

    @classmethod
    def read_file(cls, path: str | Path) -> Self:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError as exc:
            raise ConfigurationError(f"job file {path} does not exist") from exc
        return cls.from_json(data)


def check_positive(name: str, value: float, *, what: str = "number") -> None:
    """Refuse ``value`` of the setting ``name`` unless it is a finite number above 0 (a
    :class:`ConfigurationError` saying it must be a positive ``what``)."""
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{name} must be a positive {what}, got {value!r}")


def choice(setting: str, kind: type[E], value: str) -> E:
    """``value`` (a member of ``kind`` or the text users write for one) as the member of
    ``kind``; anything else is refused, naming the setting, ``value`` and the choices."""
    try:
        return kind(value)
    except ValueError:
        raise ConfigurationError(
            f"{setting} must be one of {', '.join(kind)}; got {value!r}"
        ) from None


def setting_types(kind: type, given: Iterable[str], *, what: str, fix: str) -> dict[str, Any]:
    """The type of each field of the config ``kind``, once every ``given`` name is known to
    be one of them: a name ``kind`` lacks is refused (``<what> has no setting <name><fix>``),
    never dropped."""
    names = [f.name for f in fields(cast(Any, kind))]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigurationError(f"{what} has no setting {', '.join(unknown)}{fix}")
    hints = get_type_hints(kind)
    return {name: hints[name] for name in names}


def from_fields(kind: type[T], data: Mapping[str, Any]) -> T:
    """The config ``kind`` from its :func:`dataclasses.asdict` form: nested configs and
    tuples rebuilt from their field types; a field the data lacks keeps its default (a
    file written by an older version); a field ``kind`` lacks is refused."""
    types = setting_types(
        kind,
        data,
        what=kind.__name__,
        fix=": written by another version of airflow-cdc? Use the same version for the "
        "Airflow tasks and the jobs",
    )
    return kind(**{name: _decoded(types[name], value) for name, value in data.items()})


def _decoded(hint: Any, value: Any) -> Any:
    if is_dataclass(hint) and isinstance(hint, type):
        return from_fields(hint, value)
    if get_origin(hint) is tuple:
        return tuple(value)
    return value
