"""``GET /v1/folders`` and ``GET /v1/tags``: the filter values the search page offers, only
the caller's (:mod:`ncindex.search.facets`); the folders held to the caller's files as they
are now (a ``PROPFIND`` of the root and a SEARCH of its folders,
:func:`~ncindex.search.facets.visible_folders`), the tags to the tags the caller can see now
(a ``PROPFIND`` of the system tags, :func:`~ncindex.search.facets.visible_tags`).

Both are paged with ``offset`` (default 0) and ``limit`` (1–1000, default 200:
:data:`~ncindex.search.facets.MAX_PAGE`, :data:`~ncindex.search.facets.DEFAULT_PAGE`) and answer
``{"folders"|"tags": [...], "total": n, "next_offset": n | null}``; 400 ``invalid_value``
for a bad ``offset``/``limit``, ``unknown_field`` for another query parameter, 401
``unauthenticated``, 503 ``backend_unavailable``.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, jsonify, request

from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services
from ncindex.search.facets import (
    DEFAULT_PAGE,
    MAX_OFFSET,
    MAX_PAGE,
    facet_page,
    listed_folders,
    listed_tags,
)
from ncindex.store.port import VectorStore
from ncindex.web.auth import normalized_authorization, resolve_caller
from ncindex.web.problems import TRANSLATED, problem_for
from search_api.search import Decorator, int_args


def facets_blueprint(
    services: Services, store: Callable[[], VectorStore], limited: Decorator | None = None
) -> Blueprint:
    """Blueprint with ``GET /v1/folders`` and ``GET /v1/tags``; ``store()`` is the live
    model's store; ``limited`` wraps them in the caller's rate limit."""
    bp = Blueprint("facets", __name__)
    limit = limited or (lambda f: f)

    def page(name: str, read: Callable[[VectorStore, NextcloudClient], list[str]]) -> Response:
        try:
            # no usable credentials: 401 before the parameters are judged
            normalized_authorization(request.headers.get("Authorization"))
            args = int_args(offset=(0, 0, MAX_OFFSET), limit=(DEFAULT_PAGE, 1, MAX_PAGE))
            client = resolve_caller(services, request.headers.get("Authorization"))
            values = read(store(), client)
        except TRANSLATED as exc:
            return problem_for(exc)
        return jsonify(facet_page(name, values, args["offset"], args["limit"]))

    @bp.get("/v1/folders")
    @limit
    def folders() -> Response:
        return page("folders", listed_folders)

    @bp.get("/v1/tags")
    @limit
    def tags() -> Response:
        return page("tags", listed_tags)

    return bp
