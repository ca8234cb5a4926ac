"""Coercion of rendered template values.

Templated fields render to strings unless the DAG sets ``render_template_as_native_obj``;
"{{ params.tables }}" then arrives as ``"['shop.orders']"``. These helpers accept both the
native value and its text form, so an operator works in either kind of DAG, and they raise
:class:`ConfigurationError` naming the field, because a wrong param is a user's typo to fix.
"""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from typing import Any, TypeVar, cast, get_origin

from airflow_cdc.config import setting_types
from airflow_cdc.errors import ConfigurationError

__all__ = [
    "as_bool",
    "as_config",
    "as_mapping",
    "as_positive_int",
    "as_str_list",
    "parse_literal",
]

C = TypeVar("C")


def parse_literal(text: str) -> Any:
    """JSON, else a Python literal (what Jinja renders a list or dict to), else the text."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError):
        return text


def as_positive_int(name: str, value: Any, *, zero: bool = False) -> int:
    """A positive whole number (or 0 with ``zero=True``) from an int or its decimal text."""
    if isinstance(value, str):
        value = parse_literal(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        wanted = "0 or a positive whole number" if zero else "a positive whole number"
        raise ConfigurationError(f"{name} must be {wanted}, got {value!r}")
    return value


def as_bool(name: str, value: Any) -> bool:
    """A flag from a bool or its text (``True``/``true``/``False``/``false``; ``None`` or
    empty text: false)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "false", "", "none"):
        return text == "true"
    raise ConfigurationError(f"{name} must be true or false, got {value!r}")


def as_str_list(name: str, value: Any) -> list[str]:
    """A list of non-empty strings from a list, its JSON/literal text, or comma-separated text."""
    if isinstance(value, str):
        parsed = parse_literal(value)
        value = parsed if isinstance(parsed, list | tuple) else value.split(",")
    if not isinstance(value, list | tuple):
        raise ConfigurationError(f"{name} must be a list of strings, got {value!r}")
    result: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ConfigurationError(f"{name} must be a list of strings, got item {item!r}")
        if item.strip():
            result.append(item.strip())
    return result


def as_mapping(name: str, value: Any) -> dict[str, Any]:
    """A dict from a dict, its JSON/literal text, or ``None``/empty text (an empty dict)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        value = parse_literal(value)
    if not isinstance(value, dict):
        raise ConfigurationError(f"{name} must be a mapping, got {value!r}")
    return {str(k): v for k, v in value.items()}


def as_config(name: str, kind: type[C], value: Any) -> C:
    """The frozen config ``kind`` (a dataclass validated in ``__post_init__``) from an
    instance, a mapping of some of its fields (each native or rendered text; the others keep
    their defaults), that mapping's text, or ``None`` (every default)."""
    if isinstance(value, kind):
        return value
    given = as_mapping(name, value)
    known = ", ".join(f.name for f in fields(cast(Any, kind)))
    types = setting_types(kind, given, what=name, fix=f"; its settings are {known}")
    return kind(**{k: _as_type(f"{name}.{k}", types[k], v) for k, v in given.items()})


def _as_type(name: str, hint: Any, value: Any) -> Any:
    if hint is int or hint is float:
        parsed = parse_literal(value) if isinstance(value, str) else value
        allowed = (int, float) if hint is float else (int,)
        if isinstance(parsed, bool) or not isinstance(parsed, allowed):
            wanted = "a number" if hint is float else "a whole number"
            raise ConfigurationError(f"{name} must be {wanted}, got {value!r}")
        return hint(parsed)
    if get_origin(hint) is tuple:
        return tuple(as_str_list(name, value))
    return value
