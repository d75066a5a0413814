"""The client address behind trusted reverse proxies (``settings.trusted_proxy_hops``).

gunicorn and uvicorn-behind-gunicorn give an app the address of the peer that opened the
connection: behind an ingress or any other proxy that is the proxy's, so every anonymous
caller would share one per-address rate-limit bucket (:mod:`ncindex.web.ratelimit`). Each proxy
appends the address it received the request from to ``X-Forwarded-For``; with ``hops``
trusted proxies the client is the ``hops``-th value from the right — values further left were
written by the client and are not trusted. This is werkzeug's ``ProxyFix`` rule
(``werkzeug/middleware/proxy_fix.py``, ``ProxyFix._get_real_value``), used as it is for the
Flask apps (:func:`trusted_wsgi`) and applied by :class:`TrustedProxies` to the ASGI MCP server.
``hops`` 0 trusts no header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from werkzeug.middleware.proxy_fix import ProxyFix

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def forwarded_value(header: str | None, hops: int) -> str | None:
    """The ``hops``-th comma-separated value from the right of a forwarded ``header``
    (``X-Forwarded-For``: ``"client, proxy1"``), stripped; ``None`` when ``hops`` is 0, the
    header is missing or it holds fewer than ``hops`` values (a request that did not pass
    through every trusted proxy: its header is the client's own)."""
    if hops < 1 or not header:
        return None
    values = [value.strip() for value in header.split(",")]
    if len(values) < hops:
        return None
    return values[-hops] or None


def trusted_wsgi(app: WSGIApp, hops: int) -> WSGIApp:
    """``app`` with ``REMOTE_ADDR`` and ``wsgi.url_scheme`` taken from ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` as ``hops`` trusted proxies wrote them (werkzeug's ``ProxyFix``;
    the original values stay in ``environ["werkzeug.proxy_fix.orig"]``); ``app`` itself when
    ``hops`` is 0."""
    if hops < 1:
        return app
    return ProxyFix(app, x_for=hops, x_proto=hops)  # Host, port and prefix stay the request's


class TrustedProxies:
    """ASGI middleware: an HTTP request's client address (``scope["client"]``, which
    Starlette's ``Request.client`` reads) and scheme from ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` as ``hops`` trusted proxies wrote them (:func:`forwarded_value`); a
    request whose headers did not pass through them keeps its own. For the MCP server,
    whatever serves it; the only reading of these headers there: uvicorn's own (which took
    ``X-Forwarded-For`` from any loopback peer) is off (``forwarded_allow_ips`` empty in
    ``deploy/gunicorn.conf.py``, ``proxy_headers=False`` in :mod:`ncindex.web.asgi`)."""

    def __init__(self, app: ASGIApp, hops: int) -> None:
        self.app = app
        self.hops = hops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hops > 0:
            client = forwarded_value(_joined(scope, b"x-forwarded-for"), self.hops)
            proto = forwarded_value(_joined(scope, b"x-forwarded-proto"), self.hops)
            scope = dict(scope)
            if client:
                scope["client"] = (client, 0)
            if proto in ("http", "https"):
                scope["scheme"] = proto
        await self.app(scope, receive, send)


def _joined(scope: Scope, name: bytes) -> str | None:
    """All values of header ``name`` (lower case) in ``scope``, joined by commas as one field
    (RFC 9110 §5.3), or ``None`` when it is absent."""
    values = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == name]
    return ",".join(values) if values else None
