"""One WSGI app for the receiver, the search API and the MCP server on one port (``ncindex
up``, the evaluation harness): ``/hooks/…`` to the receiver, ``/mcp`` to the MCP server,
everything else to the search API.

werkzeug's ``DispatcherMiddleware`` mounts an app under a prefix and strips it from
``PATH_INFO``; the receiver's routes name the whole path (``/hooks/nextcloud``), so the path is
passed on unchanged here.

The MCP server is ASGI, so ``ncindex up`` serves it with uvicorn on a loopback port of its own
and :func:`forward_to` relays ``/mcp`` requests to it: method, path, query, body (a chunked
one too, with a Content-Length of its own) and headers (``Host`` included, for its
DNS-rebinding check; the client address in ``X-Forwarded-For``, which uvicorn trusts from
127.0.0.1, for the per-address rate limit). Its transport answers JSON, never an open event
stream, so a buffered relay suffices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import httpx
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request

from ncindex.web.problems import MAX_BODY_BYTES, http_problem, read_body

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

MCP_PATH = "/mcp"
RELAY_TIMEOUT = httpx.Timeout(10.0, read=300.0)
"""Timeouts of a relayed request, seconds (reading: a search may queue behind others)."""
# RFC 9110 §7.6.1: connection-specific fields are not forwarded
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "content-length"}
)  # fmt: skip


def dispatch(receiver: WSGIApp, search: WSGIApp, mcp: WSGIApp | None = None) -> WSGIApp:
    """One WSGI app: ``/hooks/…`` to the receiver, ``/mcp`` to ``mcp`` (when given),
    everything else to the search API."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/hooks/"):
            return receiver(environ, start_response)
        if mcp is not None and path == MCP_PATH:
            return mcp(environ, start_response)
        return search(environ, start_response)

    return app


def forward_to(base_url: str, client: httpx.Client | None = None) -> WSGIApp:
    """A WSGI app relaying each request to the same path under ``base_url`` and its answer
    back (status, end-to-end headers, body). The body is read as the search API reads its
    own (:func:`~ncindex.web.problems.read_body`, with or without a Content-Length, at most
    ``MAX_BODY_BYTES``): one it cannot read is a 400 problem+json (``invalid_value``, field
    ``Content-Length`` or ``body``), a larger one a 413 (``payload_too_large``). A relay failure
    is a 502 problem+json (``backend_unavailable``)."""
    http = client or httpx.Client(timeout=RELAY_TIMEOUT)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        headers = {
            key[5:].replace("_", "-").title(): value
            for key, value in environ.items()
            if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in _HOP_BY_HOP
        }
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        headers["X-Forwarded-For"] = environ.get("REMOTE_ADDR") or "127.0.0.1"
        try:
            body = read_body(Request(environ), MAX_BODY_BYTES)
        except HTTPException as exc:  # UnreadableBody (400), RequestEntityTooLarge (413)
            return http_problem(exc)(environ, start_response)
        url = base_url + environ.get("PATH_INFO", "")
        if environ.get("QUERY_STRING"):
            url += "?" + environ["QUERY_STRING"]
        try:
            answer = http.request(environ["REQUEST_METHOD"], url, headers=headers, content=body)
        except httpx.HTTPError:
            start_response("502 Bad Gateway", [("Content-Type", "application/problem+json")])
            return [
                b'{"type":"tag:ncindex,2026:problem:backend_unavailable","title":"backend '
                b'unavailable","status":502,"detail":"the MCP server did not answer",'
                b'"code":"backend_unavailable"}'
            ]
        # httpx decoded the body, so its Content-Encoding no longer applies
        kept = [
            (k, v)
            for k, v in answer.headers.items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-encoding"
        ]
        content = answer.content
        kept.append(("Content-Length", str(len(content))))
        start_response(f"{answer.status_code} {answer.reason_phrase}", kept)
        return [content]

    return app
