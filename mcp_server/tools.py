"""The MCP server's tools: ``search``, ``fetch``, ``list_filters`` and ``index_status``, all
read-only, all answered as the caller (the Nextcloud client the HTTP gate resolved).

``search`` takes the body of ``POST /v1/search`` (its JSON Schema is that model's) and answers
the same verified results, each with ``id`` (``"{doc_type}:{doc_id}"``), ``title``, ``url``
(a link that opens the document in Nextcloud, :func:`open_link`), ``path``, ``snippet`` as
plain text with ``matches`` (``start``/``end`` character offsets into it), ``score``,
``doc_type``, ``doc_id``, ``chunk_index`` and ``modified_at`` (Unix seconds). ``fetch`` takes
that ``id`` (or ``doc_type`` + ``doc_id``) and answers the whole extracted text, or with
``chunk_index`` the chunks ``chunk_index ± window``, after the same ownership check and
verify-on-read as ``GET /v1/documents/{doc_type}/{doc_id}/context``.

The research-mode shape clients such as ChatGPT's deep research call (a ``search`` tool taking
``query`` whose results carry ``id``, ``title`` and ``url``; a ``fetch`` tool taking ``id``
whose answer carries ``id``, ``title``, ``text``, ``url`` and ``metadata``) is the same two
tools: those clients find tools by these names, and ``query`` and ``id`` are the only required
arguments, so a second pair would need other names they do not look for.

A failure is a tool error (``isError``): ``structuredContent`` is ``{"code", "field",
"detail"}`` with the product's stable codes (``invalid_value``, ``invalid_filter``,
``unknown_field``, ``unsupported_operator``, ``not_found``, ``backend_unavailable``,
``model_unavailable``, ``internal_error``) and the text content says the same in one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import models_json_schema

from ncindex.documents import DocRef, DocType
from ncindex.errors import (
    DocumentNotFound,
    InputError,
    ModelError,
    NextcloudAuthError,
    TransientError,
    Unauthenticated,
    public_reason,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services
from ncindex.search.filter_fields import filter_schemas, filters_document
from ncindex.search.links import open_link
from ncindex.search.service import (
    FILTER_NODE_REF,
    MAX_CHUNK_INDEX,
    MAX_CONTEXT_WINDOW,
    MAX_DOC_ID_CHARS,
    ContextResponse,
    SearchRequest,
    SearchResult,
    SearchService,
)
from ncindex.strict_json import JsonInt
from ncindex.sync.user_status import user_status
from ncindex.text.snippets import plain_snippet
from ncindex.web.problems import validation_error

log = structlog.get_logger(__name__)

_REF = "#/$defs/{model}"
WHOLE_DOCUMENT = 1_000_000
"""``window`` used to read every chunk of a document (larger than any chunk count)."""


class ToolFailure(Exception):
    """Raised by a tool for an anticipated failure: answered as a tool error carrying the
    product's ``code``, the offending ``field`` (or ``None``) and a ``detail``."""

    def __init__(self, code: str, field: str | None, detail: str) -> None:
        super().__init__(detail)
        self.code, self.field, self.detail = code, field, detail

    def as_dict(self) -> dict[str, Any]:
        """``{"code", "field", "detail"}``."""
        return {"code": self.code, "field": self.field, "detail": self.detail}


class FetchArgs(BaseModel):
    """Arguments of ``fetch``: the document by ``id`` (as ``search`` returns it) or by
    ``doc_type`` and ``doc_id``; without ``chunk_index`` the whole text."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(
        None,
        max_length=MAX_DOC_ID_CHARS + 16,
        description="A search result's id, `{doc_type}:{doc_id}` (e.g. `file:123`).",
    )
    doc_type: DocType | None = Field(None, description="With `doc_id`, instead of `id`.")
    doc_id: str | None = Field(
        None, min_length=1, max_length=MAX_DOC_ID_CHARS, description="With `doc_type`."
    )
    chunk_index: JsonInt | None = Field(
        None,
        ge=0,
        le=MAX_CHUNK_INDEX,
        description="Answer the chunks around this one (a search result's `chunk_index`) "
        "instead of the whole text.",
    )
    window: JsonInt = Field(
        2,
        ge=0,
        le=MAX_CONTEXT_WINDOW,
        description="Chunks on each side of `chunk_index` (only with it).",
    )

    def ref(self) -> DocRef:
        """The document; raises :class:`InputError` (``invalid_value``) for a bad id, naming
        ``id`` when neither ``id`` nor both of ``doc_type`` and ``doc_id`` are given, or both
        ways are, and naming ``window`` when it is given without ``chunk_index``."""
        if self.id is None and (self.doc_type is None or self.doc_id is None):
            missing = "doc_id" if self.doc_type is not None else "doc_type" if self.doc_id else "id"
            raise InputError("invalid_value", missing, "give `id`, or `doc_type` and `doc_id`")
        if self.id is not None and (self.doc_type is not None or self.doc_id is not None):
            raise InputError(
                "invalid_value", "id", "give `id` or `doc_type` and `doc_id`, not both"
            )
        if "window" in self.model_fields_set and self.chunk_index is None:
            raise InputError(
                "invalid_value", "window", "counts chunks around `chunk_index`; give both"
            )
        if self.id is not None:
            doc_type, _, doc_id = self.id.partition(":")
            field = "id"
        else:
            doc_type, doc_id, field = str(self.doc_type), self.doc_id or "", "doc_id"
        if doc_type not in {t.value for t in DocType}:
            raise InputError("invalid_value", field, "not `{doc_type}:{doc_id}` of a known type")
        if not doc_id or len(doc_id) > MAX_DOC_ID_CHARS or "/" in doc_id:
            raise InputError("invalid_value", field, "not a document id")
        return DocRef(DocType(doc_type), doc_id)


class NoArgs(BaseModel):
    """No arguments."""

    model_config = ConfigDict(extra="forbid")


def search_schema() -> dict[str, Any]:
    """``search``'s input schema: the JSON Schema of ``POST /v1/search``'s body, the filter
    tree's schema included under ``$defs``."""
    _, top = models_json_schema([(SearchRequest, "validation")], ref_template=_REF)
    schema = dict(top["$defs"].pop("SearchRequest"))
    schema["$defs"] = top["$defs"]
    schema = json.loads(
        json.dumps(schema).replace(FILTER_NODE_REF, _REF.format(model="FilterNode"))
    )
    schema["$defs"].update(filter_schemas(_REF))
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
            raise validation_error(exc) from None
        tree = request.filter_tree()
        response = self.service().search(client, request, tree=tree)
        return {
            "results": [self._result(r) for r in response.results],
            "verification": response.verification.model_dump(),
            "degraded": response.degraded,
        }

    def fetch(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``fetch``: a document's text (or a window of its chunks) as ``client.user``."""
        try:
            args = FetchArgs.model_validate(arguments)
        except ValidationError as exc:
            raise validation_error(exc) from None
        ref = args.ref()
        whole = args.chunk_index is None
        context = self.service().context(
            client, ref, args.chunk_index or 0, WHOLE_DOCUMENT if whole else args.window
        )
        body: dict[str, Any] = {
            "id": ref.key,
            "title": context.title,
            "text": stitched(context),
            "url": open_link(self.link_base, context.doc_type, context.doc_id, context.url),
            "metadata": {
                "doc_type": context.doc_type,
                "doc_id": context.doc_id,
                "path": context.path,
                "chunk_count": context.chunk_count,
            },
        }
        if not whole:
            body["chunks"] = [c.model_dump() for c in context.chunks]
        return body

    def list_filters(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``list_filters``: the fields and operators, as ``GET /v1/filters``."""
        _no_args(arguments)
        return filters_document()

    def index_status(self, client: NextcloudClient, arguments: dict[str, Any]) -> dict[str, Any]:
        """``index_status``: the caller's own counts (:func:`user_status`)."""
        _no_args(arguments)
        assert client.user is not None
        return user_status(self.services, client.user)

    def _result(self, r: SearchResult) -> dict[str, Any]:
        out = r.model_dump(mode="json")
        if out.get("explain") is None:  # as the search API: the key only when asked for
            out.pop("explain", None)
        text, spans = plain_snippet(r.snippet)
        out.update(
            id=r.doc_key,
            url=open_link(self.link_base, r.doc_type, r.doc_id, r.url),
            snippet=text,
            matches=[{"start": a, "end": b} for a, b in spans],
        )
        return out


def stitched(context: ContextResponse) -> str:
    """The chunks' text as one string: overlapping chunks are joined at their character
    offsets (the overlap once), chunks with a gap between them by a newline."""
    out: list[str] = []
    end = None
    for chunk in context.chunks:
        if end is None or chunk.char_start >= end:
            if end is not None:
                out.append("\n")
            out.append(chunk.text)
        elif chunk.char_end > end:
            out.append(chunk.text[end - chunk.char_start :])
        end = chunk.char_end if end is None else max(end, chunk.char_end)
    return "".join(out)


def failure_of(exc: Exception) -> ToolFailure:
    """The tool error for an exception a tool raised: the product's code and field for the
    classes it answers over HTTP too; ``internal_error`` (logged) for anything else."""
    if isinstance(exc, ToolFailure):
        return exc
    if isinstance(exc, InputError):
        return ToolFailure(exc.code, exc.field, exc.detail)
    if isinstance(exc, DocumentNotFound):
        return ToolFailure("not_found", "id", "no such document, or you cannot read it")
    if isinstance(exc, Unauthenticated | NextcloudAuthError):
        return ToolFailure("unauthenticated", None, "Nextcloud rejected the credentials")
    if isinstance(exc, ModelError):
        log.warning("mcp_model_unavailable", error=f"{type(exc).__name__}: {exc}")
        return ToolFailure("model_unavailable", None, public_reason(exc))
    if isinstance(exc, TransientError):
        log.warning("mcp_backend_unavailable", error=f"{type(exc).__name__}: {exc}")
        return ToolFailure("backend_unavailable", None, public_reason(exc))
    if isinstance(exc, redis.RedisError):  # index_status reads Redis itself
        log.warning("mcp_redis_unavailable", error=f"{type(exc).__name__}: {exc}")
        return ToolFailure("backend_unavailable", None, "Redis is unavailable")
    log.error("mcp_tool_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
    return ToolFailure("internal_error", None, f"internal error: {type(exc).__name__}")


def _no_args(arguments: dict[str, Any]) -> None:
    try:
        NoArgs.model_validate(arguments)
    except ValidationError as exc:
        raise validation_error(exc) from None
