"""The filterable fields: one table that drives validation, compilation, ``GET /v1/filters``
and the RCP ``initialize`` filter capability (DESIGN §9).

Each :class:`FilterField` names a public field, its RCP/1 type (``keyword``, ``text``,
``int``, ``date``), the operators it takes and how it maps onto the payload (DESIGN §4).
Two fields are *virtual* and resolved in the caller's own view of their files: ``path``
(exact path, through the ``file_path`` keys ``"{caller}:{path}"``) and ``path_prefix``
(strict prefix, through the ``folder_ancestors`` keys ``"{caller}:{folder}"`` or the exact
path). ``acl``, ``file_path``, ``folder_ancestors`` and ``paths`` are deliberately absent:
callers cannot filter on who else sees a document or on another user's paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, Field

from ncindex.documents import DocType

ALL_OPERATORS: tuple[str, ...] = (
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "nin",
    "contains",
    "exists",
)
"""Every operator of the RCP/1 filter language (spec §8); all are advertised."""

MAX_FILTER_DEPTH = 8
"""Longest root-to-leaf path of a filter tree, counting nodes (a lone leaf has depth 1)."""

MAX_FILTER_LEAVES = 64
"""Most leaves in one filter tree."""

MAX_LIST_VALUES = 256
"""Most values in an ``in``/``nin`` list, and in a list parameter (``tags``, …)."""

MAX_STRING_CHARS = 1024
"""Longest string value, in characters."""

DATE_ENCODING = "RFC 3339 string (naive means UTC) or integer/float Unix seconds"

PATH_SPELLINGS = (
    "read from the root with or without a leading `/` and with or without a trailing one: "
    "`Projects/` is `/Projects`"
)
"""How a caller's path is read (:func:`ncindex.search.filters.caller_path`), said in every
description of a path filter: there is no folder a path could be relative to, so a path
without its leading ``/`` can mean one folder only."""
"""How ``date`` values are written to ``POST /v1/search`` and MCP; advertised with the fields."""

MAX_SECONDS = 253_402_300_799
"""Latest Unix time a ``date`` value may name, 9999-12-31T23:59:59Z (and ``-MAX_SECONDS`` the
earliest taken): a later one is held by no RFC 3339 string."""

TIME_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"([Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:[0-9]{2})?)?$"
)
"""The ``date`` strings read (one regular expression for the server, ``re.fullmatch``, and
the OpenAPI document, ECMA-262): an RFC 3339 ``full-date``, or one followed by ``T`` (or
``t`` or a space, RFC 3339 §5.6 NOTE) and a time, seconds optional, with an offset (``Z``,
``+02:00``) or none (naive: UTC). The date and time must also exist (no month 13)."""
TIME_EXAMPLES = "such as 2026-01-31, 2026-01-31T09:30:00Z or 2026-01-31T09:30:00+01:00"
"""Times :data:`TIME_PATTERN` reads, which the detail of a refused one shows: what a caller (an
LLM agent above all) may write instead of ``12/01/2025`` or ``last month``."""

RCP_DATE_ENCODING = "RFC 3339 string (naive means UTC)"
"""How ``date`` values are written to RCP/1, advertised in its ``filter`` capability: spec §4.6
allows an RFC 3339 string or integer epoch *milliseconds*, "the server declares which of the
two encodings it accepts"; a number is not read, so Unix seconds are never taken for either."""

_ORDERED = ("eq", "ne", "gt", "gte", "lt", "lte")
_KEYWORD = ("eq", "ne", "in", "nin")


@dataclass(frozen=True, slots=True)
class FilterField:
    """One filterable field.

    ``name`` is the public name; ``type`` the RCP/1 type; ``operators`` those it takes;
    ``key`` the payload key (``None`` for the virtual path fields); ``array`` whether the
    payload holds a list (``contains`` then means element membership, ``in`` any element);
    ``values`` the allowed values of an enumerated keyword, else ``None``.
    """

    name: str
    type: str
    operators: tuple[str, ...]
    description: str
    key: str | None = None
    array: bool = False
    values: tuple[str, ...] | None = None

    def describe(self) -> dict[str, Any]:
        """The field as ``GET /v1/filters`` lists it."""
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "operators": list(self.operators),
            "array": self.array,
            "description": self.description,
        }
        if self.values is not None:
            out["values"] = list(self.values)
        return out


def _fields(*fields: FilterField) -> MappingProxyType[str, FilterField]:
    return MappingProxyType({f.name: f for f in fields})


FIELDS = _fields(
    FilterField(
        "doc_type",
        "keyword",
        _KEYWORD,
        "Document type.",
        key="doc_type",
        values=tuple(t.value for t in DocType),
    ),
    FilterField("doc_id", "keyword", _KEYWORD, "Document id within its type.", key="doc_id"),
    FilterField("owner", "keyword", (*_KEYWORD, "exists"), "Owner's user id.", key="owner"),
    FilterField(
        "title",
        "text",
        ("contains", "exists"),
        "Title; `contains` matches whole words (all given), ignoring case and accents.",
        key="title",
    ),
    FilterField(
        "mime_type",
        "keyword",
        (*_KEYWORD, "exists"),
        "MIME type (files), whole (`text/plain`; no `text/*` patterns), case-insensitive.",
        key="mime_type",
    ),
    FilterField("category", "keyword", (*_KEYWORD, "exists"), "Notes category.", key="category"),
    FilterField(
        "tags",
        "keyword",
        ("contains", "in", "nin", "exists"),
        "System tag names: `contains` one tag, `in` any of, `nin` none of, `exists` any tag.",
        key="tags",
        array=True,
    ),
    FilterField(
        "modified_at",
        "date",
        _ORDERED,
        f"Last modification; {DATE_ENCODING}.",
        key="modified_at",
    ),
    FilterField(
        "size", "int", (*_ORDERED, "in", "nin", "exists"), "Size in bytes (files).", key="size"
    ),
    FilterField("board_id", "keyword", (*_KEYWORD, "exists"), "Deck board id.", key="board_id"),
    FilterField("stack_id", "keyword", (*_KEYWORD, "exists"), "Deck stack id.", key="stack_id"),
    FilterField("feed_id", "keyword", (*_KEYWORD, "exists"), "News feed id.", key="feed_id"),
    FilterField(
        "path",
        "keyword",
        (*_KEYWORD, "exists"),
        f"Exact path in the caller's own view (`/Projects/plan.md`; {PATH_SPELLINGS}); "
        "`exists`: has a path.",
    ),
    FilterField(
        "path_prefix",
        "keyword",
        _KEYWORD,
        "Strict path prefix in the caller's own view: `/Projects` matches `/Projects` and "
        f"everything under it, never `/Projects-old` ({PATH_SPELLINGS}).",
    ),
)
"""Public field name → :class:`FilterField`. The one table (see the module docstring)."""

FIELD_TYPES: MappingProxyType[str, str] = MappingProxyType(
    {f.name: f.type for f in FIELDS.values()}
)
"""Field name → RCP/1 type, the shape ``rcp.filter.validate`` and RCP ``filter.fields`` take."""


class FilterFieldInfo(BaseModel):
    """One filterable field."""

    name: str
    type: str = Field(description="RCP/1 type: keyword, text, int or date.")
    operators: list[str]
    array: bool = Field(description="The field holds a list (`contains` = element).")
    description: str
    values: list[str] | None = Field(None, description="Allowed values, when enumerated.")


class FiltersDocument(BaseModel):
    """Body of ``GET /v1/filters`` and the MCP ``list_filters`` tool's result
    (:func:`filters_document`)."""

    fields: list[FilterFieldInfo]
    operators: list[str] = Field(description="Every operator of the filter language.")
    max_depth: int = Field(description="Longest root-to-leaf path of a filter tree, in nodes.")
    max_leaves: int = Field(description="Most leaves in one filter tree.")
    max_values: int = Field(description="Most values in a list.")
    date_encoding: str = Field(description="How `date` values are written.")


def filters_document() -> dict[str, Any]:
    """The body of ``GET /v1/filters``, a :class:`FiltersDocument` as JSON: ``fields`` (name,
    type, operators, array, values, description; ``values`` only for an enumerated field),
    ``operators``, ``max_depth``, ``max_leaves``, ``max_values``, ``date_encoding``."""
    document = FiltersDocument(
        fields=[FilterFieldInfo.model_validate(f.describe()) for f in FIELDS.values()],
        operators=list(ALL_OPERATORS),
        max_depth=MAX_FILTER_DEPTH,
        max_leaves=MAX_FILTER_LEAVES,
        max_values=MAX_LIST_VALUES,
        date_encoding=DATE_ENCODING,
    )
    return document.model_dump(mode="json", exclude_none=True)


def rcp_filter_capability() -> dict[str, Any]:
    """The RCP/1 ``filter`` capability: ``fields`` (name → type), ``operators``, and the
    per-field operators, limits and :data:`RCP_DATE_ENCODING` under the vendor key
    ``x-ncindex``."""
    return {
        "fields": dict(FIELD_TYPES),
        "operators": list(ALL_OPERATORS),
        "x-ncindex": {
            "fieldOperators": {f.name: list(f.operators) for f in FIELDS.values()},
            "maxDepth": MAX_FILTER_DEPTH,
            "maxLeaves": MAX_FILTER_LEAVES,
            "maxValues": MAX_LIST_VALUES,
            "dateEncoding": RCP_DATE_ENCODING,
        },
    }


def filter_schemas(ref: str = "#/$defs/{model}") -> dict[str, Any]:
    """JSON Schemas ``FilterNode`` (a combinator or a leaf) and ``FilterLeaf``, referring to
    each other through ``ref`` (``{model}`` is replaced by the name): ``#/$defs/{model}`` for a
    standalone JSON Schema, ``#/components/schemas/{model}`` in the OpenAPI document."""
    node = {"$ref": ref.format(model="FilterNode")}

    def combinator(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {kind: schema},
            "required": [kind],
            "additionalProperties": False,
        }

    return {
        "FilterNode": {
            "description": "An RCP/1 filter tree node.",
            "oneOf": [
                combinator("and", {"type": "array", "items": node, "minItems": 1}),
                combinator("or", {"type": "array", "items": node, "minItems": 1}),
                combinator("not", node),
                {"$ref": ref.format(model="FilterLeaf")},
            ],
        },
        "FilterLeaf": {
            "description": "A condition; operators per field as listed by GET /v1/filters.",
            "type": "object",
            "properties": {
                "field": {"enum": list(FIELDS)},
                "op": {"enum": list(ALL_OPERATORS)},
                "value": {
                    "description": "A scalar; an array for in/nin; a boolean for exists "
                    "(default true)."
                },
            },
            "required": ["field", "op"],
            "additionalProperties": False,
        },
    }
