"""The MCP server's error answers: RFC 9457 problem+json bodies
(:func:`ncindex.web.problems.problem_body`) as Starlette responses."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from ncindex.web.problems import PROBLEM_JSON, problem_body


def problem(
    status: int,
    code: str,
    detail: str,
    headers: dict[str, str] | None = None,
    field: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """A ``status`` answer with a problem+json body of ``code``, ``detail`` and, when given,
    the offending ``field`` and the further members ``extra`` (a 413's ``limit``);
    ``headers`` added."""
    return Response(
        json.dumps(problem_body(status, code, detail, field=field, **(extra or {}))),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )
