"""webhook_listeners' ``eventFilter``: PHPMongoQuery's semantics on the decoded envelope.

nextcloud/server ``apps/webhook_listeners/lib/Listener/WebhooksEventListener.php``
``filterMatch``: an empty filter (``[]``, ``{}`` — both decode to PHP's empty array) matches
every envelope; any other is ``PHPMongoQuery::executeQuery($filter, $data)``
(``apps/webhook_listeners/lib/Service/PHPMongoQuery.php``), evaluated here with PHP's rules:

* keys are dot paths into the envelope; a path step whose value is PHP-``empty`` (``null``,
  ``false``, ``0``, ``""``, ``"0"``, ``[]``) or ``null`` (``isset``) ends it: the field does
  not exist, so ``{"user": null}`` matches nothing, not the envelopes without a user;
* a path step on a list tries the rest of the path on each element (``isset($v[0])``);
* a scalar is compared with ``===`` (``5`` is not ``"5"`` nor ``5.0``), unless it is a string
  ``/regex/flags``, which is ``preg_match``-ed against the value; a list value matches a
  scalar it holds (``in_array``, loose ``==``);
* the operators are ``$all $in $nin $lt $lte $gt $gte $ne $exists $mod`` and ``$not`` on a
  field; ``$and $or $nor $not`` at query level. **There is no** ``$eq``, ``$regex`` or
  ``$size``: those, and an object of plain keys as a field's value (``{"user": {"uid":
  "alice"}}``), throw ``Operator … is unknown``. PHPMongoQuery throws, too, for an operand of
  the wrong type (``$in`` without an array, ``$or`` without a non-empty list); PHP's
  ``TypeError`` where a query must be an array. :class:`FilterError` stands for all of them:
  nothing catches them between the listener and the code that dispatched the event
  (``OC\\EventDispatcher\\ServiceEventListener::__invoke``, ``EventDispatcher::dispatch``), so
  the request that changed the file fails.

The simulator's own limits (not Nextcloud's): a ``/regex/`` is run by Python's ``re`` (the
PCRE modifiers ``A D U X J n`` raise :class:`FilterError`); PHP 8's ``<``/``>`` between
values of different kinds is approximated (numbers and numeric strings numerically, other
strings by code point, ``null`` and booleans as booleans, arrays by their size and above any
scalar).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["FilterError", "mongo_match"]


class FilterError(Exception):
    """PHPMongoQuery (or PHP) threw while evaluating a filter; ``str()`` is the message,
    ``php_class`` the class of what was thrown (``Exception``, ``TypeError``,
    ``DivisionByZeroError``)."""

    def __init__(self, message: str, php_class: str = "Exception") -> None:
        super().__init__(message)
        self.php_class = php_class


# --------------------------------------------------------------------- PHP values
# A decoded JSON object or list is a PHP array; its keys are PHP keys (a decimal string key is
# an integer key, as json_decode makes it).

_INT_KEY = re.compile(r"(0|-?[1-9][0-9]*)\Z")
_NUMERIC = re.compile(
    r"[ \t\n\r\v\f]*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r\v\f]*\Z"
)


def _is_array(value: Any) -> bool:
    return isinstance(value, dict | list)


def _key(key: Any) -> int | str:
    if isinstance(key, str) and _INT_KEY.match(key):
        return int(key)
    return key if isinstance(key, int | str) else str(key)


def _entries(value: Any) -> Iterator[tuple[int | str, Any]]:
    if isinstance(value, list):
        yield from enumerate(value)
    else:
        yield from ((_key(k), v) for k, v in value.items())


def _is_list(value: Any) -> bool:
    """PHP ``array_is_list``."""
    return [k for k, _ in _entries(value)] == list(range(len(value)))


def _isset(value: Any, key: int | str) -> bool:
    """PHP ``isset($value[$key])``: a key holding a non-null value (a string: an offset)."""
    if isinstance(value, str):
        return isinstance(key, int) and -len(value) <= key < len(value)
    if not _is_array(value):
        return False
    return dict(_entries(value)).get(key) is not None


def _item(value: Any, key: int | str) -> Any:
    return dict(_entries(value))[key]


def _truthy(value: Any) -> bool:
    """PHP's boolean conversion (``"0"`` is false)."""
    if isinstance(value, str):
        return value not in ("", "0")
    if _is_array(value):
        return len(value) > 0
    return bool(value)


def _array(value: Any) -> Any:
    """``value`` where PHPMongoQuery types a parameter ``array``; else PHP's ``TypeError``."""
    if not _is_array(value):
        raise FilterError(f"an array was expected, got {type(value).__name__}", "TypeError")
    return value


def _string(value: Any) -> str:
    """PHP's ``(string)`` of a scalar (an array: ``"Array"``)."""
    if value is None or value is False:
        return ""
    if value is True:
        return "1"
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if _is_array(value):
        return "Array"
    return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and _NUMERIC.match(value):
        return float(value)
    return None


def _strict_equal(a: Any, b: Any) -> bool:
    """PHP ``===``."""
    if _is_array(a) or _is_array(b):
        if not (_is_array(a) and _is_array(b)):
            return False
        left, right = list(_entries(a)), list(_entries(b))
        return len(left) == len(right) and all(
            ka == kb and _strict_equal(va, vb)
            for (ka, va), (kb, vb) in zip(left, right, strict=True)
        )
    return type(a) is type(b) and a == b


def _loose_equal(a: Any, b: Any) -> bool:
    """PHP 8 ``==``."""
    if _is_array(a) and _is_array(b):
        left, right = dict(_entries(a)), dict(_entries(b))
        return left.keys() == right.keys() and all(
            _loose_equal(v, right[k]) for k, v in left.items()
        )
    if (a is None and isinstance(b, str)) or (b is None and isinstance(a, str)):
        return (a or "") == (b or "")
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return _truthy(a) == _truthy(b)
    if _is_array(a) or _is_array(b):
        return False
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na == nb
    return _string(a) == _string(b)


def _compare(a: Any, b: Any) -> int:
    """PHP 8 ``<=>``, approximated across kinds (module docstring)."""
    if _is_array(a) or _is_array(b):
        if not (_is_array(a) and _is_array(b)):
            return 1 if _is_array(a) else -1
        return (len(a) > len(b)) - (len(a) < len(b))
    if (a is None and isinstance(b, str)) or (b is None and isinstance(a, str)):
        a, b = a or "", b or ""
    elif a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return int(_truthy(a)) - int(_truthy(b))
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return (na > nb) - (na < nb)
    sa, sb = _string(a), _string(b)
    return (sa > sb) - (sa < sb)


def _in_array(needle: Any, haystack: Any) -> bool:
    return any(_loose_equal(item, needle) for _, item in _entries(haystack))


def _intersect_count(values: Any, wanted: Any) -> int:
    """``count(array_intersect($values, $wanted))``: string comparison of the elements."""
    strings = {_string(w) for _, w in _entries(wanted)}
    return sum(1 for _, v in _entries(values) if _string(v) in strings)


# --------------------------------------------------------------------- regex

_DELIMITED = re.compile(r"^/(.*?)/([a-z]*)$", re.I)
_FLAGS = {"i": re.I, "m": re.M, "s": re.S, "x": re.X, "u": 0, "S": 0}  # S: PCRE's study
_UNMODELLED = set("ADUXJn")  # PCRE modifiers Python's re has no equivalent of


def _preg_match(body: str, modifiers: str, subject: Any) -> bool:
    """``(bool) preg_match('/' . $body . '/' . $modifiers, $subject)``: an unescaped ``/`` in
    ``body`` ends PHP's pattern early, and an unknown modifier, like a pattern PCRE refuses, is
    a warning and no match; a PCRE modifier Python cannot follow raises :class:`FilterError`."""
    if re.search(r"(?<!\\)(\\\\)*/", body):
        return False
    flags = 0
    for modifier in modifiers:
        if modifier in _UNMODELLED:
            raise FilterError(f"the simulator does not model the regex modifier {modifier!r}")
        if modifier not in _FLAGS:
            return False
        flags |= _FLAGS[modifier]
    try:
        pattern = re.compile(body, flags)
    except re.error:
        return False
    return pattern.search(_string(subject)) is not None


# --------------------------------------------------------------------- PHPMongoQuery


def _is_equal(value: Any, operand: Any) -> bool:
    """``PHPMongoQuery::_isEqual``."""
    if _is_array(value) and _is_array(operand):
        return _loose_equal(value, operand)
    if _is_array(value):
        return _in_array(operand, value)
    if isinstance(operand, str) and (m := _DELIMITED.match(operand)):
        return _preg_match(m[1], m[2], value)
    return _strict_equal(operand, value)


def _query(query: Any, doc: Any, logical: str = "$and") -> bool:
    """``PHPMongoQuery::_executeQuery``."""
    if logical != "$and" and (not query or not _isset(query, 0)):
        raise FilterError(f"{logical} requires nonempty array")
    indexed = bool(query) and _is_list(query)
    for key, sub in _entries(query):
        if isinstance(key, str) and key.startswith("$"):
            # $not negates a query at any level; another operator is a logical one
            ok = not _query(_array(sub), doc) if key == "$not" else _query(_array(sub), doc, key)
        elif logical == "$and":
            if indexed:
                ok = _query(_array(sub), doc)
            elif _is_array(sub):
                ok = _on_element(sub, str(key), doc)
            else:
                ok = _operator("$e", sub, str(key), doc)
        else:
            ok = _query(_array(sub), doc)
        if (logical == "$and" and not ok) or (logical == "$nor" and ok):
            return False
        if logical == "$or" and ok:
            return True
        if logical not in ("$and", "$or", "$nor"):
            return False  # an unknown logical operator: logged, and the query fails
    return logical in ("$and", "$nor")


def _on_element(query: Any, element: str, doc: Any) -> bool:
    """``PHPMongoQuery::_executeQueryOnElement``: every operator of ``query`` holds."""
    return all(_operator(str(op), operand, element, doc) for op, operand in _entries(query))


def _operator(op: str, operand: Any, element: str, doc: Any) -> bool:
    """``PHPMongoQuery::_executeOperatorOnElement``."""
    if op == "$not":
        return not _on_element(_array(operand), element, doc)
    parts = element.split(".")
    value, exists = doc, True
    for index, part in enumerate(parts):
        if not _truthy(value):
            exists = False
            break
        if _isset(value, 0):
            if isinstance(value, str):
                return False  # foreach over a string: a warning, nothing iterated
            rest = ".".join(parts[index:])
            return any(_operator(op, operand, rest, _array(item)) for _, item in _entries(value))
        if not _isset(value, _key(part)):
            exists = False
            break
        value = _item(value, _key(part))
    match op:
        case "$all":
            if not exists:
                return False
            if not _is_array(operand):
                raise FilterError("$all requires array")
            if not operand:
                return False
            if not _is_array(value):
                return len(operand) == 1 and _strict_equal(value, dict(_entries(operand)).get(0))
            return _intersect_count(value, operand) == len(operand)
        case "$e":
            return exists and _is_equal(value, operand)
        case "$in" | "$nin":
            if not exists:
                return op == "$nin"
            if not _is_array(operand):
                raise FilterError(f"{op} requires array")
            if not operand:
                return op == "$nin"
            found = (
                _intersect_count(value, operand) > 0
                if _is_array(value)
                else _in_array(value, operand)
            )
            return found if op == "$in" else not found
        case "$lt":
            return exists and _compare(value, operand) < 0
        case "$lte":
            return exists and _compare(value, operand) <= 0
        case "$gt":
            return exists and _compare(value, operand) > 0
        case "$gte":
            return exists and _compare(value, operand) >= 0
        case "$ne":
            return (not exists and operand is not None) or (
                exists and not _is_equal(value, operand)
            )
        case "$exists":
            return _truthy(operand) == exists
        case "$mod":
            return exists and _mod(value, operand)
        case _:
            raise FilterError(f"Operator {op} is unknown")


def _mod(value: Any, operand: Any) -> bool:
    """``$v % $operand[0] === $operand[1]`` (PHP's ``%``: integers, the dividend's sign)."""
    if not _is_array(operand):
        raise FilterError("$mod requires array")
    if len(operand) != 2:
        raise FilterError("$mod requires two parameters in array: divisor and remainder")
    entries = dict(_entries(operand))
    a, b = _integer(value), _integer(entries.get(0))
    if b == 0:
        raise FilterError("Modulo by zero", "DivisionByZeroError")
    result = abs(a) % abs(b)
    return _strict_equal(-result if a < 0 else result, entries.get(1))


def _integer(value: Any) -> int:
    """An operand of PHP's ``%`` as the integer it becomes; a non-numeric string or an array
    is PHP 8's ``TypeError``."""
    if value is None or isinstance(value, bool | int):
        return int(value or 0)
    number = _number(value)
    if number is None:
        raise FilterError(f"Unsupported operand types: {type(value).__name__} % int", "TypeError")
    return int(value) if isinstance(value, str) and _INT_KEY.match(value.strip()) else int(number)


def mongo_match(doc: dict[str, Any], query: Any) -> bool:
    """Whether the envelope ``doc`` passes the ``eventFilter`` ``query`` (a decoded JSON
    object or list), as ``WebhooksEventListener::filterMatch`` decides it (module
    docstring). Raises :class:`FilterError` where PHPMongoQuery or PHP throws."""
    if _is_array(query) and not query:
        return True
    return _query(_array(query), doc)  # filterMatch(array $filter)
