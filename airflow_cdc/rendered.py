"""Coercion of rendered template values.

Templated fields render to strings unless the DAG sets ``render_template_as_native_obj``;
"{{ params.tables }}" then arrives as ``"['shop.orders']"``. These helpers accept both the
native value and its text form, so an operator works in either kind of DAG, and they raise
:class:`ConfigurationError` naming the field, because a wrong param is a user's typo to fix.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from airflow_cdc.errors import ConfigurationError

__all__ = ["as_mapping", "as_positive_int", "as_str_list", "parse_literal"]


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
