"""RFC 9457 problem details (``application/problem+json``) for both Flask apps.

Every error answer carries a stable machine-readable ``code`` and, for bad input, the
offending ``field``. Codes: ``invalid_json``, ``invalid_envelope``, ``invalid_filter``,
``unknown_field``, ``unsupported_operator``, ``invalid_value``, ``unauthenticated``,
``payload_too_large``, ``rate_limited``, ``not_found``, ``method_not_allowed``,
``backend_unavailable``, ``internal_error``; the HTTP servers' own answers to requests they
cannot parse (:mod:`ncindex.web.server_errors`) add ``invalid_http``, ``uri_too_long``,
``headers_too_large``, ``expectation_failed``, ``not_implemented``,
``http_version_not_supported``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from flask import Flask, Response, g, has_request_context, json
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import BadRequest, HTTPException, RequestEntityTooLarge
from werkzeug.wrappers import Request

from ncindex.errors import (
    RETRY_AFTER_SECONDS,
    DocumentNotFound,
    InputError,
    ModelError,
    NextcloudAuthError,
    TransientError,
    Unauthenticated,
    public_reason,
    refused_with_401,
)

log = structlog.get_logger(__name__)

PROBLEM_JSON = "application/problem+json"
#: Asks a client for Basic credentials (the search API's 401).
BASIC_CHALLENGE = {"WWW-Authenticate": 'Basic realm="ncindex"'}

_CODES = {
    400: "invalid_value",
    401: "unauthenticated",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "invalid_value",
    429: "rate_limited",
    503: "backend_unavailable",
}


def problem(
    status: int,
    code: str,
    detail: str,
    *,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    """A problem+json response with the members of :func:`problem_body` and ``headers``."""
    body = problem_body(status, code, detail, field=field, **extra)
    response = Response(json.dumps(body), status=status, mimetype=PROBLEM_JSON)
    response.headers.update(headers or {})
    return response


def problem_body(
    status: int, code: str, detail: str, *, field: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A problem document (RFC 9457): ``type`` (a tag URI naming ``code``), ``title``,
    ``status``, ``detail``, ``code`` and, when given, ``field`` and further members."""
    body: dict[str, Any] = {
        "type": f"tag:ncindex,2026:problem:{code}",
        "title": code.replace("_", " "),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if field is not None:
        body["field"] = field
    body.update(extra)
    return body


def _input(exc: InputError) -> Response:
    return problem(400, exc.code, exc.detail, field=exc.field)


_ANSWERED_401 = "ncindex_nextcloud_answered_401"
"""The ``flask.g`` attribute :func:`_unauthenticated` sets (:func:`answered_401`)."""


def _unauthenticated(exc: Exception) -> Response:
    if has_request_context() and refused_with_401(exc):
        setattr(g, _ANSWERED_401, True)
    # the offending part of the request is its credentials
    return problem(401, "unauthenticated", str(exc), field="Authorization", headers=BASIC_CHALLENGE)


def answered_401() -> bool:
    """Whether the current Flask request was answered 401 because Nextcloud answered the
    caller's credential 401 (:func:`~ncindex.errors.refused_with_401`), not for another
    refusal (a malformed header, a 404 or 403 of a proxy, an answer in no known shape, a
    disabled account's WebDAV 503): the search page's session hook forgets such a
    credential's app password instead of deleting it
    (``ncindex.web.session.UiSessions.refused``)."""
    return bool(g.get(_ANSWERED_401))


def _not_found(exc: Exception) -> Response:
    return problem(404, "not_found", "no such document, or you cannot read it", field="doc_id")


def _unavailable(exc: Exception) -> Response:
    """503: the store or Nextcloud failed (``backend_unavailable``), or the live model's files
    are missing or broken in this process (``model_unavailable``: after ``ncindex reindex``
    every search process needs the new model's folder). The detail is
    :func:`~ncindex.errors.public_reason`; the exception's text is logged."""
    log.warning("search_backend_unavailable", error=f"{type(exc).__name__}: {exc}")
    code = "model_unavailable" if isinstance(exc, ModelError) else "backend_unavailable"
    retry = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return problem(503, code, public_reason(exc), headers=retry)


#: The HTTP answer to each product exception a request can raise (:mod:`ncindex.errors`), the
#: one table of that translation; an exception is answered by its nearest class here.
PROBLEMS: dict[type[Exception], Callable[[Any], Response]] = {
    InputError: _input,  # 400 with the error's own code and field
    Unauthenticated: _unauthenticated,  # 401
    NextcloudAuthError: _unauthenticated,  # 401: the caller's credentials, refused
    DocumentNotFound: _not_found,  # 404
    ModelError: _unavailable,  # 503 model_unavailable
    TransientError: _unavailable,  # 503 backend_unavailable
}
#: The classes of :data:`PROBLEMS`, for an ``except`` clause.
TRANSLATED = tuple(PROBLEMS)


def validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> InputError:
    """One pydantic error of validating ``model`` as :class:`~ncindex.errors.InputError`: a key
    the body does not have is ``unknown_field``, a bad ``filter`` ``invalid_filter``, anything
    else ``invalid_value``. An unknown key is answered before any other error (a misspelt
    ``q`` is also why ``query`` is missing), and with ``model`` given, an unknown top-level key's
    detail names the keys ``model`` takes, so a caller (an LLM agent above all) can correct the
    name in one go; else the first error is answered. An empty list where at least one value
    is needed (``tags: []``, which an LLM sends for a filter it does not use) says to leave
    the key out."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = first["loc"]
    # the field name, then list indexes; union member tags ("int", "str") are dropped
    field = (
        "".join([str(loc[0]), *(f"[{p}]" for p in loc[1:] if isinstance(p, int))]) if loc else ""
    )
    detail = first["msg"]
    if first["type"] == "extra_forbidden":
        code = "unknown_field"
        if model is not None and len(loc) == 1:
            names = ", ".join(model.model_fields)
            detail = (
                f"not accepted here; expected one of: {names}" if names else "none is accepted here"
            )
    elif first["type"] == "too_short" and first["input"] == [] and len(loc) == 1:
        # an LLM sends [] for a list filter it does not use: "any of no values" matches nothing
        code = "invalid_value"
        detail = "an empty list matches nothing: give at least one value, or leave it out"
    elif loc and loc[0] == "filter":
        code = "invalid_filter"
    else:
        code = "invalid_value"
    # a validator's own ValueError reads "Value error, <its message>": the message is enough
    return InputError(code, field or "body", detail.removeprefix("Value error, "))


def problem_for(exc: Exception) -> Response:
    """The problem+json answer to ``exc`` from :data:`PROBLEMS`; re-raises ``exc`` when no
    class of it has an entry."""
    for cls in type(exc).__mro__:
        answer = PROBLEMS.get(cls)
        if answer is not None:
            return answer(exc)
    raise exc


class UnreadableBody(BadRequest):
    """Raised by :func:`read_body` for a body that could not be read whole: broken chunked
    framing, a client gone mid-body, fewer bytes than its Content-Length, or a Content-Length
    that is not a number of bytes. Answered 400 ``invalid_value`` with ``field`` (``body``, or
    ``Content-Length`` for the header)."""

    def __init__(self, description: str, field: str = "body") -> None:
        super().__init__(description)
        self.field = field


class BodyTooLarge(RequestEntityTooLarge):
    """Raised by :func:`read_body` for a body over its ``limit`` (bytes): answered 413
    ``payload_too_large`` on field ``body`` with the limit in the detail and as ``limit``
    (werkzeug's own 413 says only "The data value transmitted exceeds the capacity limit.",
    which leaves a caller to guess how much it may send)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body larger than {limit} bytes, the most accepted here")
        self.limit = limit


#: Largest accepted body of a search, RCP or MCP request, bytes (a search is a few hundred).
MAX_BODY_BYTES = 64 * 1024


def read_body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes; raises :class:`BodyTooLarge` (413) past
    it, whether or not the client sent a Content-Length (a chunked upload is counted as read,
    never silently cut at the limit), and :class:`UnreadableBody` (400) when it cannot be read
    whole.

    Any exception of the read itself is :class:`UnreadableBody`: the server's own errors
    (gunicorn's ``InvalidChunkSize``, ``NoMoreData``…, werkzeug's ``ClientDisconnected``) are
    not named, so no server is imported here. A body shorter than its Content-Length (the
    client half-closed; gunicorn answers a short read at EOF, not an error) is one too.

    With a Content-Length the read asks for that many bytes (+1), not ``limit`` + 1: werkzeug's
    length-limited stream allocates a buffer of the size asked for, a megabyte per request."""
    declared = request.headers.get("Content-Length")
    if declared is not None and not (declared.isascii() and declared.strip().isdigit()):
        # werkzeug reads such a header as 0 (gunicorn refuses it before the app)
        raise UnreadableBody("Content-Length must be a whole number of bytes", "Content-Length")
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLarge(limit)
    try:
        body = request.stream.read((limit if length is None else length) + 1)
    except RequestEntityTooLarge:
        raise
    except Exception as exc:  # whatever the server raises for a broken body
        raise UnreadableBody(f"request body could not be read: {type(exc).__name__}") from exc
    if len(body) > limit:
        raise BodyTooLarge(limit)
    if length is not None and len(body) < length:
        raise UnreadableBody(f"request body ended after {len(body)} of {length} bytes")
    return body


def http_problem(exc: HTTPException) -> Response:
    """A werkzeug HTTP error as problem+json: its status, the ``code`` for it and ``field``
    (an :class:`UnreadableBody`'s; ``body`` for a 413 or 415) and, for a
    :class:`BodyTooLarge`, its ``limit`` in bytes, with the error's own headers."""
    status = exc.code or 500
    field = (
        exc.field if isinstance(exc, UnreadableBody) else "body" if status in (413, 415) else None
    )
    # the error's own headers (a 405's Allow, RFC 9110 §15.5.6; a 429's Retry-After)
    headers = {k: v for k, v in exc.get_headers() if k.lower() != "content-type"}
    extra = {"limit": exc.limit} if isinstance(exc, BodyTooLarge) else {}
    return problem(
        status,
        _CODES.get(status, "invalid_value"),
        exc.description or "",
        field=field,
        headers=headers,
        **extra,
    )


def install_error_handlers(app: Flask) -> None:
    """Answer every werkzeug HTTP error, and any unexpected exception, as problem+json."""
    app.register_error_handler(HTTPException, http_problem)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        app.logger.exception("unhandled error")
        return problem(500, "internal_error", "internal error")
