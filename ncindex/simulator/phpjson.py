"""PHP-compatible JSON encoding, as Nextcloud's ``json_encode`` produces it.

PHP's defaults differ from Python's ``json.dumps``: ``/`` is escaped as ``\\/``, non-ASCII is
written as ``\\uXXXX`` and there is no whitespace between tokens. OCS responses additionally use
``JSON_HEX_TAG`` (``<`` and ``>`` as ``\\u003C``/``\\u003E``).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["php_json_decoded", "php_json_encode"]

#: A JSON object key PHP's ``json_decode($json, true)`` turns into an integer array key
#: (a decimal integer without leading zeros or ``+``, within PHP's int range).
_INT_KEY = re.compile(r"(0|-?[1-9][0-9]*)\Z")
_PHP_INT_MAX = 2**63 - 1


def php_json_encode(value: Any, *, hex_tag: bool = False) -> str:
    """Serialise ``value`` like PHP ``json_encode`` with default flags.

    ``value`` is any JSON-compatible Python structure (dicts keep their insertion order).
    ``hex_tag`` adds PHP's ``JSON_HEX_TAG``. Returns the JSON text (ASCII only).
    """
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    # "/" only ever occurs inside strings in JSON text, so a global replace is exact.
    text = text.replace("/", "\\/")
    if hex_tag:
        text = text.replace("<", "\\u003C").replace(">", "\\u003E")
    return text


def php_json_decoded(value: Any) -> Any:
    """``value`` as ``json_decode(json_encode($value), true)`` gives it back, seen through a
    second ``json_encode``: each JSON object becomes a PHP array, which ``json_encode`` then
    writes as a list when its keys are ``0..n-1`` in order (``array_is_list``). So an empty
    object comes back as ``[]`` and ``{"0": a, "1": b}`` as ``[a, b]``; other objects keep
    their keys (as strings). ``value`` is a JSON-compatible Python structure; it is not
    changed. Lists and scalars come back as they are (their items converted)."""
    if isinstance(value, list):
        return [php_json_decoded(item) for item in value]
    if not isinstance(value, dict):
        return value
    items = {str(k): php_json_decoded(v) for k, v in value.items()}
    keys = [_php_key(k) for k in items]
    if keys == list(range(len(keys))):
        return list(items.values())
    return items


def _php_key(key: str) -> int | str:
    """The PHP array key a decoded JSON object key becomes (``"7"`` → ``7``, ``"07"`` stays)."""
    if _INT_KEY.match(key) and -_PHP_INT_MAX - 1 <= int(key) <= _PHP_INT_MAX:
        return int(key)
    return key
