"""Strict JSON for request bodies: RFC 8259, without what Python's parser adds to it.

Python's ``json.loads`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, reads ``1e400`` as
``inf``, and keeps the last value of a key an object names twice. Request bodies (webhook
deliveries, searches, RCP messages) are read with :func:`loads`, which refuses all of these,
so a caller hears about them instead of getting one of several readings.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import BeforeValidator, StrictInt


def loads(body: bytes | str) -> Any:
    """The JSON value of ``body``. Raises ``ValueError`` (``json.JSONDecodeError`` among
    them) for text that is not JSON, for ``NaN``/``Infinity``, a number beyond the float
    range, or an object naming a key twice; ``UnicodeDecodeError`` for bytes that are not
    UTF-8 (also a ``ValueError``) and ``RecursionError`` for nesting deeper than Python's
    recursion limit.

    Bytes are read as UTF-8 (RFC 8259 §8.1: JSON exchanged between systems "MUST be encoded
    using UTF-8"), a leading byte order mark ignored as §8.1 allows: ``json.loads`` would
    also guess UTF-16 and UTF-32 from the first bytes and take such a body."""
    text = body.decode("utf-8-sig") if isinstance(body, bytes) else body
    return json.loads(
        text, parse_constant=_constant, parse_float=finite_float, object_pairs_hook=_unique_keys
    )


def lone_surrogate_at(value: Any, path: str = "") -> str | None:
    """Where JSON data ``value`` (what :func:`loads` returns) first holds a string with a lone
    surrogate (``"\\ud800"`` in the JSON text, which RFC 8259 §8.2 lets parsers read
    "unpredictably" and strict ones refuse), as a key or a value; ``None`` when nowhere.

    The place is a path below ``path``: members joined by ``.``, list items as ``[i]``
    (``filter.and[1].value``, ``query[0]``); ``path`` itself for ``value`` a string. A key
    holding one is named with each surrogate written as the ``\\uXXXX`` escape that sent it, so
    the path can be echoed. Lists and objects are walked without recursion (nesting as deep as
    :func:`loads` takes)."""
    stack: list[tuple[str, Any, bool]] = [(path, value, True)]  # (where, value, key valid)
    while stack:
        where, item, key_valid = stack.pop()
        if not key_valid or (isinstance(item, str) and not _valid_unicode(item)):
            return where
        if isinstance(item, dict):
            members = [
                (
                    _escaped(key) if where == "" else f"{where}.{_escaped(key)}",
                    member,
                    _valid_unicode(key),
                )
                for key, member in item.items()
            ]
            stack.extend(reversed(members))
        elif isinstance(item, list):
            stack.extend(
                (f"{where}[{i}]", member, True) for i, member in reversed(list(enumerate(item)))
            )
    return None


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(key: str) -> str:
    """``key`` with each lone surrogate written as its ``\\uXXXX`` escape."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def finite_float(text: bytes | str) -> float:
    """``float(text)`` when finite; raises ``ValueError`` otherwise (also for NaN and ±inf)."""
    value = float(text)
    if not math.isfinite(value):
        shown = text[:40] if isinstance(text, str) else repr(text[:40])
        raise ValueError(f"number {shown} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return out


def _whole(value: Any) -> Any:
    """``value`` as an ``int`` when it is a float with no fractional part, else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WHOLE_NUMBER = BeforeValidator(_whole)
"""Reads a float with no fractional part as an ``int`` (see :data:`JsonInt`). For a bounded
field, put the bounds before it, on the ``StrictInt``: ``Annotated[StrictInt, Field(ge=1,
le=100), WHOLE_NUMBER]``; bounds put after it (``Field(ge=…)`` on a ``JsonInt``) are checked,
but the JSON Schema shows them as ``ge``/``le``, keywords JSON Schema does not have, instead of
``minimum``/``maximum``."""

JsonInt = Annotated[StrictInt, WHOLE_NUMBER]
"""An integer as JSON Schema counts one, for request fields: ``5`` or ``5.0`` (JSON Schema
2020-12 core §4.2.1: a number with a zero fractional part is an integer; tool callers write
5.0), never ``5.5``, a string or a boolean. Bounded: see :data:`WHOLE_NUMBER`."""
