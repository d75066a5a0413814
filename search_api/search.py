"""``POST /v1/search``, ``GET /v1/filters`` and the context endpoint (DESIGN §9).

Each handler parses, authenticates, calls :class:`ncindex.search.service.SearchService` and reports.
Errors are RFC 9457 problem+json with a stable ``code`` and the offending ``field``:
400 ``invalid_json``, ``invalid_value``, ``invalid_filter``, ``unknown_field``,
``unsupported_operator``; 401 ``unauthenticated``; 404 ``not_found``; 429 ``rate_limited``;
503 ``backend_unavailable``. Bad input never yields a 500.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from flask import Blueprint, Response, jsonify, request
from pydantic import ValidationError

from ncindex import strict_json
from ncindex.documents import DocRef, DocType
from ncindex.embedding.models import ModelError
from ncindex.errors import NextcloudAuthError, TransientError, public_reason
from ncindex.runtime import Services
from ncindex.search.filter_fields import filters_document
from ncindex.search.filters import FilterError
from ncindex.search.service import DocumentNotFound, SearchRequest, SearchService
from ncindex.telemetry import SEARCH_SECONDS, SEARCHES
from ncindex.web.auth import Unauthenticated, resolve_caller
from ncindex.web.problems import problem, read_body

log = structlog.get_logger(__name__)

BASIC_CHALLENGE = {"WWW-Authenticate": 'Basic realm="ncindex"'}
MAX_WINDOW = 20
MAX_DOC_ID_CHARS = 256

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


class BadInput(Exception):
    """A request that cannot be used: becomes a 400 problem."""

    def __init__(self, code: str, field: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.field, self.detail = code, field, detail

    def response(self) -> Response:
        """The problem+json answer."""
        return problem(400, self.code, self.detail, field=self.field)


#: Largest accepted request body, bytes (a search request is a few hundred bytes).
MAX_BODY_BYTES = 64 * 1024


def read_json_object() -> dict[str, Any]:
    """The request body as a JSON object (with or without a Content-Type). ``NaN`` and
    ``Infinity`` are refused; raises :class:`BadInput` (``invalid_json``, field ``body``), and
    ``RequestEntityTooLarge`` (413) past :data:`MAX_BODY_BYTES`, chunked or not."""
    body = read_body(request, MAX_BODY_BYTES)
    try:
        raw = strict_json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadInput("invalid_json", "body", f"body is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadInput("invalid_json", "body", "body must be a JSON object")
    return raw


def validation_error(exc: ValidationError) -> BadInput:
    """The first pydantic error as :class:`BadInput`: a key the body does not have is
    ``unknown_field``, a bad ``filter`` ``invalid_filter``, anything else ``invalid_value``."""
    first = exc.errors()[0]
    loc = first["loc"]
    # the field name, then list indexes; union member tags ("int", "str") are dropped
    field = (
        "".join([str(loc[0]), *(f"[{p}]" for p in loc[1:] if isinstance(p, int))]) if loc else ""
    )
    if first["type"] == "extra_forbidden":
        code = "unknown_field"
    elif loc and loc[0] == "filter":
        code = "invalid_filter"
    else:
        code = "invalid_value"
    return BadInput(code, field or "body", first["msg"])


def search_blueprint(
    services: Services,
    service: Callable[[], SearchService],
    limited: Decorator | None = None,
) -> Blueprint:
    """Blueprint with ``POST /v1/search``, ``GET /v1/filters`` and
    ``GET /v1/documents/<doc_type>/<doc_id>/context``; ``limited`` wraps the views that
    count against the caller's rate limit."""
    bp = Blueprint("search", __name__)
    limit = limited or (lambda f: f)

    @bp.post("/v1/search")
    @limit
    def search() -> Response | tuple[Response, int]:
        try:
            raw = read_json_object()
            try:
                search_request = SearchRequest.model_validate(raw)
            except ValidationError as exc:
                raise validation_error(exc) from None
            try:
                tree = search_request.filter_tree()
            except FilterError as exc:
                raise BadInput(exc.code, exc.field, exc.detail) from None
        except BadInput as exc:
            SEARCHES.labels("bad_request").inc()
            return exc.response()
        try:
            client = resolve_caller(services, request.headers.get("Authorization"))
            response = service().search(client, search_request, tree=tree)
        except (Unauthenticated, NextcloudAuthError) as exc:
            SEARCHES.labels("unauthenticated").inc()
            return problem(401, "unauthenticated", str(exc), headers=BASIC_CHALLENGE)
        except (TransientError, ModelError) as exc:
            SEARCHES.labels("unavailable").inc()
            return _unavailable(exc)
        SEARCHES.labels("ok").inc()
        for stage, ms in response.timings_ms.items():
            SEARCH_SECONDS.labels(stage).observe(ms / 1000)
        return jsonify(response.as_dict())

    @bp.get("/v1/filters")
    def filters() -> Response:
        return jsonify(filters_document())

    @bp.get("/v1/documents/<doc_type>/<path:doc_id>/context")
    @limit
    def context(doc_type: str, doc_id: str) -> Response | tuple[Response, int]:
        try:
            ref = _doc_ref(doc_type, doc_id)
            chunk_index = _int_arg("chunk_index", 0, 0, 1_000_000)
            window = _int_arg("window", 2, 0, MAX_WINDOW)
        except BadInput as exc:
            return exc.response()
        try:
            client = resolve_caller(services, request.headers.get("Authorization"))
            body = service().context(client, ref, chunk_index, window)
        except (Unauthenticated, NextcloudAuthError) as exc:
            return problem(401, "unauthenticated", str(exc), headers=BASIC_CHALLENGE)
        except DocumentNotFound:
            return problem(
                404, "not_found", "no such document, or you cannot read it", field="doc_id"
            )
        except ValueError as exc:
            return problem(400, "invalid_value", str(exc), field="chunk_index")
        except (TransientError, ModelError) as exc:
            return _unavailable(exc)
        return jsonify(body.model_dump(mode="json"))

    return bp


def _unavailable(exc: Exception) -> Response:
    """503: the store or Nextcloud failed (``backend_unavailable``), or the live model's
    files are missing or broken in this process (``model_unavailable``: after ``ncindex
    reindex`` every search process needs the new model's folder). The detail is
    :func:`~ncindex.errors.public_reason`; the exception's text is logged."""
    log.warning("search_backend_unavailable", error=f"{type(exc).__name__}: {exc}")
    code = "model_unavailable" if isinstance(exc, ModelError) else "backend_unavailable"
    return problem(503, code, public_reason(exc), headers={"Retry-After": "5"})


def _doc_ref(doc_type: str, doc_id: str) -> DocRef:
    if doc_type not in {t.value for t in DocType}:
        raise BadInput(
            "invalid_value", "doc_type", f"must be one of {', '.join(t.value for t in DocType)}"
        )
    if not doc_id or len(doc_id) > MAX_DOC_ID_CHARS or "/" in doc_id:
        raise BadInput("invalid_value", "doc_id", "not a document id")
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("invalid_value", "doc_id", "not valid Unicode") from None
    return DocRef(DocType(doc_type), doc_id)


def _int_arg(name: str, default: int, lo: int, hi: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    # ASCII digits only: int() would also take "١" (Arabic-Indic one), "1_0" and " 1 "
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise BadInput("invalid_value", name, f"must be an integer from {lo} to {hi}")
    value = int(raw)
    if not lo <= value <= hi:
        raise BadInput("invalid_value", name, f"must be between {lo} and {hi}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
