"""The one place that validates search filters and builds Qdrant filters (DESIGN §9).

Two steps, both driven by the table in :mod:`ncindex.search.filter_fields`:

1. **Parse** (user-independent): the RCP/1 filter tree (``{and|or|not: …}`` nodes and
   ``{field, op, value}`` leaves) is validated by the RCP SDK's canonical validator,
   ``rcp.filter.validate``, against the advertised fields, types and operators; then every
   value is checked and coerced for its field (:func:`parse_tree`). The convenience parameters
   of ``POST /v1/search`` (``doc_types``, ``modified_after``, …) become leaves of the same
   kind (:func:`request_tree`). Bad input raises :class:`FilterError` with a stable ``code``
   (``invalid_filter``, ``unknown_field``, ``unsupported_operator``, ``invalid_value``) and the
   offending ``field`` (a path such as ``filter.and[1].op``). A node's key the tree does not
   define (``valu``) is refused too, except as RCP/1 reads a filter, which ignores it
   (:func:`parse_rcp_tree`, which also reads a ``date`` only as RFC 3339).
2. **Compile** (per caller): :func:`build_filter` turns the tree into one typed
   ``qdrant_client.models.Filter`` — never strings — AND-ed with the caller's ``acl``
   principal. The store applies it in both prefetch branches, so it holds before fusion.

Operator semantics: ``ne`` is ``not eq`` and ``nin`` is ``not in``, so both also match
documents that lack the field; ``exists`` is true when the field holds a non-empty value;
``contains`` on ``tags`` is element membership and on ``title`` a whole-word match;
``date`` values are RFC 3339 (naive ⇒ UTC) or Unix seconds.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal

import rcp
from qdrant_client import models

from ncindex.documents import has_dot_segment, normalize_path
from ncindex.embedding import analyzer
from ncindex.errors import FilterError
from ncindex.search.filter_fields import (
    ALL_OPERATORS,
    FIELD_TYPES,
    FIELDS,
    MAX_FILTER_DEPTH,
    MAX_FILTER_LEAVES,
    MAX_LIST_VALUES,
    MAX_SECONDS,
    MAX_STRING_CHARS,
    TIME_EXAMPLES,
    TIME_PATTERN,
    FilterField,
)
from ncindex.store.queries import acl_condition

_INT64 = 2**63
_RANGE_OPS = ("gt", "gte", "lt", "lte")


@dataclass(frozen=True, slots=True)
class Leaf:
    """A validated condition: ``value`` is coerced for the field (a tuple for ``in``/``nin``,
    a bool for ``exists``, float seconds for dates, a normalised path for path fields);
    ``where`` is the request's path of the value (``filter.and[1].value``, ``tags``; ``""``
    for a leaf made otherwise), what an error about it names (not compared)."""

    field: FilterField
    op: str
    value: Any
    where: str = dataclass_field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Group:
    """``and``/``or`` of one or more children, or ``not`` of exactly one."""

    kind: Literal["and", "or", "not"]
    children: tuple[Node, ...]


Node = Leaf | Group


def tree_dict(node: Node | None) -> dict[str, Any]:
    """A validated tree as JSON (``explain``'s ``filters``): leaves ``{field, op, value}``
    with the coerced value (lists for ``in``/``nin``, Unix seconds for dates, normalised
    paths), groups ``{and: [...]}``, ``{or: [...]}``, ``{not: {...}}``; ``{}`` for none."""
    if node is None:
        return {}
    if isinstance(node, Leaf):
        value = list(node.value) if isinstance(node.value, tuple) else node.value
        return {"field": node.field.name, "op": node.op, "value": value}
    children = [tree_dict(c) for c in node.children]
    return {node.kind: children[0] if node.kind == "not" else children}


# --- parsing --------------------------------------------------------------------------------


def parse_tree(raw: Any) -> Node | None:
    """Validate an RCP/1 filter tree and coerce its values; ``None`` for an absent (``None``)
    filter. An empty one (``{}``) is ``invalid_filter``: a caller who built a filter and
    ended with nothing meant some condition, and searching everything would hide that (as
    ``tags: []`` is refused: leave it out for no filter). A node's key that is neither its
    combinator nor a leaf's ``field``, ``op``, ``value`` (a misspelt ``valu``) is
    ``invalid_filter`` naming it. Raises :class:`FilterError` (see the module docstring)."""
    if isinstance(raw, dict) and not raw:
        raise FilterError(
            "invalid_filter",
            "filter",
            "is empty ({}): give a condition, or leave filter out (or null) for no filter",
        )
    node, _ignored = _parse(raw, as_rcp=False)
    return node


def parse_rcp_tree(raw: Any) -> tuple[Node | None, list[str]]:
    """:func:`parse_tree` as RCP/1 reads a filter (``1ay1/rcp`` ``spec/rcp-1.0.md``):

    * a node's unknown key is ignored, not refused, and returned by its path
      (``filter.and[1].valu``), in tree order, for the answer to name. §4.6, "Unknown fields
      in any object MUST be ignored by the receiver, never rejected", and §14.1 item 7 of L0,
      except only filter field *names* (the value of ``field``), which are still refused; so
      is a node that is neither one leaf nor one combinator once its unknown keys are set
      aside, as the SDK's validator (``rcp.filter.validate``, which ignores such keys)
      refuses it;
    * an empty filter (``{}``) is no filter, as for an absent one (the SDK's validator
      answers ``None`` for both), not refused as :func:`parse_tree` refuses it;
    * a ``date`` value is an RFC 3339 string only (``RCP_DATE_ENCODING``): §4.6 writes a point
      in time as an RFC 3339 string or an integer count of *milliseconds* since the epoch,
      "the server declares which of the two encodings it accepts", and a number here was read
      as Unix seconds, so a number is ``invalid_value`` naming it.

    Raises :class:`FilterError` as :func:`parse_tree` does otherwise."""
    return _parse(raw, as_rcp=True)


def _parse(raw: Any, *, as_rcp: bool) -> tuple[Node | None, list[str]]:
    """The tree and the paths of its nodes' unknown keys. Unless ``as_rcp`` the first unknown
    key is raised (before the values are checked); with it they are set aside, and a date
    written as a number is raised before the values are checked."""
    if raw is None:
        return None, []
    normalised = _validate(raw)
    if normalised is None:
        return None, []
    unknown = list(_unknown_keys(raw, "filter"))
    if not as_rcp and unknown:
        path, key = unknown[0]
        raise FilterError(
            "invalid_filter",
            path,
            f"unknown key {key!r}: a leaf has field, op and value; a combinator one of "
            "and, or, not",
        )
    numeric = next(_numeric_times(normalised, "filter"), None) if as_rcp else None
    if numeric is not None:  # before _build, which would read it as seconds
        raise FilterError(
            "invalid_value", numeric, "must be an RFC 3339 time such as 2026-01-31T00:00:00Z"
        )
    node = _build(normalised, raw, "filter")
    leaves = _count_leaves(node)
    if leaves > MAX_FILTER_LEAVES:
        raise FilterError(
            "invalid_filter", "filter", f"{leaves} conditions; at most {MAX_FILTER_LEAVES}"
        )
    _refuse_empty_ranges(node, "filter")
    return node, [path for path, _key in unknown]


def _conjuncts(node: Node, path: str) -> Iterator[tuple[str, Leaf]]:
    """Each leaf that must hold for ``node`` to hold (reached through ``and`` groups alone)
    with the path of its value (``filter.and[1].value``)."""
    if isinstance(node, Leaf):
        yield f"{path}.value", node
    elif node.kind == "and":
        for i, child in enumerate(node.children):
            yield from _conjuncts(child, f"{path}.and[{i}]")


def _refuse_empty_ranges(node: Node, path: str) -> None:
    """:func:`refuse_empty_range` on the conditions that must hold together in ``node`` and
    in every branch of its ``or`` and ``not`` groups (an empty range there is as much a
    mistake: a branch that matches nothing, or a ``not`` that matches everything)."""
    refuse_empty_range(list(_conjuncts(node, path)))
    _refuse_in_branches(node, path)


def _refuse_in_branches(node: Node, path: str) -> None:
    if isinstance(node, Leaf):
        return
    for i, child in enumerate(node.children):
        if node.kind == "and":
            _refuse_in_branches(child, f"{path}.and[{i}]")
        else:
            where = f"{path}.not" if node.kind == "not" else f"{path}.or[{i}]"
            _refuse_empty_ranges(child, where)


def refuse_empty_range(conjuncts: Sequence[tuple[str, Leaf]]) -> None:
    """Raise :class:`FilterError` (``invalid_value``) when the range leaves (``gt``, ``gte``,
    ``lt``, ``lte``) among ``conjuncts`` — ``(path of the value, leaf)`` pairs, conditions
    that must all hold — bound one field to an interval that holds nothing, as
    :func:`request_tree` refuses ``modified_after`` later than or equal to
    ``modified_before``: the tightest lower bound later than the tightest upper one names the
    lower bound's path; equal bounds of which one is strict (``[t, t)``) name the upper's."""
    lower: dict[str, tuple[str, Leaf]] = {}
    upper: dict[str, tuple[str, Leaf]] = {}
    for where, leaf in conjuncts:
        name, op, value = leaf.field.name, leaf.op, leaf.value
        if op in ("gt", "gte"):
            held = lower.get(name)
            if held is None or (value, op == "gt") > (held[1].value, held[1].op == "gt"):
                lower[name] = (where, leaf)
        elif op in ("lt", "lte"):
            held = upper.get(name)
            if held is None or (value, op == "lte") < (held[1].value, held[1].op == "lte"):
                upper[name] = (where, leaf)
    for name, (low_at, low) in lower.items():
        if name not in upper:
            continue
        high_at, high = upper[name]
        if low.value > high.value:
            raise FilterError(
                "invalid_value",
                low_at,
                f"{_bound(low)} is {'later' if low.field.type == 'date' else 'greater'} "
                f"than {_bound(high)} ({high_at}): no {name} lies between them, so nothing "
                "can match",
            )
        day = low.field.type == "date"
        if low.value == high.value and (low.op, high.op) != ("gte", "lte"):
            raise FilterError(
                "invalid_value",
                high_at,
                f"{_bound(high)} and {_bound(low)} ({low_at}) leave no {name} between "
                "them, so nothing can match"
                + ("; for one day give the next day's date as the lt bound" if day else ""),
            )


def _bound(leaf: Leaf) -> str:
    """``modified_at lt 2026-01-01T00:00:00Z``: a range leaf as a detail names it."""
    value = leaf.value
    if leaf.field.type == "date":
        value = datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
    return f"{leaf.field.name} {leaf.op} {value}"


def _numeric_times(node: dict[str, Any], path: str) -> Iterator[str]:
    """Paths of the ``date`` values written as numbers in a tree the SDK normalised
    (``filter.and[0].value``), in leaves whose operator the field takes (:func:`_build` names
    a wrong one); a date field takes no list operator (``in``/``nin``), so a value is one."""
    for where, leaf in _leaves(node, path):
        field = FIELDS[leaf["field"]]
        if field.type != "date" or leaf["op"] not in field.operators:
            continue
        value = leaf["value"]
        if isinstance(value, int | float) and not isinstance(value, bool):
            yield f"{where}.value"


#: A MIME type as RFC 6838 §4.2 writes one: ``type/subtype``, each a restricted name (a letter or
#: digit, then up to 126 of letters, digits and ``!#$&-^_.+``); no parameters.
_MIME_TYPE = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
)


def request_tree(
    *,
    doc_types: Sequence[str] | None = None,
    modified_after: Any = None,
    modified_before: Any = None,
    path_prefixes: Sequence[Any] | None = None,
    tags: Sequence[Any] | None = None,
    category: Any = None,
    mime_types: Sequence[Any] | None = None,
    filter: Any = None,
) -> Node | None:
    """One tree for all of a search request's filter parameters, AND-ed.

    List parameters are any-of (``doc_types``, ``path_prefixes``, ``tags``, ``mime_types``);
    ``modified_after``/``modified_before`` bound ``modified_at`` to the half-open interval
    ``[after, before)``. Raises :class:`FilterError`, e.g. ``invalid_value`` on
    ``modified_after`` when it is later than ``modified_before``, and on ``modified_before``
    when they are the same time (an interval that holds none, matching nothing); so too when
    they and the range leaves of ``filter`` that must hold with them leave a field no value
    (:func:`refuse_empty_range`), and ``invalid_filter`` for an empty ``filter`` (``{}``).
    """
    parts: list[Node] = []

    def any_of(name: str, field: str, values: Sequence[Any] | None) -> None:
        if values:
            listed = _coerce_list(FIELDS[field], values, name)
            parts.append(Leaf(FIELDS[field], "in", listed, name))

    any_of("doc_types", "doc_type", doc_types)
    after = None if modified_after is None else _time(modified_after, "modified_after")
    before = None if modified_before is None else _time(modified_before, "modified_before")
    if after is not None and before is not None and after > before:
        raise FilterError("invalid_value", "modified_after", "is later than modified_before")
    if after is not None and after == before:  # [t, t) holds no time: nothing can match
        raise FilterError(
            "invalid_value",
            "modified_before",
            "equals modified_after, and [modified_after, modified_before) holds no time; "
            "for one day give the next day's date as modified_before",
        )
    bounds: list[tuple[str, Leaf]] = []  # with the filter's, an interval that holds no time
    if after is not None:
        bounds.append(("modified_after", Leaf(FIELDS["modified_at"], "gte", after)))
    if before is not None:
        bounds.append(("modified_before", Leaf(FIELDS["modified_at"], "lt", before)))
    parts.extend(leaf for _name, leaf in bounds)
    any_of("path_prefixes", "path_prefix", path_prefixes)
    any_of("tags", "tags", tags)
    if category is not None:
        parts.append(
            Leaf(
                FIELDS["category"],
                "eq",
                _scalar(FIELDS["category"], category, "category"),
                "category",
            )
        )
    any_of("mime_types", "mime_type", mime_types)
    tree = parse_tree(filter)
    if tree is not None:
        parts.append(tree)
    refuse_empty_range(bounds + ([] if tree is None else list(_conjuncts(tree, "filter"))))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Group("and", tuple(parts))


Listings = Mapping[str, str]
"""Field name (``tags``, ``category``, ``path_prefix``, ``path``, ``owner``) → how the caller's
surface lists that field's values (``GET /v1/tags``, the MCP tool ``list_tags``), named in the
hints of :func:`other_spellings` and :func:`selecting_nothing`; a field left out has no listing
on that surface, and its hint names none. No surface lists files, so ``path``'s is the listing of
the folders holding the caller's documents, and is named as such."""

HTTP_LISTINGS: Listings = MappingProxyType(
    {
        "tags": "GET /v1/tags",
        "category": "GET /v1/categories",
        "owner": "GET /v1/owners",
        "path_prefix": "GET /v1/folders",
        "path": "GET /v1/folders",
    }
)
"""The listings of the search API's callers: ``POST /v1/search`` and RCP ``retrieve``, served
side by side (``search_api``; the endpoints: ``search_api.facets``)."""

SPELT_FIELDS = ("tags", "category")
"""The fields whose values are matched as spelt, case, Unicode form and all, and named when
only another spelling is stored (:func:`other_spellings`)."""


def _caseless(text: str) -> str:
    """``text`` as the Unicode Standard's canonical caseless match compares it (Unicode 15,
    §3.13, D145: ``NFD(casefold(NFD(text)))``): ``URGENT`` and ``urgent`` fold alike, and so
    do ``Überprüfung`` precomposed (NFC, U+00DC) and decomposed (NFD, ``U`` + U+0308)."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", text).casefold())


def _listed(name: str, listings: Listings) -> str:
    """`` (… lists them)`` naming how ``listings`` lists ``name``'s values, or ``""``; for
    ``path``, the folders holding the caller's documents (no surface lists files)."""
    how = listings.get(name)
    if not how:
        return ""
    return f" ({how} lists {'the folders holding yours' if name == 'path' else 'them'})"


def other_spellings(
    node: Node | None, stored: Callable[[str], Collection[str]], listings: Listings
) -> list[tuple[str, str]]:
    """``(field, detail)`` hints, or :class:`FilterError`, for the values of ``tags`` and
    ``category`` leaves that must match for their branch to (``eq``, ``in``, ``contains``; not
    under a ``not``) which no value of ``stored(field)`` (the caller's values of that field)
    is, but one or more are when case and Unicode normalisation form are ignored
    (:func:`_caseless`): ``URGENT`` where the documents hold ``urgent``, ``Überprüfung`` typed
    decomposed (NFD) where the tag was created precomposed (NFC). ``field`` is the value's
    path (``tags[0]``, ``category``, ``filter.or[1].value``); the detail names the stored
    spelling(s) and how ``listings`` lists the field's values.

    Raised (``invalid_value``, naming the first such value) only where the value alone decides
    that nothing can match: its leaf must hold for the tree to (reached through ``and``
    groups alone, as :func:`selecting_nothing` reads a tree) and none of the leaf's values is
    stored (an ``in`` list's other values are its alternatives). Elsewhere — under an
    ``or``, or beside a value of the same ``in`` list that is stored — another branch may
    still match, and a caller may well write both spellings on purpose (``URGENT`` or
    ``urgent``, not knowing which the tag has): a well-formed search, answered (empty, as
    this is asked only then), with the spelling as a hint. Whether an ``or``'s other branches
    select anything is not asked (a read per branch): the hint says the same either way.

    Nextcloud matches both as spelt: a system tag by its name as the ``systemtag`` table holds
    it (nextcloud/server lib/private/SystemTag/SystemTagManager.php ``getTag``: ``name =``),
    stored as sent (``createTag`` only cuts it to 64 bytes; no case folding, no Unicode
    normalisation), so two tags differing only in case or in NFC/NFD form may both exist
    where the database compares the bytes (``createTag`` relies on the unique index:
    PostgreSQL, SQLite; MySQL's utf8mb4_general_ci, Nextcloud's documented collation, refuses
    a second in another case), and a note's category is its folder below the notes folder
    (nextcloud/notes lib/Service/Note.php ``getCategory``), a file name, as spelt. So a match
    ignoring case or form would merge what Nextcloud may keep apart, and would need the values
    stored folded too; a caller told the spelling loses nothing. ``stored`` is asked at most
    once per field."""
    seen: dict[str, Collection[str]] = {}
    hints: list[tuple[str, str]] = []
    for leaf, must in _positive_leaves(node, must=True):
        name = leaf.field.name
        if name not in SPELT_FIELDS or leaf.op not in ("eq", "in", "contains"):
            continue
        if name not in seen:
            seen[name] = stored(name)
        known = seen[name]
        values = leaf.value if leaf.op == "in" else (leaf.value,)
        decides = must and not any(v in known for v in values)
        for i, value in enumerate(values):
            near = (
                []
                if value in known
                else sorted(k for k in known if _caseless(k) == _caseless(value))
            )
            if not near:
                continue
            where = leaf.where or name
            where = f"{where}[{i}]" if leaf.op == "in" else where
            noun = "tag" if name == "tags" else "category"
            detail = (
                f"no document you can read has the {noun} {value!r}, matched as spelt, case, "
                f"Unicode form and all; yours {'is' if len(near) == 1 else 'are'} spelt "
                f"{', '.join(repr(n) for n in near)}{_listed(name, listings)}"
            )
            if decides:
                raise FilterError("invalid_value", where, detail)
            hints.append((where, detail))
    return hints


HINTED_FIELDS = ("tags", "category", "owner", "path_prefix", "path")
"""The fields whose values :func:`selecting_nothing` names when they select none of the
caller's documents."""

_SELECTS_NOTHING = {
    "tags": "no indexed document you can read has the tag",
    "category": "no indexed note you can read has the category",
    "owner": "no indexed document you can read is owned by",
    "path_prefix": "no indexed document you can read is at or under",
    "path": "no indexed document you can read is at the path",
}


def selecting_nothing(
    node: Node | None, selects: Callable[[Leaf], bool], listings: Listings
) -> list[tuple[str, str]]:
    """``(field, detail)`` for each leaf that must hold for ``node`` to (reached through
    ``and`` groups alone) on a :data:`HINTED_FIELDS` field (``eq``, ``in``, ``contains``) that
    selects none of the caller's documents: ``selects(leaf)`` false, asked once per such leaf,
    in order. ``field`` is the value's path (``path_prefixes[0]``, ``owner``'s
    ``filter.value``; a whole list's path, ``tags``, when it holds more than one value, none
    of which selects anything); ``detail`` names the value(s) and how ``listings`` lists the
    field's values (for an exact ``path``, a file's whole path, the folders holding the
    caller's documents: no surface lists files). Meant for a search that found nothing: such
    a leaf is why, whatever the query, yet the search was well formed (an empty folder, a
    category not used yet, a file deleted since), so these are hints beside the empty answer,
    not errors. ``selects`` must look only at what the caller can read (the ``acl``
    condition), so a hint tells nothing of anyone else's documents: a value that only
    others' documents hold reads as one nobody's does."""
    hints: list[tuple[str, str]] = []
    if node is None:
        return hints
    for _path, leaf in _conjuncts(node, "filter"):
        name = leaf.field.name
        if name not in HINTED_FIELDS or leaf.op not in ("eq", "in", "contains"):
            continue
        if selects(leaf):
            continue
        values = leaf.value if leaf.op == "in" else (leaf.value,)
        where = leaf.where or name
        if leaf.op == "in" and len(values) == 1:
            where = f"{where}[0]"
        said = ", ".join(repr(v) for v in values)
        hints.append(
            (
                where,
                f"{_SELECTS_NOTHING[name]} {'any of ' if len(values) > 1 else ''}{said}"
                f"{_listed(name, listings)}",
            )
        )
    return hints


def _positive_leaves(node: Node | None, *, must: bool) -> Iterator[tuple[Leaf, bool]]:
    """The leaves of ``node`` not under a ``not``, each with whether it must hold for ``node``
    to (``must`` and reached through ``and`` groups alone)."""
    if node is None:
        return
    if isinstance(node, Leaf):
        yield node, must
    elif node.kind != "not":
        for child in node.children:
            yield from _positive_leaves(child, must=must and node.kind == "and")


def parse_time(value: Any, field: str = "value") -> float:
    """Unix seconds of an RFC 3339 / ISO 8601 string (naive ⇒ UTC) or a number of seconds.

    Raises :class:`FilterError` (``invalid_value`` on ``field``) for anything else, a
    non-finite number, or a time outside years 1–9999 (numbers: ±253402300799)."""
    return _time(value, field)


def _validate(raw: Any) -> dict[str, Any] | None:
    depth = MAX_FILTER_DEPTH - 1  # the SDK counts levels below the root
    try:
        # the SDK (untyped) answers the normalised filter, a dict, or None for no filter
        valid: dict[str, Any] | None = rcp.filter.validate(
            raw, dict(FIELD_TYPES), ALL_OPERATORS, max_depth=depth
        )
        return valid
    except rcp.RcpError as exc:
        raise _classify(raw, exc) from None
    except TypeError:
        # The SDK tests ``op in <set>`` before checking its type: an array or object as
        # ``op`` raises TypeError ("unhashable") there. Any other TypeError is a bug: raised.
        path = _unhashable_op(raw, "filter", MAX_FILTER_DEPTH)
        if path is None:
            raise
        raise FilterError("unsupported_operator", path, "operator must be a string") from None
    except RecursionError:
        raise FilterError(
            "invalid_filter", "filter", f"nested deeper than {MAX_FILTER_DEPTH} levels"
        ) from None


def _classify(raw: Any, exc: rcp.RcpError) -> FilterError:
    """Turn the SDK's -32602 into our code by re-running its validator with less gating: a
    failure without field/type gating is a shape or operator problem; with names only it is
    an unknown field; otherwise the operator does not suit the field's type."""
    depth = MAX_FILTER_DEPTH - 1
    try:
        rcp.filter.validate(raw, None, None, max_depth=depth)
    except rcp.RcpError as shape:
        path = _error_path(shape)
        if path.endswith(".op"):
            op = _at(raw, path)
            said = "missing operator" if op is None else f"unknown operator {op!r}"
            return FilterError(
                "unsupported_operator",
                path,
                f"{said}; one of {', '.join(ALL_OPERATORS)}",
                option=op if isinstance(op, str) else None,
            )
        if path.endswith(".value"):
            return FilterError("invalid_value", path, _sdk_detail(shape))
        return FilterError("invalid_filter", path, _sdk_detail(shape))
    try:
        rcp.filter.validate(raw, list(FIELD_TYPES), None, max_depth=depth)
    except rcp.RcpError as unknown:
        return _unknown_field(raw, _error_path(unknown))
    return FilterError("unsupported_operator", _error_path(exc), _sdk_detail(exc))


def _sdk_detail(exc: rcp.RcpError) -> str:
    """The SDK's message without the `` (path)`` it ends with (rcp-protocol 1.0.1,
    ``rcp/_filter.py`` ``_bad``: ``f"{message} ({path})"``): the path is the error's
    ``field``, and the MCP text (``code (field): detail``) and RCP's message (which adds
    `` (field)`` when the detail lacks it) said it twice."""
    message: str = exc.message  # the SDK is untyped
    return message.removesuffix(f" ({_error_path(exc)})")


def _unknown_field(raw: Any, sdk_path: str) -> FilterError:
    """``unknown_field`` naming the ``field`` key of the leaf the SDK refused.

    The SDK names the leaf's path followed by the field's *value* (rcp-protocol 1.0.1,
    ``rcp/_filter.py`` ``_validate``: ``_bad(f"{path}.{field}", …)``), so ``{"field": "acl"}``
    came out as ``filter.acl``, a key the request does not have; every other error names a
    key (``filter.and[1].op``). The leaf is found again by that path (the tree passed the
    SDK's shape check, so every leaf has a string ``field``)."""
    path, name = next(
        (path, leaf["field"])
        for path, leaf in _leaves(raw, "filter")
        if f"{path}.{leaf['field']}" == sdk_path
    )
    shown = name if len(name) <= 64 else name[:64] + "…"
    return FilterError(
        "unknown_field",
        f"{path}.field",
        f"unknown field {shown!r}; one of {', '.join(FIELD_TYPES)}",
    )


def _leaves(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each leaf of a shape-checked tree with its path, in the SDK's (depth-first) order."""
    for kind in ("and", "or"):
        if kind in node:
            for i, child in enumerate(node[kind]):
                yield from _leaves(child, f"{path}.{kind}[{i}]")
            return
    if "not" in node:
        yield from _leaves(node["not"], f"{path}.not")
        return
    yield path, node


def _error_path(exc: rcp.RcpError) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    return str(data.get("field") or "filter")


_STEP = re.compile(r"\.(and|or)\[(\d+)\]|\.(not)|\.(op|value)$")


def _at(raw: Any, path: str) -> Any:
    """The raw value at an SDK error path (``filter.and[0].not.op``), or ``None``."""
    node = raw
    for m in _STEP.finditer(path.removeprefix("filter")):
        try:
            if m.group(1):
                node = node[m.group(1)][int(m.group(2))]
            else:
                node = node[m.group(3) or m.group(4)]
        except (KeyError, IndexError, TypeError):
            return None
    return node


_LEAF_KEYS = frozenset({"field", "op", "value"})


def _unknown_keys(node: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """``(path, key)`` of each key of a node (the tree already shape-checked by the SDK,
    which ignores extra keys) that is not its combinator or a leaf's ``field``, ``op``,
    ``value``: a misspelt ``valu`` or a second ``op2``. A node's own keys in sorted order come
    before its children's."""
    combinator = next((k for k in ("and", "or", "not") if k in node), None)
    allowed = {combinator} if combinator else _LEAF_KEYS
    for key in sorted(k for k in node if k not in allowed):
        yield f"{path}.{key}", key
    if combinator == "not":
        yield from _unknown_keys(node["not"], f"{path}.not")
    elif combinator:
        for i, child in enumerate(node[combinator]):
            yield from _unknown_keys(child, f"{path}.{combinator}[{i}]")


def _unhashable_op(node: Any, path: str, budget: int) -> str | None:
    if budget < 0 or not isinstance(node, dict):
        return None
    op = node.get("op")
    if isinstance(op, list | dict):
        return f"{path}.op"
    for kind in ("and", "or"):
        children = node.get(kind)
        if isinstance(children, list):
            for i, child in enumerate(children):
                found = _unhashable_op(child, f"{path}.{kind}[{i}]", budget - 1)
                if found:
                    return found
    if "not" in node:
        return _unhashable_op(node["not"], f"{path}.not", budget - 1)
    return None


def _build(norm: dict[str, Any], raw: dict[str, Any], path: str) -> Node:
    for kind in ("and", "or"):
        if kind in norm:
            children = norm[kind]
            if not children:
                raise FilterError("invalid_filter", f"{path}.{kind}", f"empty '{kind}'")
            return Group(
                kind,
                tuple(
                    _build(child, raw[kind][i], f"{path}.{kind}[{i}]")
                    for i, child in enumerate(children)
                ),
            )
    if "not" in norm:
        return Group("not", (_build(norm["not"], raw["not"], f"{path}.not"),))
    field = FIELDS[norm["field"]]
    op = norm["op"]
    if op not in field.operators:
        raise FilterError(
            "unsupported_operator",
            f"{path}.op",
            f"operator {op!r} is not valid on {field.name!r} (valid: {', '.join(field.operators)})",
        )
    if op == "exists":
        value = raw.get("value", True)
        if not isinstance(value, bool):
            raise FilterError("invalid_value", f"{path}.value", "exists takes true or false")
        return Leaf(field, op, value)
    if op in ("in", "nin"):
        where = f"{path}.value"
        return Leaf(field, op, _coerce_list(field, raw["value"], where), where)
    ordered = op in _RANGE_OPS  # a bound may fall between integers; eq/ne match one value
    where = f"{path}.value"
    return Leaf(field, op, _scalar(field, raw["value"], where, ordered=ordered), where)


def _count_leaves(node: Node) -> int:
    if isinstance(node, Leaf):
        return 1
    return sum(_count_leaves(c) for c in node.children)


def _coerce_list(field: FilterField, values: Any, path: str) -> tuple[Any, ...]:
    if not isinstance(values, list | tuple) or not values:
        raise FilterError("invalid_value", path, "must be a non-empty array")
    if len(values) > MAX_LIST_VALUES:
        raise FilterError("invalid_value", path, f"{len(values)} values; at most {MAX_LIST_VALUES}")
    out = [_scalar(field, v, f"{path}[{i}]") for i, v in enumerate(values)]
    return tuple(dict.fromkeys(out))


def _scalar(field: FilterField, value: Any, path: str, *, ordered: bool = False) -> Any:
    """One value coerced for ``field``; ``ordered`` allows a fractional number on ``int``."""
    if field.type == "date":
        return _time(value, path)
    if field.type == "int":
        return _int(value, path, fractional=ordered)
    if isinstance(value, bool) or value is None:
        raise FilterError("invalid_value", path, "must be a string")
    if isinstance(value, int) and field.type == "keyword" and field.values is None:
        value = str(value)  # ids written as numbers
    if not isinstance(value, str):
        raise FilterError("invalid_value", path, "must be a string")
    _check_text(value, path)
    if field.values is not None and value not in field.values:
        raise FilterError("invalid_value", path, f"must be one of {', '.join(field.values)}")
    if field.name == "tags" and not value.strip():  # Nextcloud names no tag so
        raise FilterError("invalid_value", path, "must be a tag name, not empty")
    if field.name == "category" and value and _blank(value):
        # a category is the note's folder path below the notes folder, "" for none
        # (nextcloud/notes lib/Service/Note.php getCategory), and Nextcloud names no folder
        # blank (nextcloud/server lib/private/Files/FilenameValidator.php validateFilename)
        raise FilterError("invalid_value", path, "must be a category's name, not blank")
    if field.type == "text" and not value.strip():
        raise FilterError("invalid_value", path, "must contain a word")
    if field.name in ("path", "path_prefix"):
        return caller_path(value, path)
    if field.name == "mime_type":
        if "*" in value:  # the engine matches keywords whole; a pattern would match nothing
            raise FilterError(
                "invalid_value",
                path,
                "must be a whole MIME type such as text/plain; patterns such as text/* "
                "are not matched (list the types: in [text/plain, text/markdown])",
            )
        if not _MIME_TYPE.fullmatch(value):
            raise FilterError(
                "invalid_value", path, "must be a MIME type, type/subtype, such as text/plain"
            )
        # case-insensitive (RFC 2045 §5.1); stored as Nextcloud gives it, in lower case
        # (nextcloud/server lib/private/Files/Type/Detection.php: detectContent lower-cases
        # finfo's answer, detectPath maps extensions through mimetypemapping.dist.json)
        return value.lower()
    return value


def _check_text(value: str, path: str) -> None:
    if len(value) > MAX_STRING_CHARS:
        raise FilterError("invalid_value", path, f"longer than {MAX_STRING_CHARS} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FilterError("invalid_value", path, "is not valid Unicode (lone surrogate)") from None
    if "\x00" in value:
        raise FilterError("invalid_value", path, "contains a NUL character")


#: What PHP's ``trim`` takes off (its default characters): a name Nextcloud calls blank is
#: made of these alone (nextcloud/server lib/private/Files/FilenameValidator.php
#: ``validateFilename``: ``trim($filename) === ''``). Python's ``str.strip`` takes more (every
#: Unicode space: U+00A0, the ideographic space U+3000), and a folder named U+3000 is valid.
_PHP_TRIMMED = " \t\n\r\x00\x0b"


def _blank(value: str) -> bool:
    """Whether Nextcloud would call ``value`` blank as a file or folder name."""
    return not value.strip(_PHP_TRIMMED)


def caller_path(value: str, field: str) -> str:
    """``value``, a path in the caller's view as a caller wrote it, as the index keys it:
    from the caller's root (``"Projects/"`` is ``/Projects``), without a trailing ``/``,
    composed as Nextcloud keeps paths (nextcloud/server lib/private/Files/Filesystem.php
    ``normalizePath``: ``OC_Util::normalizeUnicode``, ``Normalizer::normalize``'s default form,
    NFC), so a name typed decomposed (e + U+0301, as macOS keyboards send it) matches its
    file. Raises :class:`FilterError` (``invalid_value``, naming ``field``) for a blank path
    or one with ``.`` or ``..`` segments (Nextcloud refuses such paths, and one must not be
    read as another folder than it names), and for one holding a control character
    (U+0000–U+001F: a tab, a line break), which no file or folder name in Nextcloud holds
    (nextcloud/server lib/private/Files/FilenameValidator.php ``checkForbiddenCharacters``
    refuses a name ``FILTER_FLAG_STRIP_LOW`` changes; "always forbidden", its
    ``getForbiddenCharacters`` says), so such a path would match nothing."""
    if _blank(value) or has_dot_segment(value):
        raise FilterError(
            "invalid_value",
            field,
            "must be a path in the caller's view without . or .. segments, such as /Projects",
        )
    control = next((c for c in value if ord(c) < 0x20), None)
    if control is not None:
        raise FilterError(
            "invalid_value",
            field,
            f"holds the control character U+{ord(control):04X}, which no Nextcloud file or "
            "folder name holds (a tab or line break copied with the path?)",
        )
    return normalize_path(unicodedata.normalize("NFC", value))


def _int(value: Any, path: str, *, fractional: bool) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FilterError("invalid_value", path, "must be a number")
    if not math.isfinite(value) or abs(value) >= _INT64:
        raise FilterError("invalid_value", path, "is out of range")
    if isinstance(value, float) and not value.is_integer():
        if not fractional:
            raise FilterError("invalid_value", path, "must be an integer")
        return value
    return int(value)


def _time(value: Any, path: str) -> float:
    if isinstance(value, bool) or value is None:
        raise FilterError("invalid_value", path, "must be an RFC 3339 time or Unix seconds")
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_SECONDS:
            raise FilterError("invalid_value", path, "is out of range")
        return float(value)
    if not isinstance(value, str):
        raise FilterError("invalid_value", path, "must be an RFC 3339 time or Unix seconds")
    _check_text(value, path)
    not_a_time = f"{value[:64]!r} is not an RFC 3339 time ({TIME_EXAMPLES})"
    if not re.fullmatch(TIME_PATTERN, value):  # fromisoformat also reads ISO 8601's "2026-W05"
        raise FilterError("invalid_value", path, not_a_time)
    try:  # RFC 3339 §5.6 allows a lower-case "t" and "z"; Python's parser does not
        when = datetime.fromisoformat(value.upper())
    except ValueError:
        raise FilterError("invalid_value", path, not_a_time) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.timestamp()
    except (OverflowError, ValueError, OSError):
        raise FilterError("invalid_value", path, "is out of range") from None


# --- compiling ------------------------------------------------------------------------------


def build_filter(user: str, tree: Node | None) -> models.Filter:
    """The Qdrant filter of a search by ``user``: the ``acl`` condition AND ``tree``
    (compiled in ``user``'s view for the path fields)."""
    must: list[models.Condition] = [acl_condition(user)]
    if tree is not None:
        must.append(compile_node(tree, user))
    return models.Filter(must=must)


TITLE_WORD = re.compile(r"[^\W_]+")
"""A word as Qdrant's word tokenizer cuts a text (runs of letters and digits)."""
_TITLE_COMPOUND = re.compile(r"[^\W_]+(?:(?:[-\u2010\u2011]|\x00+)[^\W_]+)*")
""":data:`TITLE_WORD` s joined by a hyphen or by invisible format characters (each ``\\x00``
by then, :func:`title_words`): ``E-Mail``, ``Rech``+U+200B+``nung``."""


def title_word(word: str) -> models.FieldCondition:
    """The condition that a point's document's ``title`` holds ``word`` in one of its spellings
    (:func:`ncindex.embedding.analyzer.spellings`: ``Mueller`` finds ``Müller`` and the other
    way round, as BM25 finds it in the text), ``MatchText`` of the word alone or
    ``MatchTextAny`` of its spellings on the title's full-text payload index
    (``ncindex.store.schema``: Qdrant's word tokenizer, lowercased, splits the title and the
    query alike at every character that is not a letter or digit, so ``Kassenbuch`` matches
    ``Kassenbuch.ods``). ``word`` is one :data:`TITLE_WORD`."""
    spelt = analyzer.spellings(word)
    if len(spelt) == 1:
        return models.FieldCondition(key="title", match=models.MatchText(text=spelt[0]))
    return models.FieldCondition(key="title", match=models.MatchTextAny(text_any=" ".join(spelt)))


def title_compound(parts: Sequence[str]) -> models.Condition:
    """The condition that a point's document's ``title`` holds a compound of the words
    ``parts`` (one of :func:`title_compounds`): :func:`title_word` of a single word; of words
    joined by a hyphen or an invisible character, either the words without it (``E-Mail`` →
    ``EMail``, ``Rech``+U+200B+``nung`` → ``Rechnung``) or every one of them (``E`` and
    ``Mail``), as BM25 finds the joined word beside the compound's parts (analyzer ``en-7``).
    Qdrant's word tokenizer (qdrant/qdrant, lib/segment/src/index/field_index/full_text_index/
    tokenizers/mod.rs, ``WordTokenizer::tokenize``: ``text.split(|c|
    !char::is_alphanumeric(c))``) cuts a title at a hyphen and at every format character (a
    zero-width space, a soft hyphen: not Alphabetic), so the title ``E-Mail`` holds ``e`` and
    ``mail`` and no ``email``: the query ``email`` does not find it in the title index (BM25
    does in the text)."""
    if len(parts) == 1:
        return title_word(parts[0])
    every = models.Filter(must=[title_word(p) for p in parts])
    return models.Filter(should=[title_word("".join(parts)), every])


def title_compounds(query: str) -> list[list[str]]:
    """The words and compounds of ``query`` that a title must hold, each as its words (one
    for a plain word: ``E-Mail Vorlage`` → ``[["E", "Mail"], ["Vorlage"]]``), the first of
    those equal but for case, in order; ``[]`` for a query without words. The query is read as
    BM25 reads it: composed (NFC), so a word pasted decomposed (``Mu\u0308ller``, as macOS file
    names have it) is one word, not ``Mu`` and ``ller``; every apostrophe as ``'``
    (:func:`ncindex.embedding.analyzer.plain_apostrophes`: the letter ``ʼ`` of ``OʼNeill``
    would keep the word whole where Qdrant cuts ``O'Neill`` in two); an invisible format
    character (Unicode's Cf) inside a word joining its pieces as a hyphen does."""
    text = analyzer.plain_apostrophes(unicodedata.normalize("NFC", query))
    if not text.isascii():
        text = "".join("\x00" if unicodedata.category(ch) == "Cf" else ch for ch in text)
    compounds: dict[str, list[str]] = {}
    for compound in _TITLE_COMPOUND.findall(text):
        compounds.setdefault(compound.lower(), TITLE_WORD.findall(compound))
    return list(compounds.values())


def title_words(query: str) -> list[models.Condition]:
    """The conditions that a point's document's ``title`` holds every word of ``query``, one
    :func:`title_compound` per word or compound of :func:`title_compounds`, in order
    (``report pdf`` matches ``Q3 report.pdf``); ``[]`` for a query without words."""
    return [title_compound(parts) for parts in title_compounds(query)]


def with_title_words(flt: models.Filter, query: str) -> models.Filter:
    """``flt`` AND :func:`title_words` of ``query``."""
    return models.Filter(must=[flt, *title_words(query)])


def compile_node(node: Node, user: str) -> models.Condition:
    """One typed Qdrant condition for ``node`` (a ``Filter`` for groups and negations)."""
    if isinstance(node, Group):
        children = [compile_node(c, user) for c in node.children]
        if node.kind == "and":
            return models.Filter(must=children)
        if node.kind == "or":
            return models.Filter(should=children)
        return models.Filter(must_not=children)
    if node.op in ("ne", "nin"):
        positive = Leaf(node.field, "eq" if node.op == "ne" else "in", node.value)
        return models.Filter(must_not=[_leaf(positive, user)])
    if node.op == "exists" and node.value is False:
        return models.Filter(must_not=[_leaf(Leaf(node.field, "exists", True), user)])
    return _leaf(node, user)


def _leaf(node: Leaf, user: str) -> models.Condition:
    """A positive leaf: ``eq``, ``in``, ``gt``…``lte``, ``contains``, ``exists`` (true)."""
    field, op, value = node.field, node.op, node.value
    if field.name in ("path", "path_prefix"):
        return _path_leaf(field.name, op, value, user)
    key = field.key
    assert key is not None
    if op == "exists":
        return models.Filter(
            must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=key))]
        )
    if op in _RANGE_OPS:
        return models.FieldCondition(key=key, range=models.Range(**{op: value}))
    if field.type == "date" and op == "eq":
        return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
    if op == "in":
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(value)))
    if op == "contains" and field.type == "text":
        return models.FieldCondition(key=key, match=models.MatchText(text=value))
    # eq, or contains on an array field (element membership)
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _path_leaf(name: str, op: str, value: Any, user: str) -> models.Condition:
    if op == "exists":  # every path has "/" among its ancestors
        return models.FieldCondition(
            key="folder_ancestors", match=models.MatchValue(value=f"{user}:/")
        )
    keys = [f"{user}:{p}" for p in (value if op == "in" else (value,))]
    match = models.MatchAny(any=keys)
    exact = models.FieldCondition(key="file_path", match=match)
    if name == "path":
        return exact
    under = models.FieldCondition(key="folder_ancestors", match=match)
    return models.Filter(should=[under, exact])


def path_verdict(node: Node | None, path: str) -> bool | None:
    """Whether ``node`` holds for a document now at ``path`` (in the caller's view), judging
    only its ``path`` and ``path_prefix`` leaves: ``False`` when the tree fails whatever its
    other leaves are, ``True`` when it holds whatever they are, ``None`` when they decide
    (Kleene's three-valued logic; a tree without path leaves is ``None``, ``None`` is
    ``True``). The search holds a result whose verified path differs from the indexed one to
    it (a document moved since it was indexed): the engine judged the old path."""
    return _kleene(node, lambda leaf: _path_holds(leaf, path))


def field_verdict(node: Node | None, values: Mapping[str, str]) -> bool | None:
    """Whether ``node`` holds for a document whose keyword payload fields are now ``values``
    (payload key → value: a Deck card's ``{"stack_id": "7", "board_id": "2"}``), judging only
    the ``eq``/``ne``/``in``/``nin``/``exists`` leaves of those fields, as
    :func:`path_verdict` judges the path leaves. The search holds a result whose check found
    it held elsewhere now (:attr:`~ncindex.sources.base.Checked.moved_to`: a card moved to
    another stack) to it: the engine judged the values it was indexed with."""
    return _kleene(node, lambda leaf: _keyword_holds(leaf, values))


def _kleene(node: Node | None, leaf_holds: Callable[[Leaf], bool | None]) -> bool | None:
    """``node`` evaluated in Kleene's three-valued logic, each leaf by ``leaf_holds``
    (``None``: not known); no tree holds (``True``)."""
    if node is None:
        return True
    if isinstance(node, Group):
        values = [_kleene(c, leaf_holds) for c in node.children]
        if node.kind == "not":
            return None if values[0] is None else not values[0]
        if node.kind == "and":
            return False if False in values else True if all(values) else None
        return True if True in values else False if all(v is False for v in values) else None
    return leaf_holds(node)


def _path_holds(leaf: Leaf, path: str) -> bool | None:
    """Whether a ``path`` or ``path_prefix`` leaf holds at ``path``; ``None`` for any other."""
    name, op, value = leaf.field.name, leaf.op, leaf.value
    if name not in ("path", "path_prefix"):
        return None
    if op == "exists":
        return bool(value)
    wanted = value if op in ("in", "nin") else (value,)
    if name == "path":
        hit = path in wanted
    else:
        hit = any(p == "/" or path == p or path.startswith(p + "/") for p in wanted)
    return not hit if op in ("ne", "nin") else hit


def _keyword_holds(leaf: Leaf, values: Mapping[str, str]) -> bool | None:
    """Whether a leaf of a keyword field named in ``values`` (by payload key) holds for the
    value there; ``None`` for any other leaf."""
    key, op = leaf.field.key, leaf.op
    if key is None or key not in values or leaf.field.type != "keyword" or leaf.field.array:
        return None
    if op == "exists":
        return bool(leaf.value)
    if op not in ("eq", "ne", "in", "nin"):
        return None
    wanted = leaf.value if op in ("in", "nin") else (leaf.value,)
    hit = values[key] in wanted
    return not hit if op in ("ne", "nin") else hit


def filter_depth(node: Any) -> int:
    """Nesting depth of a compiled ``models.Filter`` (a lone condition counts 1)."""
    if not isinstance(node, models.Filter):
        return 1
    children = [
        c
        for part in (node.must, node.should, node.must_not)
        for c in (part if isinstance(part, list) else [part] if part is not None else [])
    ]
    return 1 + max((filter_depth(c) for c in children), default=0)
