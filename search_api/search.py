"""``POST /v1/search``, ``GET /v1/filters`` and the context endpoint (DESIGN §9).

Each handler parses, authenticates, calls :class:`ncindex.search.service.SearchService` and reports.
Errors are RFC 9457 problem+json with a stable ``code`` and the offending ``field``:
400 ``invalid_json``, ``invalid_value``, ``invalid_filter``, ``unknown_field`` (a body key,
filter field or query parameter that does not exist), ``unsupported_operator``; 401
``unauthenticated``; 404 ``not_found``; 405 ``method_not_allowed``; 429 ``rate_limited``; 503
``backend_unavailable``. Bad input never yields a 500.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

import structlog
from flask import Blueprint, Response, jsonify, request
from pydantic import ValidationError

from ncindex import strict_json
from ncindex.documents import DocRef, DocType
from ncindex.errors import (
    InputError,
    ModelError,
    NextcloudAuthError,
    TransientError,
    Unauthenticated,
)
from ncindex.runtime import Services
from ncindex.search.filter_fields import filters_document
from ncindex.search.service import (
    MAX_CHUNK_INDEX,
    MAX_CONTEXT_WINDOW,
    SearchRequest,
    SearchService,
    checked_doc_id,
)
from ncindex.telemetry import SEARCH_SECONDS, SEARCHES
from ncindex.web.auth import forget_caller, normalized_authorization, resolve_caller
from ncindex.web.problems import (
    MAX_BODY_BYTES,
    TRANSLATED,
    problem_for,
    read_body,
    validation_error,
)

log = structlog.get_logger(__name__)

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def refused_answer(services: Services, exc: Exception) -> Response:
    """The problem answer of a ``/v1/`` call that failed with ``exc`` (:func:`problem_for`),
    after :func:`~ncindex.web.auth.forget_caller` drops the caller's cached credential when
    ``exc`` is a :class:`~ncindex.errors.NextcloudAuthError`: Nextcloud refused it after
    :func:`~ncindex.web.auth.resolve_caller` let it through (revoked since it was cached)."""
    if isinstance(exc, NextcloudAuthError):
        forget_caller(services, request.headers.get("Authorization"))
    return problem_for(exc)


def read_json_object(*, empty_ok: bool = False) -> dict[str, Any]:
    """The request body as a JSON object (with or without a Content-Type); with ``empty_ok``
    an empty body is ``{}``. ``NaN`` and ``Infinity`` are refused; raises
    :class:`~ncindex.errors.InputError` (``invalid_json``, field ``body``), and
    :class:`~ncindex.web.problems.BodyTooLarge` (413) past :data:`MAX_BODY_BYTES`, chunked or
    not."""
    body = read_body(request, MAX_BODY_BYTES)
    if empty_ok and not body:
        return {}
    try:
        raw = strict_json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError("invalid_json", "body", f"body is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise InputError("invalid_json", "body", "body must be a JSON object")
    return raw


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
        try:  # no usable credentials: 401 before the body is judged (Nextcloud is not asked)
            normalized_authorization(request.headers.get("Authorization"))
        except Unauthenticated as exc:
            SEARCHES.labels("unauthenticated").inc()
            return problem_for(exc)
        try:
            int_args()  # it takes none: a ?limit=3 is not read as the body's limit
            raw = read_json_object()
            try:
                search_request = SearchRequest.model_validate(raw)
            except ValidationError as exc:
                raise validation_error(exc, SearchRequest) from None
            tree = search_request.filter_tree()
        except InputError as exc:
            SEARCHES.labels("bad_request").inc()
            return problem_for(exc)
        try:
            client = resolve_caller(services, request.headers.get("Authorization"))
            response = service().search(client, search_request, tree=tree)
        except (Unauthenticated, NextcloudAuthError) as exc:
            SEARCHES.labels("unauthenticated").inc()
            return refused_answer(services, exc)
        except (TransientError, ModelError) as exc:
            SEARCHES.labels("unavailable").inc()
            return problem_for(exc)
        except InputError as exc:  # a tag or category the caller's documents spell otherwise
            SEARCHES.labels("bad_request").inc()
            return problem_for(exc)
        SEARCHES.labels("ok").inc()
        for stage, ms in response.timings_ms.items():
            SEARCH_SECONDS.labels(stage).observe(ms / 1000)
        return jsonify(response.as_dict())

    @bp.get("/v1/filters")
    def filters() -> Response:
        try:
            int_args()  # it takes none
        except InputError as exc:
            return problem_for(exc)
        return jsonify(filters_document())

    @bp.get("/v1/documents/<doc_type>/<path:doc_id>/context")
    @limit
    def context(doc_type: str, doc_id: str) -> Response | tuple[Response, int]:
        try:
            normalized_authorization(request.headers.get("Authorization"))
            ref = _doc_ref(doc_type, doc_id)
            args = int_args(chunk_index=(0, 0, MAX_CHUNK_INDEX), window=(2, 0, MAX_CONTEXT_WINDOW))
        except (Unauthenticated, InputError) as exc:
            return problem_for(exc)
        try:
            client = resolve_caller(services, request.headers.get("Authorization"))
            body = service().context(client, ref, args["chunk_index"], args["window"])
        except TRANSLATED as exc:  # 401, 404, 400 (chunk_index past the last chunk), 503
            return refused_answer(services, exc)
        return jsonify(body.model_dump(mode="json"))

    return bp


def _doc_ref(doc_type: str, doc_id: str) -> DocRef:
    if doc_type not in {t.value for t in DocType}:
        raise InputError(
            "invalid_value", "doc_type", f"must be one of {', '.join(t.value for t in DocType)}"
        )
    if not _path_is_utf8():  # doc_type is one of DocType's: the bytes are doc_id's
        raise InputError(
            "invalid_value", "doc_id", "not a document id: its percent-escapes are not UTF-8"
        )
    return DocRef(DocType(doc_type), checked_doc_id(doc_id, "doc_id"))


def _path_is_utf8() -> bool:
    """Whether the request's path, percent-decoded, is UTF-8. Werkzeug decodes the path it
    routes with ``errors="replace"``, and its development server (``ncindex up``) unquotes the
    path the same way before the app (``werkzeug.serving``: ``unquote``), so ``%ff%fe``
    reached the view as two U+FFFD, a well-formed id looked up and answered 404
    ``not_found``. Read here: the request line's target as the server received it
    (``RAW_URI``, set by werkzeug's server and gunicorn; latin-1 as WSGI strings are,
    PEP 3333) with its percent-escapes decoded, and ``PATH_INFO``, whose bytes gunicorn
    passes as they were (``unquote_to_wsgi_str``)."""
    environ = request.environ
    target = environ.get("RAW_URI", "").partition("?")[0]
    try:
        unquote_to_bytes(target.encode("latin-1")).decode("utf-8")
        environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8")
    except UnicodeError:
        return False
    return True


def int_args(**params: tuple[int, int, int]) -> dict[str, int]:
    """The query parameters ``params`` names (name → ``(default, lo, hi)``), each an integer
    from ``lo`` to ``hi`` (``default`` when absent), and no other; raises
    :class:`~ncindex.errors.InputError` — ``unknown_field`` for any other parameter (a
    misspelt ``lmit`` would otherwise leave the default in force without a word),
    ``invalid_value`` for a value out of range, not written in ASCII digits or given more
    than once — with the parameter's name as its field."""
    for name in request.args:
        if name not in params:
            known = ", ".join(params) or "none"
            raise InputError("unknown_field", name, f"not a query parameter here (known: {known})")
    return {name: _int_arg(name, *bounds) for name, bounds in params.items()}


def _int_arg(name: str, default: int, lo: int, hi: int) -> int:
    given = request.args.getlist(name)
    if len(given) > 1:  # ?limit=1&limit=2: which one was meant is not ours to guess
        raise InputError("invalid_value", name, "given more than once")
    raw = given[0] if given else None
    if raw is None:
        return default
    # ASCII digits only: int() would also take "١" (Arabic-Indic one), "1_0" and " 1 "
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise InputError("invalid_value", name, f"must be an integer from {lo} to {hi}")
    value = int(raw)
    if not lo <= value <= hi:
        raise InputError("invalid_value", name, f"must be between {lo} and {hi}")
    return value
