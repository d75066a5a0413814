"""Route tables as Nextcloud's router matches them, to tell a path no route has from a method no
route of the path has.

nextcloud/server ``lib/private/Route/Router.php`` ``findMatchingRoute`` hands the path to
Symfony's ``UrlMatcher``, which throws ``ResourceNotFoundException`` when no route has the path
and ``MethodNotAllowedException`` when routes have it but none with the request's method (a
``HEAD`` is matched as a ``GET``). Each entry point answers the second before any controller
runs: ``ocs/v1.php`` (:func:`ncindex.simulator.ocs.method_not_allowed`) and ``lib/base.php``
``OC::handleRequest`` for ``index.php`` (``http_response_code(405)``, no body).

A route is ``(verb, url, requirements)`` as an app's ``appinfo/routes.php`` lists it: ``url``
relative to the app's prefix, each ``{name}`` a parameter matching its requirement (a regular
expression) or, without one, ``[^/]+`` (Symfony ``RouteCompiler``'s default for a parameter
followed by ``/`` or the end).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["Route", "Routes"]

#: ``(verb, url, requirements)`` of one route (see the module docstring).
Route = tuple[str, str, Mapping[str, str]]
_PARAMETER = re.compile(r"\{(\w+)\}")


def _compile(url: str, requirements: Mapping[str, str]) -> re.Pattern[str]:
    parts: list[str] = []
    last = 0
    for m in _PARAMETER.finditer(url):
        parts.append(re.escape(url[last : m.start()]))
        parts.append(f"(?:{requirements.get(m.group(1), '[^/]+')})")
        last = m.end()
    parts.append(re.escape(url[last:]))
    return re.compile("".join(parts))


class Routes:
    """The routes of one app (or the OCS routes) the simulator knows, each compiled once."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self._routes = [
            (verb.upper(), _compile(url, requirements)) for verb, url, requirements in routes
        ]

    def methods(self, path: str) -> frozenset[str] | None:
        """The methods of the routes whose url matches ``path`` (relative to the app's
        prefix), ``HEAD`` with ``GET``; None when none does (``ResourceNotFoundException``)."""
        verbs = {verb for verb, pattern in self._routes if pattern.fullmatch(path)}
        if not verbs:
            return None
        return frozenset(verbs | {"HEAD"} if "GET" in verbs else verbs)

    def refuses(self, method: str, path: str) -> bool:
        """Whether Symfony's matcher throws ``MethodNotAllowedException`` for ``method`` on
        ``path``: routes have the path, none the method."""
        methods = self.methods(path)
        return methods is not None and method.upper() not in methods
