"""``GET /v1/folders``, ``GET /v1/tags``, ``GET /v1/categories`` and ``GET /v1/owners``: the
filter values of the caller's documents, only the caller's (:mod:`ncindex.search.facets`), the
values a search's ``path_prefixes``, ``tags``, ``category`` and an ``owner`` filter take (and
the listings a search's ``hints`` name: ``ncindex.search.filters.HTTP_LISTINGS``). The folders
are held to the caller's files as they are now (a ``PROPFIND`` of the root and a SEARCH of its
folders, :func:`~ncindex.search.facets.visible_folders`), the tags to the tags the caller can
see now (a ``PROPFIND`` of the system tags, :func:`~ncindex.search.facets.visible_tags`); the
note categories and the owners are the index's (:func:`~ncindex.search.facets.listed_categories`,
:func:`~ncindex.search.facets.listed_owners`: the owners of the documents the caller can read
alone, whom Nextcloud names to the caller on each of them).

All are paged with ``offset`` (default 0) and ``limit`` (1–1000, default 200:
:data:`~ncindex.search.facets.MAX_PAGE`, :data:`~ncindex.search.facets.DEFAULT_PAGE`) and answer
``{"folders"|"tags"|"categories"|"owners": [...], "total": n, "next_offset": n | null}``; 400
``invalid_value`` for a bad ``offset``/``limit``, ``unknown_field`` for another query
parameter, 401 ``unauthenticated`` (also when Nextcloud refuses the caller's credential during
the folders' or tags' check: revoked since it was cached, which drops it from the cache, as a
search does), 503 ``backend_unavailable``. A credential taken from the credential cache is
confirmed with Nextcloud when the listing asked it nothing (the categories and owners:
:meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`), so one revoked since is refused
at once rather than for the rest of ``user_cache_seconds``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, jsonify, request

from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services
from ncindex.search.facets import (
    DEFAULT_PAGE,
    MAX_OFFSET,
    MAX_PAGE,
    facet_page,
    listed_categories,
    listed_folders,
    listed_owners,
    listed_tags,
)
from ncindex.store.port import VectorStore
from ncindex.web.auth import normalized_authorization, resolve_caller
from ncindex.web.problems import TRANSLATED
from search_api.search import Decorator, int_args, refused_answer

LISTS: tuple[tuple[str, Callable[[VectorStore, NextcloudClient], list[str]]], ...] = (
    ("folders", listed_folders),
    ("tags", listed_tags),
    ("categories", listed_categories),
    ("owners", listed_owners),
)
"""Each listing's name (its path ``/v1/{name}`` and its page's key) and how it is read."""


def facets_blueprint(
    services: Services, store: Callable[[], VectorStore], limited: Decorator | None = None
) -> Blueprint:
    """Blueprint with ``GET /v1/folders``, ``GET /v1/tags``, ``GET /v1/categories`` and
    ``GET /v1/owners``; ``store()`` is the live model's store; ``limited`` wraps them in the
    caller's rate limit."""
    bp = Blueprint("facets", __name__)
    limit = limited or (lambda f: f)

    def page(name: str, read: Callable[[VectorStore, NextcloudClient], list[str]]) -> Response:
        try:
            # no usable credentials: 401 before the parameters are judged
            normalized_authorization(request.headers.get("Authorization"))
            args = int_args(offset=(0, 0, MAX_OFFSET), limit=(DEFAULT_PAGE, 1, MAX_PAGE))
            client = resolve_caller(services, request.headers.get("Authorization"))
            values = read(store(), client)
            client.confirm()  # owners, categories: from the index alone, so asked now
        except TRANSLATED as exc:
            return refused_answer(services, exc)
        return jsonify(facet_page(name, values, args["offset"], args["limit"]))

    def view(name: str, read: Callable[[VectorStore, NextcloudClient], list[str]]) -> Any:
        def listing() -> Response:
            return page(name, read)

        # named per list: the rate limiter keeps a view's limits under its name
        listing.__name__ = listing.__qualname__ = name
        return listing

    for name, read in LISTS:
        bp.add_url_rule(f"/v1/{name}", name, limit(view(name, read)), methods=["GET"])

    return bp
