"""``GET /v1/status``: the index as it concerns the caller (issue 25).

The caller is authenticated as for a search (:func:`ncindex.web.auth.resolve_caller`) and the
request counts against the same per-caller rate limit. The body is
:class:`ncindex.sync.user_status.UserStatus` for the caller's own user id only. Errors are
problem+json: 400 ``unknown_field`` (it takes no query parameter), 401 ``unauthenticated``
(also for a credential taken from the credential cache that Nextcloud refuses when asked —
the counts come from Redis alone, so it is asked:
:meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`; the refusal drops it from the cache),
429 ``rate_limited``, 503 ``backend_unavailable`` (Redis, the store or Nextcloud cannot be
asked).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from ncindex.runtime import Services
from ncindex.sync.user_status import user_status
from ncindex.web.auth import normalized_authorization, resolve_caller
from ncindex.web.problems import TRANSLATED
from search_api.search import Decorator, int_args, refused_answer


def status_blueprint(services: Services, limited: Decorator | None = None) -> Blueprint:
    """Blueprint with ``GET /v1/status``; ``limited`` is the per-caller rate limit."""
    bp = Blueprint("status", __name__)
    limit = limited or (lambda f: f)

    @bp.get("/v1/status")
    @limit
    def status() -> Response | tuple[Response, int]:
        try:
            normalized_authorization(request.headers.get("Authorization"))  # 401 first
            int_args()  # it takes none
            client = resolve_caller(services, request.headers.get("Authorization"))
            assert client.user is not None
            body = user_status(services, client.user)
            client.confirm()  # read from Redis alone: a cached credential is asked about now
        except TRANSLATED as exc:
            return refused_answer(services, exc)
        return jsonify(body)

    return bp
