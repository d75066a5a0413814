"""One WSGI app for the receiver, the search API and the MCP server on one port (``ncindex
up``, the evaluation harness): ``/hooks/…`` to the receiver, ``/mcp`` to the MCP server,
everything else to the search API.

werkzeug's ``DispatcherMiddleware`` mounts an app under a prefix and strips it from
``PATH_INFO``; the receiver's routes name the whole path (``/hooks/nextcloud``), so the path is
passed on unchanged here.

The MCP server is ASGI, so ``ncindex up`` serves it with uvicorn on a loopback port of its own
and :func:`forward_to` relays ``/mcp`` requests to it: method, path, query, body (a chunked
one too, with a Content-Length of its own) and headers (``Host`` included, for its
DNS-rebinding check; the client address and scheme in ``X-Forwarded-For`` and
``X-Forwarded-Proto``, replacing the client's own, for the per-address rate limit: the MCP
server trusts this one hop, ``create_app(proxy_hops=1)``). Header values are relayed without
the whitespace around them, which is no part of a field value (RFC 9110 §5.5) but which
werkzeug's server keeps and the relay's HTTP client refuses to send. Its transport answers
JSON, never an open event stream, so a buffered relay suffices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import httpx
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request

from ncindex.web.problems import MAX_BODY_BYTES, http_problem, problem, read_body

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

MCP_PATH = "/mcp"
RELAY_TIMEOUT = httpx.Timeout(10.0, read=300.0)
"""Timeouts of a relayed request, seconds (reading: a search may queue behind others)."""
# RFC 9110 §7.6.1: connection-specific fields are not forwarded (those it names, and the
# fields the Connection header lists: _connection_named); Content-Length is the relay's own
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "content-length"}
)  # fmt: skip
# Answer fields the relay's own server writes itself (werkzeug's ``send_response`` sends
# ``Server`` and ``Date`` whatever the app gave): relayed, the answer carried two of each
_SERVER_WRITES = frozenset({"server", "date"})


# RFC 9110 §5.1: a field name is a token
_FIELD_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# What a field value cannot carry on the way out: NUL, CR and LF (RFC 9110 §5.5: reject or
# replace), and VT and FF, which h11 (the relay's HTTP client) refuses as whitespace
_UNSENDABLE = re.compile(r"[\x00\n\r\x0b\x0c]")


def dispatch(receiver: WSGIApp, search: WSGIApp, mcp: WSGIApp | None = None) -> WSGIApp:
    """One WSGI app: ``/hooks/…`` to the receiver, ``/mcp`` to ``mcp`` (when given),
    everything else to the search API. ``/mcp/`` (an MCP client configured with a trailing
    slash) goes to ``mcp`` as ``/mcp``: the MCP server alone redirects it there (Starlette's
    ``redirect_slashes``), which through the relay would name the MCP server's own loopback
    address."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/hooks/"):
            return receiver(environ, start_response)
        if mcp is not None and path in (MCP_PATH, MCP_PATH + "/"):
            environ["PATH_INFO"] = MCP_PATH
            return mcp(environ, start_response)
        return search(environ, start_response)

    return app


def forward_to(base_url: str, client: httpx.Client | None = None) -> WSGIApp:
    """A WSGI app relaying each request to the same path under ``base_url`` and its answer
    back (status, end-to-end headers but ``Server`` and ``Date``, which its own server
    writes, body). Header values lose the whitespace around them and
    are relayed as the bytes that came (latin-1, as WSGI gives them); a header that cannot be
    sent on — a name that is not a token, a value holding NUL, CR, LF, VT or FF — is a 400
    problem+json (``invalid_http``, field the header's name). The body is read as the search
    API reads its own (:func:`~ncindex.web.problems.read_body`, with or without a
    Content-Length, at most ``MAX_BODY_BYTES``): one it cannot read is a 400 problem+json
    (``invalid_value``, field ``Content-Length`` or ``body``), a larger one a 413
    (``payload_too_large``). A relay failure is a 502 problem+json (``backend_unavailable``)."""
    http = client or httpx.Client(timeout=RELAY_TIMEOUT)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        dropped = _HOP_BY_HOP | _connection_named(environ.get("HTTP_CONNECTION", ""))
        headers = {
            key[5:].replace("_", "-").title(): value.strip(" \t")
            for key, value in environ.items()
            if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in dropped
        }
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"].strip(" \t")
        headers["X-Forwarded-For"] = environ.get("REMOTE_ADDR") or "127.0.0.1"
        headers["X-Forwarded-Proto"] = environ.get("wsgi.url_scheme") or "http"
        try:
            body = read_body(Request(environ), MAX_BODY_BYTES)
        except HTTPException as exc:  # UnreadableBody (400), RequestEntityTooLarge (413)
            return http_problem(exc)(environ, start_response)
        for name, value in headers.items():
            if not _FIELD_NAME.fullmatch(name) or _UNSENDABLE.search(value):
                # the HTTP client would refuse to send it (h11: "Illegal header value"),
                # which read as the MCP server not answering, 502
                refused = problem(400, "invalid_http", "not a valid HTTP header", field=name)
                return refused(environ, start_response)
        # bytes: httpx encodes a str value as ASCII, and a non-ASCII one (obs-text) raised
        sent = {name: value.encode("latin-1") for name, value in headers.items()}
        url = base_url + environ.get("PATH_INFO", "")
        if environ.get("QUERY_STRING"):
            url += "?" + environ["QUERY_STRING"]
        try:
            answer = http.request(environ["REQUEST_METHOD"], url, headers=sent, content=body)
        except httpx.HTTPError:
            failed = problem(502, "backend_unavailable", "the MCP server did not answer")
            return failed(environ, start_response)
        # httpx decoded the body, so its Content-Encoding no longer applies
        dropped = _HOP_BY_HOP | _SERVER_WRITES | {"content-encoding"}
        dropped |= _connection_named(answer.headers.get("Connection", ""))
        kept = [(k, v) for k, v in answer.headers.items() if k.lower() not in dropped]
        content = answer.content
        kept.append(("Content-Length", str(len(content))))
        start_response(f"{answer.status_code} {answer.reason_phrase}", kept)
        return [content]

    return app


def _connection_named(connection: str) -> frozenset[str]:
    """The field names a ``Connection`` header value lists, lower case (RFC 9110 §7.6.1:
    a proxy removes them along with ``Connection`` itself)."""
    return frozenset(name.strip().lower() for name in connection.split(",") if name.strip())
