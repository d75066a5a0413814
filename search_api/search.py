"""``POST /v1/search``: parse, authenticate, search, report (DESIGN §9).

Errors are RFC 9457 problem+json: 400 ``invalid_value``/``invalid_json`` with the ``field``,
401 ``unauthenticated``, 503 ``backend_unavailable`` — never a 500 for bad input.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from flask import Blueprint, Response, jsonify, request
from pydantic import ValidationError

from ncindex.auth import Unauthenticated, resolve_caller
from ncindex.errors import NextcloudUnavailable, StoreUnavailable
from ncindex.problems import problem
from ncindex.runtime import Services
from ncindex.search import SearchRequest, SearchService
from ncindex.telemetry import SEARCH_SECONDS, SEARCHES

BASIC_CHALLENGE = {"WWW-Authenticate": 'Basic realm="ncindex"'}


def search_blueprint(services: Services, service: Callable[[], SearchService]) -> Blueprint:
    """Blueprint with ``POST /v1/search``."""
    bp = Blueprint("search", __name__)

    @bp.post("/v1/search")
    def search() -> Response | tuple[Response, int]:
        try:
            raw = json.loads(request.get_data() or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            return problem(400, "invalid_json", f"body is not JSON: {exc}", field="body")
        if not isinstance(raw, dict):
            return problem(400, "invalid_json", "body must be a JSON object", field="body")
        try:
            search_request = SearchRequest.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "body"
            return problem(400, "invalid_value", first["msg"], field=field)
        try:
            client = resolve_caller(services, request.headers.get("Authorization"))
            response = service().search(client, search_request)
        except Unauthenticated as exc:
            SEARCHES.labels("unauthenticated").inc()
            return problem(401, "unauthenticated", str(exc), headers=BASIC_CHALLENGE)
        except (NextcloudUnavailable, StoreUnavailable) as exc:
            SEARCHES.labels("unavailable").inc()
            return problem(503, "backend_unavailable", str(exc), headers={"Retry-After": "5"})
        SEARCHES.labels("ok").inc()
        for stage, ms in response.timings_ms.items():
            SEARCH_SECONDS.labels(stage).observe(ms / 1000)
        return jsonify(response.as_dict())

    return bp
