"""CORS for the MCP endpoint, so that a browser-based MCP client (an inspector, a web app) on an
allowed origin can call ``/mcp`` across origins.

A browser sends the transport's requests (``Authorization``, ``Content-Type:
application/json``, ``Mcp-Protocol-Version``) only after a preflight ``OPTIONS`` it approves,
and lets the page read an answer only when it carries ``Access-Control-Allow-Origin``; the
``Mcp-Session-Id`` the transport answers must be exposed to be read (MCP Streamable HTTP
transport, "Session Management"; the MCP Python SDK's README, "CORS configuration for
browser-based clients", does it with Starlette's ``CORSMiddleware``, as here).

:class:`Cors` answers for the origins of ``settings.mcp_allowed_origins`` only (an entry
``scheme://name:*`` allows ``name`` with any port or none, as the transport's Origin check
reads it after :func:`mcp_server.app.with_portless`), each by name: never ``*``, and never
with credentials (the client sends its Nextcloud credentials in ``Authorization``, not in
cookies). An allowed origin's preflight is answered 200 with :data:`METHODS` and
:data:`HEADERS`, or 400 problem+json naming the request header that asked for another method
or header; its other requests go on to the gate with the CORS answer headers added. A request
from any other origin goes on without them, and its preflight is 403 problem+json
``origin_not_allowed`` (field ``Origin``), as its ``POST`` is.
"""

from __future__ import annotations

import re

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_server.problems import problem

METHODS = ("GET", "POST", "DELETE")
"""The methods of the Streamable HTTP transport (the server answers GET and DELETE 405: it is
stateless; allowed here so that a browser client reads that answer instead of a failed
preflight)."""
HEADERS = ("Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version",
           "Last-Event-ID")  # fmt: skip
"""The request headers a client of the transport sends."""
EXPOSED = ("Mcp-Session-Id", "WWW-Authenticate", "Retry-After")
"""Answer headers a browser client may read: the session, the 401's challenge, the 429's wait."""
ORIGIN_REFUSED = "requests from that Origin are not accepted (NCINDEX_MCP_ALLOWED_ORIGINS)"
"""The detail of a refused ``Origin`` (403 ``origin_not_allowed``), the preflight's and the
gate's."""
MAX_AGE_SECONDS = 600
"""How long a browser may keep a preflight's answer, seconds."""


def origin_pattern(allowed: list[str]) -> str:
    """A regular expression (for ``re.fullmatch``) matching the ``Origin`` values of
    ``allowed``: each entry as written, and for ``scheme://name:*`` also ``scheme://name`` with
    any port or none. ``*`` alone matches only ``*``, as in the transport's check."""
    parts = [
        re.escape(entry.removesuffix(":*")) + r"(?::[0-9]+)?"
        if entry.endswith(":*")
        else re.escape(entry)
        for entry in allowed
    ]
    return "|".join(parts) or r"(?!)"


class Cors:
    """ASGI wrapper of the MCP endpoint ``app`` answering CORS for ``allowed_origins`` (see
    the module docstring)."""

    def __init__(self, app: ASGIApp, allowed_origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origin_regex=origin_pattern(allowed_origins),
            allow_methods=METHODS,
            allow_headers=HEADERS,
            expose_headers=EXPOSED,
            # an origin the operator allowed may be a public site calling a private address
            # (Chrome's Private Network Access preflight)
            allow_private_network=True,
            max_age=MAX_AGE_SECONDS,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        preflight = scope["method"] == "OPTIONS" and "access-control-request-method" in headers
        if origin is None:
            await self.app(scope, receive, send)
        elif not self.cors.is_allowed_origin(origin):
            if preflight:
                refused = problem(403, "origin_not_allowed", ORIGIN_REFUSED, field="Origin")
                await refused(scope, receive, send)
            else:  # no CORS headers; the gate refuses it 403 while the Origin check is on
                await self.app(scope, receive, send)
        elif preflight:
            answer = self.cors.preflight_response(request_headers=headers)
            if answer.status_code != 200:  # Starlette says why in plain text
                method = headers["access-control-request-method"]
                field = (
                    "Access-Control-Request-Method"
                    if method not in METHODS
                    else "Access-Control-Request-Headers"
                )
                detail = (
                    f"the MCP endpoint takes the methods {', '.join(METHODS)} and the headers "
                    f"{', '.join(HEADERS)}"
                )
                refused = problem(400, "invalid_value", detail, field=field)
                refused.headers.update(
                    {k: v for k, v in answer.headers.items() if k.startswith("access-control-")}
                )
                answer = refused
            await answer(scope, receive, send)
        else:
            await self.cors(scope, receive, send)
