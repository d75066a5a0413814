"""Response helpers shared by the simulator's HTTP handlers."""

from __future__ import annotations

import json
from typing import Any

from werkzeug.wrappers import Request, Response

from ncindex.simulator.phpjson import php_json_encode

__all__ = [
    "JSON_CONTENT_TYPE",
    "json_response",
    "not_modified",
    "request_params",
]

JSON_CONTENT_TYPE = "application/json; charset=utf-8"


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response encoded like PHP ``json_encode`` (AppFramework ``JSONResponse``)."""
    resp = Response(php_json_encode(data), status=status, content_type=JSON_CONTENT_TYPE)
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


def not_modified(request: Request, etag: str | None, last_modified: str | None = None) -> bool:
    """AppFramework ``NotModifiedMiddleware``: exact ``"etag"`` or exact HTTP-date match."""
    inm = request.headers.get("If-None-Match")
    if etag is not None and inm is not None and inm.strip() == f'"{etag}"':
        return True
    ims = request.headers.get("If-Modified-Since")
    return bool(last_modified and ims is not None and ims.strip() == last_modified)


def request_params(request: Request) -> dict[str, Any]:
    """AppFramework parameter merge: query string, then form body, then JSON body.

    A JSON body is used when the Content-Type says JSON (like Nextcloud); values keep their
    JSON types. Later sources win.
    """
    params: dict[str, Any] = {}
    for key in request.args:
        _assign(params, key, request.args.getlist(key))
    ctype = (request.mimetype or "").lower()
    if ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        for key in request.form:
            _assign(params, key, request.form.getlist(key))
    elif "json" in ctype:
        raw = request.get_data(cache=True)
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict):
                params.update(body)
    return params


def _assign(params: dict[str, Any], key: str, values: list[str]) -> None:
    """Store a PHP-style form key: ``a=1``, ``a[]=1&a[]=2`` (list), ``a[b][c]=1`` (nested)."""
    is_list = key.endswith("[]")
    if is_list:
        key = key[:-2]
    value: Any = list(values) if is_list else values[-1]
    if "[" not in key or not key.endswith("]"):
        params[key] = value
        return
    head, _, rest = key.partition("[")
    parts = [head, *rest[:-1].split("][")]
    cur: dict[str, Any] = params
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    cur[parts[-1]] = value
