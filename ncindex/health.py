"""``/livez`` and ``/readyz`` for both Flask apps (DESIGN §12).

``/livez`` answers as long as the process serves requests (no dependency is touched, so a slow
model load never fails a liveness probe). ``/readyz`` runs the app's named checks and answers
503 with each check's result while one fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

Check = Callable[[], None]


def health_blueprint(checks: Mapping[str, Check]) -> Blueprint:
    """Blueprint with ``/livez`` and ``/readyz``; a check passes when it returns and fails
    when it raises (the exception text is reported)."""
    bp = Blueprint("health", __name__)

    @bp.get("/livez")
    def livez() -> ResponseReturnValue:
        return jsonify(status="ok")

    @bp.get("/readyz")
    def readyz() -> ResponseReturnValue:
        results = {}
        for name, check in checks.items():
            try:
                check()
                results[name] = "ok"
            except Exception as exc:  # a readiness probe reports, it never raises
                results[name] = f"fail: {type(exc).__name__}: {exc}"
        ready = all(v == "ok" for v in results.values())
        return jsonify(status="ok" if ready else "unavailable", checks=results), (
            200 if ready else 503
        )

    return bp
