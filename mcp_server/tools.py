"""The MCP server's tools: ``search``, ``fetch``, ``list_filters``, ``list_folders``,
``list_tags``, ``list_values`` and ``index_status``, all read-only, all answered as the caller
(the Nextcloud client the HTTP gate resolved).

``search`` takes the body of ``POST /v1/search`` (its JSON Schema is that model's) and answers
the same verified results, each with ``id`` (``"{doc_type}:{doc_id}"``), ``title``, ``url``
(a link that opens the document in Nextcloud, :func:`open_link`), ``path``, a Deck card's
``board_title``/``stack_title``, ``snippet`` as
plain text with ``matches`` (``start``/``end`` character offsets into it) and
``snippet_title_chars`` (its first characters that are a Deck card's or News item's title),
``score``,
``doc_type``, ``doc_id``, ``chunk_index`` and ``modified_at`` (Unix seconds) — not the search
API's ``open_url``, which is this ``url``. ``fetch`` takes that ``id`` (or ``doc_type`` +
``doc_id``, or a ``path`` of the caller's, looked up in the index: :meth:`Tools._at_path`) and
answers at most ``max_chars`` characters of the
extracted text from ``offset``, or with ``chunk_index`` of the chunks ``chunk_index ± window``,
with the text's offsets in the document and where to read on (:func:`fetch_body`), after the
same ownership check and verify-on-read as ``GET /v1/documents/{doc_type}/{doc_id}/context``
(whose check gives a Deck card's ``board_title``/``stack_title`` in ``metadata``).
``list_folders`` and ``list_tags`` answer the pages of ``GET /v1/folders`` and ``GET /v1/tags``
(:mod:`ncindex.search.facets`: the same lists, held to Nextcloud as the caller, and the same
``offset``/``limit`` bounds), the values ``search``'s ``path_prefixes`` and ``tags`` can name;
``list_values`` the doc types, MIME types, note categories, tags or owners of the caller's documents
with their counts (:func:`~ncindex.search.facets.counted_values`), read from the index alone
(the tags then held to those the caller can see).
They are tools of their own, not part of ``list_filters``: that answer is the same for every
caller and asks Nextcloud nothing, these are the caller's, each costs a facet count and up to
three requests to Nextcloud, and each is paged with its own ``next_offset`` (one object
``outputSchema`` per tool, no union of shapes).

The research-mode shape clients such as ChatGPT's deep research call (a ``search`` tool taking
``query`` whose results carry ``id``, ``title`` and ``url``; a ``fetch`` tool taking ``id``
whose answer carries ``id``, ``title``, ``text``, ``url`` and ``metadata``) is the same two
tools: those clients find tools by these names, and ``query`` alone is required and ``id`` is
enough (``fetch`` takes ``id`` or both ``doc_type`` and ``doc_id``), so a second pair would need
other names they do not look for.

Each tool's successful ``structuredContent`` is built from a pydantic model whose JSON Schema
is the tool's ``outputSchema`` (:data:`OUTPUT_MODELS`, :func:`output_schema`).

A failure is a tool error (``isError``): ``structuredContent`` is ``{"code", "field",
"detail"}`` (and ``retry_after``, seconds, for a back end that may come back:
:func:`failure_of`), which the output schema does not cover (the SDK client checks only a result
without ``isError`` against it: ``mcp.client.session.ClientSession.call_tool``), with the
product's stable codes (``invalid_value``, ``invalid_filter``, ``unknown_field``,
``unsupported_operator``, ``not_found``, ``backend_unavailable``, ``model_unavailable``,
``internal_error``; ``fetch`` by ``path`` also ``too_many_documents``: :data:`MAX_PATH_CHECKS`)
and the text content says the same in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError
from pydantic.json_schema import SkipJsonSchema, models_json_schema

from ncindex.documents import DocRef, DocType
from ncindex.errors import (
    RETRY_AFTER_SECONDS,
    DocumentNotFound,
    InputError,
    ModelError,
    NextcloudAuthError,
    NotFound,
    TransientError,
    Unauthenticated,
    public_reason,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.progress import NODE_PREFIX
from ncindex.runtime import Services
from ncindex.search import facets
from ncindex.search.filter_fields import FiltersDocument, filter_schemas, filters_document
from ncindex.search.filters import Listings, caller_path
from ncindex.search.links import open_link
from ncindex.search.service import (
    FILTER_NODE_REF,
    MAX_CHUNK_INDEX,
    MAX_CONTEXT_WINDOW,
    MAX_DOC_ID_CHARS,
    MAX_LIMIT,
    PLACE_FIELDS,
    BoardId,
    BoardTitle,
    ContextResponse,
    FeedId,
    SearchHint,
    SearchRequest,
    SearchResult,
    SearchService,
    StackId,
    StackTitle,
    Verification,
    checked_doc_id,
)
from ncindex.store.port import VectorStore
from ncindex.strict_json import WHOLE_NUMBER
from ncindex.sync.user_status import UserStatus, user_status
from ncindex.text.snippets import plain_snippet
from ncindex.web.problems import validation_error

log = structlog.get_logger(__name__)

_REF = "#/$defs/{model}"
WHOLE_DOCUMENT = 1_000_000
"""``window`` used to read every chunk of a document (larger than any chunk count)."""
DEFAULT_WINDOW = 2
"""``fetch``'s chunks on each side of ``chunk_index`` when ``window`` is not given."""
DEFAULT_FETCH_CHARS = 20_000
"""``fetch``'s ``max_chars`` when not given: characters (Unicode code points, as the chunks'
offsets count them) of text in one answer, about 5,000 tokens of English."""
MAX_FETCH_CHARS = 100_000
"""Largest ``max_chars`` a caller may ask for."""
MAX_OFFSET = 2**31 - 1
"""Largest ``offset`` a caller may name (characters)."""
MAX_PATH_CHECKS = 4
"""Most documents ``fetch`` by ``path`` checks with Nextcloud, each one request of up to
``NCINDEX_HTTP_TIMEOUT``, in one call (:meth:`Tools._at_path`). Nextcloud holds one file at a
path; the index holds more of the caller's documents there only while events were lost (a file
deleted and another put at its path, once per loss) until the caller's next scan evicts them,
and the most recently indexed, checked first, is the likeliest to be there now. Four bounds a
call at four checks (40 s at the default timeout) rather than one per stale entry, and still
looks past a few lost events; each one found gone is handed to the re-check that evicts it
(``on_stale``: for a configured account; else a scan does), so a later call
checks the ones after them. When none checked is there, two more requests at most ask
Nextcloud what is at the path and check the document found there
(:meth:`Tools._node_at`, :meth:`Tools._moved_to`): six in all."""
MAX_LISTED_IDS = 20
"""Most unchecked ids a ``too_many_documents`` answer lists."""


class ToolFailure(Exception):
    """Raised by a tool for an anticipated failure: answered as a tool error carrying the
    product's ``code``, the offending ``field`` (or ``None``) and a ``detail``, and for a
    failure that may pass the seconds to wait before calling again (``retry_after``, else
    ``None``)."""

    def __init__(
        self, code: str, field: str | None, detail: str, retry_after: int | None = None
    ) -> None:
        super().__init__(detail)
        self.code, self.field, self.detail = code, field, detail
        self.retry_after = retry_after

    def as_dict(self) -> dict[str, Any]:
        """``{"code", "field", "detail"}``, and ``retry_after`` (seconds) when it is set."""
        body: dict[str, Any] = {"code": self.code, "field": self.field, "detail": self.detail}
        if self.retry_after is not None:
            body["retry_after"] = self.retry_after
        return body


class FetchArgs(BaseModel):
    """Fetch one document's text: by `id` (a search result's), by `doc_type` and `doc_id`, or
    by `path`; at most `max_chars` characters from `offset` (default: its start), or the
    chunks around `chunk_index`."""

    model_config = ConfigDict(
        extra="forbid",
        # the half of "`id`, or both `doc_type` and `doc_id`" JSON Schema can say without a
        # top-level anyOf/oneOf, which Anthropic's, OpenAI's, Bedrock's and Vertex's tool
        # schemas refuse (e.g. makenotion/notion-mcp-server#341, kenn-io/kata#365)
        json_schema_extra={"dependentRequired": {"doc_type": ["doc_id"], "doc_id": ["doc_type"]}},
    )

    id: str | None = Field(
        None,
        max_length=MAX_DOC_ID_CHARS + 16,
        description="A search result's id, `{doc_type}:{doc_id}` (e.g. `file:123`), or a "
        "`node:<file id>` subject of `index_status` (a file or note). Give one of this, both "
        "`doc_type` and `doc_id`, or `path`.",
    )
    path: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="Instead of `id`: a file's or note's current path in the caller's own "
        "files (`/Projects/plan.md`), as search results' `path` gives it. Looked up in the "
        "index as the caller, then checked with Nextcloud like any fetch: a document moved "
        "since it was indexed is read at the path it is at now, and one no longer at `path` "
        "is `not_found`.",
    )
    doc_type: DocType | None = Field(None, description="With `doc_id`, instead of `id`.")
    doc_id: str | None = Field(
        None, min_length=1, max_length=MAX_DOC_ID_CHARS, description="With `doc_type`."
    )
    chunk_index: Annotated[StrictInt, Field(ge=0, le=MAX_CHUNK_INDEX), WHOLE_NUMBER] | None = Field(
        None,
        description="Answer the chunks around this one (a search result's `chunk_index`) "
        "instead of the text from `offset`.",
    )
    window: Annotated[StrictInt, Field(ge=0, le=MAX_CONTEXT_WINDOW), WHOLE_NUMBER] | None = Field(
        None,
        description=f"Chunks on each side of `chunk_index`, 0–{MAX_CONTEXT_WINDOW}; "
        f"{DEFAULT_WINDOW} when left out or null. Only with `chunk_index`.",
    )
    offset: Annotated[StrictInt, Field(ge=0, le=MAX_OFFSET), WHOLE_NUMBER] | None = Field(
        None,
        description="Start the text at this character of the document: a previous answer's "
        "`next_offset` to read on, or a search result's `char_start`. Not with `chunk_index`.",
    )
    max_chars: Annotated[StrictInt, Field(ge=1, le=MAX_FETCH_CHARS), WHOLE_NUMBER] | None = Field(
        DEFAULT_FETCH_CHARS,
        description=f"Most characters of text to answer, 1–{MAX_FETCH_CHARS} "
        f"({DEFAULT_FETCH_CHARS} when left out or null); a longer text is cut, and the "
        "answer's `next_offset` says where to read on.",
    )

    def ref(self) -> DocRef | None:
        """The document, or ``None`` when it is named by ``path`` (for the caller to look
        up); raises :class:`InputError` (``invalid_value``) for a bad id, naming ``id`` when
        none of ``id``, both of ``doc_type`` and ``doc_id``, and ``path`` is given, or more
        than one way is, naming ``window`` when it is given (not null) without
        ``chunk_index``, and ``offset`` when it is given with ``chunk_index``."""
        by_key = self.doc_type is not None or self.doc_id is not None
        ways = (self.id is not None) + by_key + (self.path is not None)
        if ways > 1:
            raise InputError(
                "invalid_value",
                "id" if self.id is not None else "path",
                "give one of `id`, `doc_type` and `doc_id`, or `path`",
            )
        if self.path is None and self.id is None and (self.doc_type is None or self.doc_id is None):
            missing = "doc_id" if self.doc_type is not None else "doc_type" if self.doc_id else "id"
            raise InputError(
                "invalid_value", missing, "give `id`, `doc_type` and `doc_id`, or `path`"
            )
        if self.window is not None and self.chunk_index is None:
            raise InputError(
                "invalid_value", "window", "counts chunks around `chunk_index`; give both"
            )
        if self.offset is not None and self.chunk_index is not None:
            raise InputError(
                "invalid_value", "offset", "reads on from a character, not with `chunk_index`"
            )
        if self.path is not None or self.node_id() is not None:
            return None
        if self.id is not None:
            doc_type, _, doc_id = self.id.partition(":")
            field = "id"
        else:
            doc_type, doc_id, field = str(self.doc_type), self.doc_id or "", "doc_id"
        if doc_type not in {t.value for t in DocType}:
            raise InputError("invalid_value", field, "not `{doc_type}:{doc_id}` of a known type")
        return DocRef(DocType(doc_type), checked_doc_id(doc_id, field))

    def node_id(self) -> int | None:
        """The file id when ``id`` is ``node:<file id>``, the subject ``index_status`` names a
        file or note by (:func:`~ncindex.progress.node_subject`: one id, either type); else
        ``None``. Raises :class:`InputError` (``invalid_value``, ``id``) for a ``node:`` id
        that is not a file id."""
        if self.id is None or not self.id.startswith(NODE_PREFIX):
            return None
        file_id = self.id.removeprefix(NODE_PREFIX)
        if not (file_id.isascii() and file_id.isdigit()):
            raise InputError("invalid_value", "id", "`node:` takes a file id, `node:123`")
        return int(file_id)


class NoArgs(BaseModel):
    """No arguments."""

    model_config = ConfigDict(extra="forbid")


class PageArgs(BaseModel):
    """One page of a list: at most `limit` values from the `offset`-th (0-based)."""

    model_config = ConfigDict(extra="forbid")

    offset: Annotated[StrictInt, Field(ge=0, le=facets.MAX_OFFSET), WHOLE_NUMBER] | None = Field(
        None,
        description=f"Skip this many values, 0–{facets.MAX_OFFSET:,} (0 when left out or null): "
        "a previous page's `next_offset` to read on.",
    )
    limit: Annotated[StrictInt, Field(ge=1, le=facets.MAX_PAGE), WHOLE_NUMBER] | None = Field(
        None,
        description=f"Most values in the page, 1–{facets.MAX_PAGE:,} "
        f"({facets.DEFAULT_PAGE} when left out or null).",
    )


class ValuesArgs(PageArgs):
    """One page of a field's values on the caller's documents, with their counts."""

    field: facets.ValueField = Field(
        description="`doc_type`, `mime_type`, `category` (notes), `tags` or `owner`: the "
        "values `search`'s `doc_types`, `mime_types`, `category` and `tags` take, and an "
        "`owner` filter's (the owners of the caller's documents alone)."
    )


class SnippetMatch(BaseModel):
    """Where a query term occurs in a result's plain-text snippet."""

    start: int = Field(description="Offset into `snippet`, characters.")
    end: int = Field(description="End (exclusive), characters.")


class ToolSearchResult(SearchResult):
    """One search result: its best chunk's position, the snippet as plain text with the query
    terms' offsets, ``id`` for ``fetch`` and ``url`` a link that opens it in Nextcloud."""

    # SearchResult's fields, with ``snippet`` and ``url`` as Tools._result makes them
    # (plain_snippet; the search's ``open_url``, open_link's)

    id: str = Field(description="`{doc_type}:{doc_id}`, the `id` to give `fetch`.")
    snippet: str = Field(
        description="The best chunk's snippet, plain text: each run of whitespace one space, "
        "or one line break where it held one (two where it held a blank line, a paragraph's "
        "end); a note's, a Deck card's and a Markdown file's code lines keep their "
        "indentation, and one cut inside a fenced code block whose opening line it left out "
        "starts with that block's fence on a line of its own (added: not the document's text "
        "there), so that it reads as Markdown alone."
    )
    matches: list[SnippetMatch] = Field(description="Query terms in `snippet`.")
    url: str | None = Field(
        None, description="Opens the document in Nextcloud; null when no link is known."
    )
    # the search API's ``open_url`` (54a13a9 gave REST results that link) is this ``url``:
    # left out of the answer and its schema, not sent twice in every result
    open_url: SkipJsonSchema[None] = Field(None, exclude=True)


class SearchAnswer(BaseModel):
    """The ``search`` tool's result."""

    results: list[ToolSearchResult] = Field(description="Best first, one per document.")
    verification: Verification
    degraded: bool = Field(
        description="The dense half failed: the results are ranked by BM25 alone."
    )
    hints: list[SearchHint] = Field(
        description="Only when `results` is empty: each folder, path, tag, category or owner "
        "value that selects none of the caller's documents (its `field` in the arguments, "
        "`detail` naming it and the tool that lists the values); then each tag or category "
        "under an `or`, or beside a held value of its list, that the caller's documents hold "
        "only in another case or Unicode form (`detail` naming theirs). Empty otherwise."
    )


class FetchedChunk(BaseModel):
    """A chunk whose text is (partly) in a fetched ``text``."""

    chunk_index: int = Field(description="0-based index of the chunk in the document.")
    char_start: int = Field(description="Its start in the document's text, characters.")
    char_end: int = Field(description="Its end (exclusive), characters.")


class FetchMetadata(BaseModel):
    """The fetched document."""

    doc_type: str = Field(description="note, file, deck_card or news_item.")
    doc_id: str = Field(description="The document's id within its type.")
    path: str | None = Field(description="Path in the caller's own view (files, notes).")
    board_title: BoardTitle = None
    stack_title: StackTitle = None
    board_id: BoardId = None
    stack_id: StackId = None
    feed_id: FeedId = None
    chunk_count: int = Field(description="Chunks the document has in the index.")


class FetchAnswer(BaseModel):
    """The ``fetch`` tool's result (:func:`fetch_body`)."""

    id: str = Field(description="`{doc_type}:{doc_id}`.")
    title: str
    text: str = Field(description="The document's extracted text from `char_start`.")
    url: str | None = Field(description="Opens the document in Nextcloud; null if unknown.")
    char_start: int = Field(description="Offset of `text` in the document's text, characters.")
    char_end: int = Field(description="End (exclusive) of `text` in it, characters.")
    truncated: bool = Field(
        description="The document's text goes on past `char_end`: cut at `max_chars`, or "
        "(with `chunk_index`) chunks after the window's last."
    )
    next_offset: int | None = Field(
        description="When `truncated`, the `offset` to read on from (call `fetch` with it and "
        "without `chunk_index`); else null: `text` reaches the document's end."
    )
    metadata: FetchMetadata
    chunks: list[FetchedChunk] | None = Field(
        None, description="Only with `chunk_index`: the chunks `text` covers."
    )


def search_schema(default_limit: int) -> dict[str, Any]:
    """``search``'s input schema: the JSON Schema of ``POST /v1/search``'s body, the filter
    tree's schema included under ``$defs``, ``limit`` described with ``default_limit`` (the
    server's ``NCINDEX_SEARCH_DEFAULT_LIMIT``) and the time fields with where to read the
    server's "now" (``index_status``'s ``now``)."""
    _, top = models_json_schema([(SearchRequest, "validation")], ref_template=_REF)
    schema = dict(top["$defs"].pop("SearchRequest"))
    schema["$defs"] = top["$defs"]
    schema = json.loads(
        json.dumps(schema).replace(FILTER_NODE_REF, _REF.format(model="FilterNode"))
    )
    schema["$defs"].update(filter_schemas(_REF))
    # for a tool caller, which reaches the filter list by the `list_filters` tool, not by
    # the REST endpoint the model's own descriptions name
    schema["description"] = (
        "A search: `query`, and filters that all must hold (each list: any of its values)."
    )
    schema["properties"]["filter"]["description"] = (
        "A boolean filter tree: `{and: [...]}`, `{or: [...]}`, `{not: {...}}` nodes and "
        "`{field, op, value}` leaves, fields and operators as the `list_filters` tool lists "
        "them; a node with any other key is refused. Leave it out (or null) for no filter; "
        "an empty `{}` is refused."
    )
    schema["$defs"]["FilterLeaf"]["description"] = (
        "A condition; operators per field as the `list_filters` tool lists them."
    )
    properties = schema["properties"]
    for name, what in (("path_prefixes", "folders"), ("tags", "tags")):
        properties[name]["description"] += f" The caller's {what}: the `list_{what}` tool."
    properties["limit"]["description"] = (
        f"How many results, 1–{MAX_LIMIT} ({default_limit} when left out or null). There is "
        "no next page (no offset or cursor): for more, search again with a larger `limit`."
    )
    for name in ("modified_after", "modified_before"):
        properties[name]["description"] += (
            ' For a time relative to now ("last month"), reckon from the server\'s current '
            "time: `now` in the `index_status` tool's answer (ISO 8601, UTC)."
        )
    return schema


LISTINGS: Listings = MappingProxyType(
    {
        "tags": "`list_tags`",
        "path_prefix": "`list_folders`",
        "path": "`list_folders`",
        "category": "`list_values` with field `category`",
        "owner": "`list_values` with field `owner`",
    }
)
"""How a tool caller lists the values that a ``search`` that found nothing names, as spelt
otherwise (:func:`~ncindex.search.filters.other_spellings`) or as holding none of its
documents (:func:`~ncindex.search.filters.selecting_nothing`): by these tools, not by the REST
endpoints the search API's answers name."""


OUTPUT_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "search": (SearchAnswer, "Verified results, best first, with the verification counts."),
    "fetch": (FetchAnswer, "A document's text, its offsets and where to read on."),
    "list_filters": (FiltersDocument, "The fields `search`'s `filter` tree may name."),
    "list_folders": (facets.FoldersPage, "A page of the caller's folders, sorted, with the total."),
    "list_tags": (facets.TagsPage, "A page of the caller's system tags, sorted, with the total."),
    "list_values": (
        facets.ValuesPage,
        "A page of one field's values on the caller's documents, with their counts.",
    ),
    "index_status": (UserStatus, "The index as it concerns the caller only."),
}
"""The model each tool's ``structuredContent`` is built from (a success's; an error's is
``{"code", "field", "detail"}``, which the SDK client does not check against the output
schema) and the schema's description for a tool caller."""

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def output_schema(tool: str) -> dict[str, Any]:
    """``tool``'s ``outputSchema``: the JSON Schema (2020-12, ``$ref``s into its own
    ``$defs``) of :data:`OUTPUT_MODELS`'s model as serialised, with the tool caller's
    description at the top and the models' docstrings in ``$defs`` as Markdown (no reST
    roles or double backquotes). ``KeyError`` for another name."""
    model, description = OUTPUT_MODELS[tool]
    schema = model.model_json_schema(mode="serialization")
    schema["description"] = description
    for definition in schema.get("$defs", {}).values():
        if "description" in definition:
            text = _ROLE.sub(r"`\1`", definition["description"]).replace("``", "`")
            definition["description"] = " ".join(text.split())
    return schema


@dataclass
class Tools:
    """The tools over one search service. ``service`` returns it (lazily built);
    ``services`` gives the store and Redis for ``index_status``; ``link_base`` is the
    Nextcloud URL links are made from."""

    service: Callable[[], SearchService]
    services: Services
    link_base: str | None

    def search(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``search``: a verified search as ``client.user``."""
        try:
            request = SearchRequest.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc, SearchRequest) from None
        tree = request.filter_tree()
        response = self.service().search(client, request, tree=tree, listings=LISTINGS)
        answer = SearchAnswer(
            results=[self._result(r) for r in response.results],
            verification=response.verification,
            degraded=response.degraded,
            hints=response.hints,
        )
        body = answer.model_dump(mode="json")
        for result in body["results"]:
            if result.get("explain") is None:  # as the search API: the key only when asked for
                result.pop("explain", None)
        return body

    def fetch(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``fetch``: at most ``max_chars`` of a document's text as ``client.user``, from
        ``offset`` or around ``chunk_index`` (:func:`fetch_body` gives the shape). Raises
        :class:`InputError` (``invalid_value``, field ``offset``) for an offset at or past
        the text's end."""
        try:
            args = FetchArgs.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc, FetchArgs) from None
        ref = args.ref()
        whole = args.chunk_index is None
        window = WHOLE_DOCUMENT if whole else DEFAULT_WINDOW if args.window is None else args.window
        node = args.node_id()
        if node is not None:
            found = self._read_node(client, node, args.chunk_index or 0, window)
            if found is None:
                raise DocumentNotFound(args.id)
            ref, context = found
        elif ref is None:
            assert args.path is not None  # FetchArgs.ref: no ref only for a path or a node
            ref, context = self._at_path(client, args.path, args.chunk_index or 0, window)
        else:
            context = self.service().context(client, ref, args.chunk_index or 0, window)
        url = open_link(self.link_base, context.doc_type, context.doc_id, context.url)
        chars = DEFAULT_FETCH_CHARS if args.max_chars is None else args.max_chars
        return fetch_body(ref.key, url, context, args.offset or 0, chars, whole)

    def _at_path(
        self, client: NextcloudClient, path: str, chunk_index: int, window: int
    ) -> tuple[DocRef, ContextResponse]:
        """The document ``client.user`` has at ``path`` and its chunks (as
        :meth:`SearchService.context` gives them, verified with Nextcloud): looked up in the
        index (:meth:`SearchService.documents_at`, the most recently indexed first), each
        found checked with Nextcloud and held to the path the check gave — the index may
        trail a move, or still hold a file deleted and replaced at its path until the next
        scan, so the document there now is the one the check keeps there. The check of a
        file or note is a WebDAV ``SEARCH`` by file id as the caller, whose ``href`` is the
        node's path in the caller's view now (nextcloud/server
        ``apps/dav/lib/Files/FileSearchBackend.php`` ``search``, ``getHrefForNode``); one
        found elsewhere is handed to its re-read by :meth:`SearchService.context`. At most
        :data:`MAX_PATH_CHECKS` are checked; when none of them is there, Nextcloud is asked
        what is at ``path`` now (:meth:`_node_at`), and a file there is read if the index
        holds it at another path (:meth:`_moved_to`: moved here). Raises
        :class:`ToolFailure` naming ``path``: ``not_found`` when none is there (nothing the
        caller can read; moved away: then its id and the path it is at now are named; a file
        the index does not hold: then said so),
        ``invalid_value`` when several checked are (their ids listed, to fetch by),
        ``too_many_documents`` when none of those checked is there and the index has more
        at the path (their ids listed), ``invalid_value`` for a folder of the caller's (in
        the index, :meth:`SearchService.holds_folder`, or in Nextcloud); what
        :meth:`SearchService.context` raises but ``DocumentNotFound``."""
        assert client.user is not None
        wanted = caller_path(path, "path")
        service = self.service()
        indexed = service.documents_at(client.user, wanted)
        there: list[tuple[DocRef, ContextResponse]] = []
        elsewhere: list[str] = []  # moved since indexed: context handed it to on_stale too
        for ref in indexed[:MAX_PATH_CHECKS]:
            try:
                context = service.context(client, ref, chunk_index, window)
            except DocumentNotFound:  # gone: context handed it to on_stale, which re-checks it
                continue
            if context.path is None or context.path == wanted:
                there.append((ref, context))
            else:
                elsewhere.append(f"{ref.key} is at {json.dumps(context.path, ensure_ascii=False)}")
        if not there and len(indexed) > MAX_PATH_CHECKS:
            left = [ref.key for ref in indexed[MAX_PATH_CHECKS:]]
            shown = ", ".join(left[:MAX_LISTED_IDS]) + (", …" if len(left) > MAX_LISTED_IDS else "")
            raise ToolFailure(
                "too_many_documents",
                "path",
                f"the index has {len(indexed)} documents at this path; the {MAX_PATH_CHECKS} "
                "most recently indexed were checked and are no longer there (they leave the "
                f"index at their re-check or the next scan); not checked: {shown}. Fetch one "
                "of those by `id`, or call again once the index has caught up",
            )
        if not indexed and service.holds_folder(client.user, wanted):
            raise _a_folder(wanted)
        now = None if there else self._node_at(client, wanted)
        if now is not None and (moved_here := self._moved_to(client, now, chunk_index, window)):
            return moved_here
        if not there and elsewhere:
            raise ToolFailure(
                "not_found",
                "path",
                "no document you can read is at this path now; the index had one here that "
                f"has moved since: {'; '.join(elsewhere)} (its index entry is being updated). "
                "Fetch it by `id` or by that `path`",
            )
        if now is not None and now.is_folder:
            raise _a_folder(wanted)
        if now is not None:
            raise ToolFailure(
                "not_found",
                "path",
                "Nextcloud has a file at this path, but the index holds no document of yours "
                "for it: not indexed yet, or skipped (`index_status` counts the pending and "
                "skipped documents)",
            )
        if not there:
            raise ToolFailure(
                "not_found",
                "path",
                "no document you can read is at this path (a path in your own files as search "
                "results' `path` gives it, /Projects/plan.md: not URL-encoded, not a WebDAV or "
                "web URL); search to find the document",
            )
        if len(there) > 1:
            listed = ", ".join(ref.key for ref, _ in there)
            raise ToolFailure("invalid_value", "path", f"several documents: {listed}; give `id`")
        return there[0]

    @staticmethod
    def _node_at(client: NextcloudClient, path: str) -> DavEntry | None:
        """What Nextcloud has at ``path`` in ``client.user``'s files now, by a ``PROPFIND``
        (``Depth: 0``) as the caller, whose ``oc:fileid`` is the node's (nextcloud/server
        ``apps/dav/lib/Connector/Sabre/FilesPlugin.php`` ``handleGetProperties``); ``None``
        when the caller has nothing there. Raises ``TransientError`` when Nextcloud cannot
        answer."""
        try:
            entries = client.propfind(path, depth=0)
        except NotFound:
            return None
        return entries[0] if entries else None

    def _moved_to(
        self, client: NextcloudClient, node: DavEntry, chunk_index: int, window: int
    ) -> tuple[DocRef, ContextResponse] | None:
        """The document of ``node`` (a file Nextcloud has at a path the index has nothing of
        the caller's at) when the index holds it at the path it was moved from (the move's
        event not yet handled, or lost), so that a search result's ``path`` — the check's,
        the path now — can be fetched: the note or file of ``node``'s id read as every fetch
        reads (:meth:`SearchService.context`, which hands a document found moved to its
        re-read). ``None`` for a folder, or a file the index does not hold for the caller.
        Raises what :meth:`SearchService.context` raises but ``DocumentNotFound``."""
        if node.is_folder or node.file_id is None:
            return None
        found = self._read_node(client, node.file_id, chunk_index, window)
        return found if found is not None and found[1].path == node.path else None

    def _read_node(
        self, client: NextcloudClient, file_id: int, chunk_index: int, window: int
    ) -> tuple[DocRef, ContextResponse] | None:
        """The note or file of ``file_id`` (a note is indexed by its file's id) and its
        chunks, read as every fetch reads (:meth:`SearchService.context`); ``None`` when the
        index holds neither for ``client.user`` or the check finds it gone. Raises what
        :meth:`SearchService.context` raises but ``DocumentNotFound``."""
        for doc_type in (DocType.NOTE, DocType.FILE):
            ref = DocRef(doc_type, str(file_id))
            try:
                return ref, self.service().context(client, ref, chunk_index, window)
            except DocumentNotFound:
                continue
        return None

    def list_filters(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``list_filters``: the fields and operators, as ``GET /v1/filters``."""
        _no_args(arguments)
        return filters_document()

    def list_folders(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``list_folders``: a page of the caller's folders, as ``GET /v1/folders`` answers it
        (:func:`~ncindex.search.facets.listed_folders`, :func:`~ncindex.search.facets.facet_page`):
        ``{folders, total, next_offset}``."""
        return self._page("folders", facets.listed_folders, client, arguments)

    def list_tags(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``list_tags``: a page of the caller's system tags, as ``GET /v1/tags`` answers it
        (:func:`~ncindex.search.facets.listed_tags`): ``{tags, total, next_offset}``."""
        return self._page("tags", facets.listed_tags, client, arguments)

    def list_values(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``list_values``: a page of ``field``'s values on the caller's documents with their
        counts (:func:`~ncindex.search.facets.counted_values`): ``{field, values: [{value,
        count}], total, next_offset}``."""
        try:
            args = ValuesArgs.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc, ValuesArgs) from None
        values = facets.counted_values(self.services.models.view().live.store, client, args.field)
        limit = facets.DEFAULT_PAGE if args.limit is None else args.limit
        return {"field": args.field, **facets.facet_page("values", values, args.offset or 0, limit)}

    def _page(
        self,
        name: str,
        listed: Callable[[VectorStore, NextcloudClient], list[str]],
        client: NextcloudClient,
        arguments: dict[str, Any],
    ) -> dict[str, Any]:
        try:
            args = PageArgs.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc, PageArgs) from None
        values = listed(self.services.models.view().live.store, client)
        limit = facets.DEFAULT_PAGE if args.limit is None else args.limit
        return facets.facet_page(name, values, args.offset or 0, limit)

    def index_status(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``index_status``: the caller's own counts (:func:`user_status`)."""
        _no_args(arguments)
        assert client.user is not None
        return user_status(self.services, client.user)

    def _result(self, r: SearchResult) -> ToolSearchResult:
        text, spans = plain_snippet(r.snippet)
        return ToolSearchResult.model_validate(
            {
                **{name: value for name, value in r if name != "open_url"},
                "id": r.doc_key,
                "url": r.open_url,  # the search's open_link: the link once, as `url`
                "snippet": text,
                "matches": [SnippetMatch(start=a, end=b) for a, b in spans],
            }
        )


def fetch_body(
    key: str, url: str | None, context: ContextResponse, offset: int, max_chars: int, whole: bool
) -> dict[str, Any]:
    """``fetch``'s answer for ``context``'s chunks: ``{id, title, text, url, char_start,
    char_end, truncated, next_offset, metadata: {doc_type, doc_id, path, board_title,
    stack_title, board_id, stack_id, feed_id, chunk_count}}`` (a Deck card's board and stack,
    a News item's feed: ``context``'s), and
    with a window of chunks (not ``whole``) ``chunks``: ``[{chunk_index, char_start,
    char_end}]`` of those in ``text`` (their text only once, in ``text``).

    ``text`` is :func:`stitched` from character ``offset`` (or the first chunk's start, when
    later) of the document, at most ``max_chars`` characters; ``char_start``/``char_end`` are
    its offsets in the document's extracted text, so a document offset ``i`` (a chunk's, a
    search result's) is ``text[i - char_start]``. ``truncated`` says the document's text goes
    on past ``char_end`` — cut at ``max_chars``, or a window whose last chunk is not the
    document's (``context.chunk_count``) — and ``next_offset`` (else null) is the ``offset``
    to read on from. Raises
    :class:`InputError` (``invalid_value``, field ``offset``) for an ``offset`` at or past the
    text's end."""
    first = context.chunks[0].char_start
    text = stitched(context)
    end = first + len(text)
    if offset >= end:
        raise InputError("invalid_value", "offset", f"past the end of the text ({end} characters)")
    start = max(offset, first)
    shown = text[start - first : start - first + max_chars]
    stop = start + len(shown)
    # a window that ends before the document's last chunk leaves text to read too: it said
    # `truncated: false`, which reads as the document's end
    more = stop < end or context.chunks[-1].chunk_index < context.chunk_count - 1
    answer = FetchAnswer(
        id=key,
        title=context.title,
        text=shown,
        url=url,
        char_start=start,
        char_end=stop,
        truncated=more,
        next_offset=stop if more else None,
        metadata=FetchMetadata(
            doc_type=context.doc_type,
            doc_id=context.doc_id,
            path=context.path,
            **context.model_dump(include=set(PLACE_FIELDS)),
            chunk_count=context.chunk_count,
        ),
        chunks=None
        if whole
        else [
            FetchedChunk(chunk_index=c.chunk_index, char_start=c.char_start, char_end=c.char_end)
            for c in context.chunks
            if c.char_start < stop and c.char_end > start
        ],
    )
    return answer.model_dump(mode="json", exclude={"chunks"} if whole else set())


def stitched(context: ContextResponse) -> str:
    """The chunks' text as one string, from the first chunk's ``char_start``: character ``i``
    of the document is ``stitched(context)[i - chunks[0].char_start]``. Overlapping chunks are
    joined at their offsets (the overlap once); a gap between two chunks — whitespace the
    chunker trimmed (:meth:`ncindex.text.chunking.Chunker.chunk_text`), which the index does
    not keep — is filled with as many newlines as it spans, so every later offset still lands
    on its character."""
    out: list[str] = []
    end = None
    for chunk in context.chunks:
        if end is None or chunk.char_start >= end:
            if end is not None:
                out.append("\n" * (chunk.char_start - end))
            out.append(chunk.text)
        elif chunk.char_end > end:
            out.append(chunk.text[end - chunk.char_start :])
        end = chunk.char_end if end is None else max(end, chunk.char_end)
    return "".join(out)


def failure_of(exc: Exception) -> ToolFailure:
    """The tool error for an exception a tool raised: the product's code and field for the
    classes it answers over HTTP too (:data:`ncindex.web.problems.PROBLEMS`), with
    ``retry_after`` (:data:`~ncindex.errors.RETRY_AFTER_SECONDS`) for ``backend_unavailable``
    and ``model_unavailable``, where the search API's 503 says ``Retry-After``;
    ``internal_error`` (logged) for anything else."""
    if isinstance(exc, ToolFailure):
        return exc
    if isinstance(exc, InputError):
        return ToolFailure(exc.code, exc.field, exc.detail)
    if isinstance(exc, DocumentNotFound):
        return ToolFailure("not_found", "id", "no such document, or you cannot read it")
    if isinstance(exc, Unauthenticated | NextcloudAuthError):
        return ToolFailure("unauthenticated", "Authorization", "Nextcloud rejected the credentials")
    if isinstance(exc, ModelError):
        log.warning("mcp_model_unavailable", error=f"{type(exc).__name__}: {exc}")
        return ToolFailure("model_unavailable", None, public_reason(exc), RETRY_AFTER_SECONDS)
    if isinstance(exc, TransientError):  # the store, Nextcloud, Redis (index_status)
        log.warning("mcp_backend_unavailable", error=f"{type(exc).__name__}: {exc}")
        return ToolFailure("backend_unavailable", None, public_reason(exc), RETRY_AFTER_SECONDS)
    log.error("mcp_tool_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
    return ToolFailure("internal_error", None, f"internal error: {type(exc).__name__}")


def _a_folder(path: str) -> ToolFailure:
    """``fetch``'s error for a ``path`` that is a folder of the caller's."""
    return ToolFailure(
        "invalid_value",
        "path",
        "is a folder: `fetch` reads one file or note; search with `path_prefixes` "
        f"{json.dumps([path], ensure_ascii=False)} to find the documents in it",
    )


def _no_args(arguments: dict[str, Any]) -> None:
    try:
        NoArgs.model_validate(arguments)
    except ValidationError as exc:
        raise validation_error(exc, NoArgs) from None
