"""One WSGI app for the receiver and the search API on one port (``ncindex up``, the
evaluation harness): ``/hooks/…`` to the receiver, everything else to the search API.

werkzeug's ``DispatcherMiddleware`` mounts an app under a prefix and strips it from
``PATH_INFO``; the receiver's routes name the whole path (``/hooks/nextcloud``), so the path is
passed on unchanged here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def dispatch(receiver: WSGIApp, search: WSGIApp) -> WSGIApp:
    """One WSGI app: ``/hooks/…`` to the receiver, everything else to the search API."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = receiver if environ.get("PATH_INFO", "").startswith("/hooks/") else search
        return target(environ, start_response)

    return app
