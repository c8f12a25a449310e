"""Checked access to raw benchmark records, so that bad input fails with one line for people.

Every loader reads untrusted JSON written by someone else. Rather than letting a ``KeyError`` or
``TypeError`` escape from deep inside a conversion, loaders read fields through :func:`field`,
which names the file, the record and the field in its message, e.g.
``locomo10.json: record 3 (conv-30) qa[17]: 'category' must be 1-5, got 7``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


class DataError(ValueError):
    """Benchmark data is missing, corrupt or not in the official format; the message is one line."""


def where(file: str, index: int | None = None, ident: Any = None, path: str = "") -> str:
    """``file: record i (id) path`` -- the location prefix of an error message."""
    text = file
    if index is not None:
        text += f": record {index}"
        if ident not in (None, ""):
            text += f" ({ident})"
    if path:
        text += f" {path}" if index is not None else f": {path}"
    return text


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true/false",
    list: "a list",
    dict: "an object",
}


def _type_name(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        str: "string",
        bool: "bool",
        int: "int",
        float: "float",
        list: "list",
        dict: "object",
    }.get(type(value), type(value).__name__)


def field(
    obj: Any,
    key: str,
    kinds: type | tuple[type, ...],
    loc: str,
    *,
    optional: bool = False,
    default: Any = None,
) -> Any:
    """``obj[key]`` checked to be of ``kinds``; raises :class:`DataError` naming ``loc`` and key.

    ``bool`` is never accepted where an ``int`` is asked for (JSON ``true`` is not a number).
    """
    if not isinstance(obj, dict):
        raise DataError(f"{loc}: expected an object, got {_json_type(obj)}")
    if key not in obj or obj[key] is None:
        if optional:
            return default
        raise DataError(f"{loc}: missing field '{key}'")
    value = obj[key]
    kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
    bad_bool = isinstance(value, bool) and bool not in kinds_t
    if bad_bool or not isinstance(value, kinds_t):
        raise DataError(
            f"{loc}: '{key}' must be {_type_name(kinds)}, got {_json_type(value)} {value!r:.60}"
        )
    return value


def as_text(value: Any) -> str:
    """An answer as a string: official answers are sometimes ints (``2022``) or floats."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def parse_time(text: str, formats: tuple[str, ...]) -> str:
    """``text`` as ISO 8601 (minutes) when one of ``formats`` matches, else ``text`` unchanged."""
    cleaned = " ".join(text.split())
    for fmt in formats:
        try:
            return datetime.strptime(cleaned, fmt).isoformat(timespec="minutes")
        except ValueError:
            continue
    return text
