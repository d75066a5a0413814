"""``POST /rcp/<method>``: the RCP/1 server over HTTP (see :mod:`ncindex.search.rcp`)."""

from __future__ import annotations

import json
import math
from typing import Any

import structlog
from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException

from ncindex import strict_json
from ncindex.search.rcp import OPEN_METHODS, SESSION_HEADER, RcpServer, answerable_id
from ncindex.web.problems import MAX_BODY_BYTES, BodyTooLarge, UnreadableBody, read_body
from ncindex.web.ratelimit import mark_refused
from search_api.search import Decorator

log = structlog.get_logger(__name__)

METHOD_PATTERN = r"^[^/][^\n]*$"
"""The ``<method>`` of ``/rcp/<method>`` the router takes, as the OpenAPI document states it:
werkzeug's ``path`` converter (``PathConverter.regex``, ``[^/].*?``) takes any text but a
leading ``/``, and its ``.`` no newline; any other path under ``/rcp/`` is a 404
``not_found`` problem, not a JSON-RPC answer."""


def rpc_error_response(
    status: int, code: int, message: str, data: Any = None, *, id_: str | float | None = None
) -> Response:
    """A JSON-RPC error with HTTP ``status`` — for failures the JSON-RPC layer never saw
    (body too large, rate limited); ``id_`` the request's id where it could be read, else
    null (JSON-RPC 2.0 §5)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": id_, "error": error}
    return Response(json.dumps(body), status=status, mimetype="application/json")


def _finite(value: Any) -> Any:
    """``value`` (JSON data: dicts, lists, scalars) with every NaN and ±Infinity replaced by
    ``0.0``. Spec §4.6: NaN and Infinity "are NOT valid JSON and MUST NOT be emitted; a server
    that would produce them MUST substitute a finite sentinel or omit the field" (a hit's
    ``score`` cannot be omitted); ``0.0`` is the sentinel the RCP SDK's server substitutes."""
    if isinstance(value, float):
        return value if math.isfinite(value) else 0.0
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def request_id(body: bytes) -> str | int | float | None:
    """The ``id`` of a single JSON-RPC request ``body`` when an answer can carry it, as
    :class:`~ncindex.search.rcp.RcpServer` would echo it (:func:`~ncindex.search.rcp.answerable_id`:
    a number, or a string without a lone surrogate), else ``None`` (not strict JSON, a batch,
    no id, or an id of another type)."""
    try:
        message = strict_json.loads(body)
    except (ValueError, RecursionError):
        return None
    return answerable_id(message.get("id")) if isinstance(message, dict) else None


def rcp_blueprint(server: RcpServer, limited: Decorator | None = None) -> Blueprint:
    """Blueprint with ``POST /rcp/<method>`` (methods may contain ``/``). ``limited`` wraps
    the view: the whole HTTP request counts once, a batch included (a batch is capped at
    :data:`ncindex.search.rcp.MAX_BATCH` messages). ``/rcp/info`` and ``/rcp/ping``
    (:data:`~ncindex.search.rcp.OPEN_METHODS`) are served outside it: a liveness check must
    neither use up a caller's search budget nor be refused for it, and a message there can
    run nothing else (a method that does not match the path is -32600). A query parameter is
    HTTP 400 with -32600 naming it in ``data.field`` (the params are the body's alone). A
    request whose credential was refused (:attr:`~ncindex.search.rcp.HttpAnswer.refused`: a
    single message's HTTP 401, or a batch's 200 whose messages were answered -32012) counts
    once against the per-address limit of refused credentials
    (:func:`~ncindex.web.ratelimit.mark_refused`), which refuses the next request from an
    address over it, a batch too, with HTTP 429, -32011 and ``Retry-After``."""
    bp = Blueprint("rcp", __name__)
    limit = limited or (lambda f: f)

    def call(method: str) -> Response:
        body = read_body(request, MAX_BODY_BYTES)
        for name in request.args:  # a ?k=3 beside the body's params would be ignored silently
            detail = f"{name!r} is not a query parameter: RCP reads its params from the body"
            return rpc_error_response(400, -32600, detail, {"field": name}, id_=request_id(body))
        answer = server.handle_http(
            method, body, request.headers.get("Authorization"), request.headers.get(SESSION_HEADER)
        )
        if answer.refused:  # a batch's refusal is HTTP 200: counted per address all the same
            mark_refused()
        if answer.body is None:
            return Response(status=204)
        try:
            text = json.dumps(answer.body, allow_nan=False)
        except ValueError:  # a non-finite number in a result: a bug, logged, answered finite
            log.exception("rcp_reply_not_finite", method=method)
            text = json.dumps(_finite(answer.body), allow_nan=False)
        return Response(
            text, status=answer.status, mimetype="application/json", headers=answer.headers
        )

    @bp.post(f"/rcp/<any({', '.join(OPEN_METHODS)}):method>")
    def open_call(method: str) -> Response:
        return call(method)

    @bp.post("/rcp/<path:method>")
    @limit
    def limited_call(method: str) -> Response:
        return call(method)

    @bp.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        # a body past MAX_BODY_BYTES is -32013 PayloadTooLarge, whose spec §12 row names
        # "body bytes"; data names the body and the limit (spec §12.1: field, detail, and
        # further members to disambiguate), as the REST 413's field and limit do; a body that
        # cannot be read whole (UnreadableBody) is -32600 naming its field, as REST's 400 does
        status = exc.code or 500
        code = {413: -32013, 429: -32011}.get(status, -32600)
        data: dict[str, Any] | None = None
        if isinstance(exc, BodyTooLarge):
            data = {"field": "body", "limit": exc.limit}
        elif isinstance(exc, UnreadableBody):
            data = {"field": exc.field}
        return rpc_error_response(status, code, exc.description or exc.name, data)

    return bp
