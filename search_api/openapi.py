"""``GET /openapi.json``: an OpenAPI 3.1 document generated from the pydantic models.

The request and response schemas are pydantic's ``models_json_schema`` output (JSON Schema
2020-12, which OpenAPI 3.1 uses as is) under ``components/schemas``; the filter tree's
schema is generated from the same field table that drives validation
(:mod:`ncindex.search.filter_fields`), so the document cannot drift from the code.
"""

from __future__ import annotations

import functools
from typing import Any

from flask import Blueprint, Response, jsonify
from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from ncindex import __version__
from ncindex.documents import DocType
from ncindex.errors import InputError
from ncindex.search.facets import DEFAULT_PAGE, MAX_OFFSET, MAX_PAGE
from ncindex.search.filter_fields import FiltersDocument, filter_schemas
from ncindex.search.service import (
    DOC_ID_PATTERN,
    MAX_CHUNK_INDEX,
    MAX_CONTEXT_WINDOW,
    MAX_DOC_ID_CHARS,
    ContextResponse,
    SearchRequest,
    SearchResponse,
)
from ncindex.sync.user_status import UserStatus
from ncindex.web.problems import problem_for
from search_api.rcp import METHOD_PATTERN
from search_api.search import int_args

REF = "#/components/schemas/{model}"


class Problem(BaseModel):
    """RFC 9457 problem details (``application/problem+json``)."""

    type: str = Field(description="A tag URI naming the code.")
    title: str
    status: int
    detail: str
    code: str = Field(
        description="Stable: invalid_json, invalid_value, invalid_filter, unknown_field, "
        "unsupported_operator, unauthenticated, not_found, payload_too_large, rate_limited, "
        "backend_unavailable, internal_error; from the HTTP server, for a request it cannot "
        "parse: invalid_http, uri_too_long, expectation_failed, headers_too_large, "
        "not_implemented, http_version_not_supported."
    )
    field: str | None = Field(None, description="The offending input, e.g. `filter.and[0].op`.")


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request (RCP/1); ``method`` must match the path."""

    jsonrpc: str = "2.0"
    id: int | float | str = Field(
        None,  # optional in the schema, but never null there: a null id is -32600
        description="A string or a number (JSON-RPC 2.0 §4; answered with the same id); "
        "absent for a notification (no answer).",
        json_schema_extra=lambda schema: schema.pop("default", None),
    )
    method: str
    params: dict[str, Any] = Field(default_factory=dict)


class JsonRpcError(BaseModel):
    """A JSON-RPC error: RCP codes -32700, -32600, -32602 (``data.field``), -32001, -32003,
    -32004, -32005 (``data.option``), -32010, -32011, -32012, -32013."""

    code: int
    message: str
    data: dict[str, Any] | None = None


class JsonRpcResponse(BaseModel):
    """A JSON-RPC 2.0 response: ``result`` or ``error``."""

    jsonrpc: str = "2.0"
    id: int | float | str | None = Field(
        description="The request's id; null when it could not be read (JSON-RPC 2.0 §5)."
    )
    result: dict[str, Any] | None = None
    error: JsonRpcError | None = None


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(model=schema)}}}


def _problems(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Bad input (`code` and `field` say what).",
        401: "Missing or rejected Nextcloud credentials.",
        404: "No such document, or the caller cannot read it.",
        413: "Body too large.",
        429: "Rate limited; see `Retry-After`.",
        503: "A back end is unavailable; see `Retry-After`.",
    }
    content = {"application/problem+json": {"schema": {"$ref": REF.format(model="Problem")}}}
    return {str(s): {"description": text[s], "content": content} for s in statuses}


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the search API (built once)."""
    _, top = models_json_schema(
        [
            (SearchRequest, "validation"),
            (SearchResponse, "serialization"),
            (ContextResponse, "serialization"),
            (FiltersDocument, "serialization"),
            (UserStatus, "serialization"),
            (Problem, "serialization"),
            (JsonRpcRequest, "validation"),
            (JsonRpcResponse, "serialization"),
        ],
        ref_template=REF,
    )
    schemas = {**top.get("$defs", {}), **filter_schemas(REF)}
    for name in ("modified_after", "modified_before"):
        # the model's descriptions are the MCP search tool's too, which names its own tool
        schemas["SearchRequest"]["properties"][name]["description"] += (
            ' For a time relative to now ("last month"), reckon from the server\'s clock: '
            "`now` in `GET /v1/status` (RFC 3339, UTC)."
        )
    secured = [{"basic": []}, {"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ncindex search API",
            "version": __version__,
            "description": "Verified, filtered hybrid search over a Nextcloud. Callers "
            "authenticate with their own Nextcloud credentials; every result is re-checked "
            "against Nextcloud as the caller before it is returned.",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic", "description": "App password."},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "paths": {
            "/v1/search": {
                "post": {
                    "summary": "Search as the caller.",
                    "operationId": "search",
                    "security": secured,
                    "requestBody": {"required": True, "content": _json("SearchRequest")},
                    "responses": {
                        "200": {
                            "description": "A page of results.",
                            "content": _json("SearchResponse"),
                        },
                        **_problems(400, 401, 413, 429, 503),
                    },
                }
            },
            "/v1/filters": {
                "get": {
                    "summary": "The filterable fields, their types and operators.",
                    "operationId": "filters",
                    "responses": {
                        "200": {
                            "description": "The field table.",
                            "content": _json("FiltersDocument"),
                        },
                        **_problems(400),
                    },
                }
            },
            "/v1/documents/{doc_type}/{doc_id}/context": {
                "get": {
                    "summary": "Neighbouring chunks of a document the caller can read.",
                    "operationId": "context",
                    "security": secured,
                    "parameters": [
                        _param("doc_type", "path", {"enum": [t.value for t in DocType]}),
                        _param(
                            "doc_id",
                            "path",
                            {
                                "type": "string",
                                "maxLength": MAX_DOC_ID_CHARS,
                                "pattern": DOC_ID_PATTERN,
                            },
                        ),
                        _param("chunk_index", "query", _count(0, MAX_CHUNK_INDEX, 0)),
                        _param("window", "query", _count(0, MAX_CONTEXT_WINDOW, 2)),
                    ],
                    "responses": {
                        "200": {"description": "The chunks.", "content": _json("ContextResponse")},
                        **_problems(400, 401, 404, 429, 503),
                    },
                }
            },
            "/v1/folders": _facet_path(
                "folders",
                "The folders (in the caller's view) holding indexed documents the caller can read.",
                secured,
            ),
            "/v1/tags": _facet_path(
                "tags",
                "The system tags the caller can see on indexed documents the caller can read.",
                secured,
            ),
            "/v1/categories": _facet_path(
                "categories",
                'The note categories of indexed notes the caller can read (`""`: a note in '
                "the notes folder itself), each a value for a search's `category`.",
                secured,
            ),
            "/v1/owners": _facet_path(
                "owners",
                "The user ids owning indexed documents the caller can read (the caller's own "
                "among them), each a value for an `owner` filter; no other user is listed.",
                secured,
            ),
            "/v1/status": {
                "get": {
                    "summary": "The index as it concerns the caller: documents per doc type, "
                    "pending, dead letter, skipped per rule, last scans, first-indexing "
                    "progress and ETA; and `now`, the server's clock (RFC 3339, UTC), to "
                    "reckon a relative `modified_after` / `modified_before` from.",
                    "operationId": "status",
                    "security": secured,
                    "responses": {
                        "200": {
                            "description": "The caller's status.",
                            "content": _json("UserStatus"),
                        },
                        **_problems(400, 401, 429, 503),
                    },
                }
            },
            "/rcp/{method}": {
                "post": {
                    "summary": "RCP/1 (JSON-RPC 2.0): info, ping, initialize, retrieve, shutdown.",
                    "operationId": "rcp",
                    "security": [*secured, {}],
                    "parameters": [
                        _param("method", "path", {"type": "string", "pattern": METHOD_PATTERN})
                    ],
                    "requestBody": {"required": True, "content": _json("JsonRpcRequest")},
                    "responses": {
                        "200": {
                            "description": "A JSON-RPC response.",
                            "content": _json("JsonRpcResponse"),
                        },
                        "204": {"description": "A notification: no answer."},
                        "400": {
                            "description": "-32600: a query parameter (`data.field` names it; "
                            "the params are the body's alone), or a body that cannot be read "
                            "whole (`data.field`: `body`, or `Content-Length`).",
                            "content": _json("JsonRpcResponse"),
                        },
                        "401": {
                            "description": "-32012: credentials missing or rejected (`data.field`: "
                            "`Authorization`).",
                            "content": _json("JsonRpcResponse"),
                        },
                        "413": {
                            "description": "-32013: body too large "
                            "(`data`: `field` `body`, `limit` in bytes).",
                            "content": _json("JsonRpcResponse"),
                        },
                        "429": {
                            "description": "-32011: rate limited (never `info` or `ping`).",
                            "content": _json("JsonRpcResponse"),
                        },
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document.",
                    "operationId": "openapi",
                    "responses": {"200": {"description": "OpenAPI 3.1."}, **_problems(400)},
                }
            },
        },
    }


def _facet_path(name: str, summary: str, secured: list[dict[str, Any]]) -> dict[str, Any]:
    page = {
        "type": "object",
        "required": [name, "total", "next_offset"],
        "properties": {
            name: {"type": "array", "items": {"type": "string"}},
            "total": {"type": "integer", "minimum": 0},
            "next_offset": {"type": ["integer", "null"], "description": "null on the last page."},
        },
    }
    return {
        "get": {
            "summary": summary,
            "operationId": name,
            "security": secured,
            "parameters": [
                _param("offset", "query", _count(0, MAX_OFFSET, 0)),
                _param("limit", "query", _count(1, MAX_PAGE, DEFAULT_PAGE)),
            ],
            "responses": {
                "200": {
                    "description": "One page, sorted.",
                    "content": {"application/json": {"schema": page}},
                },
                **_problems(400, 401, 429, 503),
            },
        }
    }


def _param(name: str, where: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema}


def _count(lo: int, hi: int, default: int) -> dict[str, Any]:
    """An integer query parameter's schema: the bounds its endpoint enforces (``int_args``)."""
    return {"type": "integer", "minimum": lo, "maximum": hi, "default": default}


def openapi_blueprint() -> Blueprint:
    """Blueprint with ``GET /openapi.json`` (400 ``unknown_field`` for any query parameter)."""
    bp = Blueprint("openapi", __name__)

    @bp.get("/openapi.json")
    def document() -> Response:
        try:
            int_args()  # it takes none
        except InputError as exc:
            return problem_for(exc)
        return jsonify(openapi_document())

    return bp
