"""PHP-compatible JSON encoding, as Nextcloud's ``json_encode`` produces it.

PHP's defaults differ from Python's ``json.dumps``: ``/`` is escaped as ``\\/``, non-ASCII is
written as ``\\uXXXX`` and there is no whitespace between tokens. OCS responses additionally use
``JSON_HEX_TAG`` (``<`` and ``>`` as ``\\u003C``/``\\u003E``).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["php_json_encode"]


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
