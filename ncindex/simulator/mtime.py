"""Modification times a client sends (``X-OC-MTime``, ``{DAV:}lastmodified``), read as
Nextcloud reads them.

nextcloud/server ``apps/dav/lib/Connector/Sabre/MtimeSanitizer.php`` ``sanitizeMtime``
(called through ``Node::sanitizeMtime`` by ``File::put`` for ``X-OC-MTime`` and by
``Node::touch`` for a ``PROPPATCH`` of ``{DAV:}lastmodified``) refuses, with an
``InvalidArgumentException``:

* a value PHP's ``is_numeric`` rejects (hexadecimal ``0x…`` among them: its own
  ``preg_match('/^\\s*0[xX]/')`` only mattered on PHP 5);
* a value whose ``(int)`` cast is one day (86400 s) or less — "timezone-proof" against 0.

and returns the ``(int)`` cast otherwise. Neither caller catches the exception, so sabre/dav's
``Server::start`` answers 500 with it (``s:exception`` ``InvalidArgumentException``).

The messages are those of ``MtimeSanitizer.php`` at nextcloud/server commit 2ba3766b; an older
version (commit 592f2ec8) says ``X-OC-MTime header must be an integer (unix timestamp).`` and
``X-OC-MTime header must be a valid positive integer``, the message logs of Nextcloud 27.1 and
29.0 show (nextcloud/server#42618, #31464). Which release changed them was not established:
*guess* that Nextcloud 30–34 send the newer ones.
"""

from __future__ import annotations

import math
import re

__all__ = ["ONE_DAY", "MtimeError", "sanitize_mtime"]

ONE_DAY = 24 * 60 * 60
"""``MtimeSanitizer``'s lower bound (Unix seconds): a value at or below it is refused."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# PHP 8 numeric strings (Zend/zend_operators.c is_numeric_string_ex, the language reference's
# "Numeric strings"): optional leading and trailing whitespace " \t\n\r\v\f", a sign, then an
# integer, a decimal ("1.", ".5", "1.5") or either with an exponent
_WS = "[ \t\n\r\v\f]*"
_NUMERIC = re.compile(rf"{_WS}[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_WS}")


class MtimeError(ValueError):
    """A value ``MtimeSanitizer::sanitizeMtime`` refuses; ``str(exc)`` is Nextcloud's message
    (``exception`` the PHP class the client sees in ``s:exception``)."""

    exception = "InvalidArgumentException"


def _php_int(numeric: str) -> int:
    """PHP's ``(int)`` of a numeric string: an integer string exactly, a decimal or exponent
    one through a double truncated toward zero, either saturated at the 64-bit bounds
    (``zval_get_long``: ``zend_dval_to_lval_cap`` for a string)."""
    text = numeric.strip(" \t\n\r\v\f")
    try:
        value = int(text)
    except ValueError:
        number = float(text)
        value = (_INT64_MAX if number > 0 else _INT64_MIN) if math.isinf(number) else int(number)
    return max(_INT64_MIN, min(_INT64_MAX, value))


def sanitize_mtime(value: str) -> int:
    """The mtime (Unix seconds) Nextcloud reads from ``value``, a header or property text.

    Raises :class:`MtimeError` with Nextcloud's message for a value that is not numeric and for
    one of a day or less (module docstring)."""
    if not _NUMERIC.fullmatch(value):
        raise MtimeError(
            f'X-OC-MTime header must be a valid integer (unix timestamp), got "{value}".'
        )
    mtime = _php_int(value)
    if mtime <= ONE_DAY:
        raise MtimeError(
            "X-OC-MTime header must be a valid positive unix timestamp greater than one day, "
            f'got "{value}".'
        )
    return mtime
