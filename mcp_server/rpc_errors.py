"""The MCP server's own JSON-RPC error answers: a body that is not strict JSON (as the SDK's
transport answers text that is not JSON), and, where the SDK's answer does not say what is
wrong, an ``Mcp-Protocol-Version`` the server does not speak, a body that is not one request
or notification object (its ``jsonrpc``, ``method`` or ``id`` wrong), a message whose ``params``
is not an object, and a ``tools/call`` that names no tool of the server or whose ``arguments``
is not an object.

They are JSON-RPC errors (``application/json``), not problem+json: the MCP specification
prescribes them (the protocol version: 2026-07-28, basic/transports/streamable-http, "Protocol
Version Header", and the schema's ``UnsupportedProtocolVersionError``; malformed tool calls:
server/tools, "Error Handling"; ``params``: JSON-RPC 2.0 §5.1, "Invalid params"), and the
SDK's client hands a JSON-RPC error to its caller with ``code``, ``message`` and ``data`` but
turns any other 4xx answer (a 404 aside) into a bare "Server returned an error response"
(``mcp.client.streamable_http``, ``_handle_post_request``).
Where one part of the request is at fault, ``error.data`` carries the product's ``code``, the
offending ``field`` and a ``detail``, as a tool error's ``structuredContent`` does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NoReturn

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response

PROTOCOL_VERSION_HEADER = "Mcp-Protocol-Version"
SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
"""The protocol versions the SDK's transport serves, oldest first: an ``Mcp-Protocol-Version``
of ``HANDSHAKE_PROTOCOL_VERSIONS`` (or none) goes to its handshake-era transport, any other to
its 2026-07-28 entry, which serves ``MODERN_PROTOCOL_VERSIONS``
(``StreamableHTTPSessionManager._handle_request``; ``classify_inbound_request``'s default in
``mcp.shared.inbound``)."""


def parse_error(message: str) -> Response:
    """The transport's own answer to a body that is not JSON: HTTP 400 with a JSON-RPC error
    -32700 and a null id (``mcp.server.streamable_http``, ``_create_error_response``)."""
    return _error(None, PARSE_ERROR, message)


def unsupported_version(requested: str, request_id: str | int | None) -> Response:
    """HTTP 400 with the JSON-RPC ``UnsupportedProtocolVersionError`` (-32022) for an
    ``Mcp-Protocol-Version`` header of ``requested``: ``data`` is the specification's
    ``{"supported", "requested"}`` (every version of :data:`SUPPORTED_VERSIONS`; the SDK's
    client re-probes at one it shares) with ``code`` ``unsupported_protocol_version``,
    ``field`` ``Mcp-Protocol-Version`` and ``detail``.

    The SDK's transport answered such a header with -32022 listing only
    ``MODERN_PROTOCOL_VERSIONS`` when the body carried the 2026-07-28 ``_meta`` envelope, and
    otherwise with a -32602 about that envelope (``classify_inbound_request``'s first rung),
    which does not name the header at all."""
    supported = ", ".join(SUPPORTED_VERSIONS)
    detail = f"{requested!r} is not a protocol version this server speaks ({supported})"
    data = {
        "supported": list(SUPPORTED_VERSIONS),
        "requested": requested,
        "code": "unsupported_protocol_version",
        "field": PROTOCOL_VERSION_HEADER,
        "detail": detail,
    }
    message = f"Unsupported protocol version: {PROTOCOL_VERSION_HEADER} {detail}"
    return _error(request_id, UNSUPPORTED_PROTOCOL_VERSION, message, data)


def params_not_object(message: Any) -> Response | None:
    """HTTP 400 with a JSON-RPC -32602 when ``message`` (a decoded body) is a request or
    notification whose ``params`` is given and is neither an object nor ``null``, else
    ``None``: ``id`` is the request's (:func:`request_id`; ``null`` for a notification),
    ``data`` is ``{"code": "invalid_value", "field": "params", "detail"}``.

    JSON-RPC 2.0 §4.2 lets ``params`` be an array or an object, but every MCP method takes
    its parameters by name (the schema's ``*RequestParams`` are objects), and §5 has the
    response carry the request's ``id`` whenever it could be read. The SDK's transports
    refused such a body before dispatch, with ``id`` ``null`` and no ``data``: the
    handshake-era one as -32602 whose message is pydantic's dump of the whole body
    (``StreamableHTTPServerTransport._handle_post_request``), the 2026-07-28 one as -32600
    "Body must be a single JSON-RPC request or notification object"
    (``mcp.server._streamable_http_modern.handle_modern_request``); both with HTTP 400, kept
    here (the 2026-07-28 entry maps -32602 to 400, ``mcp.shared.inbound.ERROR_CODE_HTTP_STATUS``).
    ``null`` passes, as the SDK's ``JSONRPCRequest.params`` allows it."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    params = message.get("params")
    if params is None or isinstance(params, dict):
        return None
    detail = f"must be an object (the method's parameters by name), not {_json_type(params)}"
    data = {"code": "invalid_value", "field": "params", "detail": detail}
    return _error(request_id(message), INVALID_PARAMS, _message("params", detail), data)


def message_not_valid(message: Any) -> Response | None:
    """HTTP 400 with a JSON-RPC -32600 "Invalid Request" (JSON-RPC 2.0 §5.1) when ``message``
    (a decoded body) is not one request or notification object, else ``None``: ``data`` is
    ``{"code": "invalid_value", "field", "detail"}`` with ``field`` ``body`` (an array — MCP
    has no batches since 2025-06-18, and the SDK serves none —, a string, a number…),
    ``jsonrpc`` (not ``"2.0"``), ``method`` (missing or not a string) or ``id``; the answer's
    ``id`` is the request's where it can be read (:func:`request_id`). A response object (no
    ``method``, a ``result`` or an ``error``) is left to the SDK.

    The SDK refused all but ``id`` with -32602, pydantic's dump of the whole body as the
    message and no ``data`` (``StreamableHTTPServerTransport._handle_post_request``). An
    ``id`` that is not a string or an integer it took for a notification: MCP's messages
    (specification 2024-11-05 and later, basic/messages, "Requests") say "Requests MUST
    include a string or integer ID. Unlike base JSON-RPC, the ID MUST NOT be null" and
    "Notifications MUST NOT include an ID", and the SDK's ``RequestId`` is a strict ``int``
    or a ``str`` (``mcp_types.jsonrpc``), so a message with ``"id": 1.5``, ``1.0``, ``true``,
    ``null``, an object or an array failed ``JSONRPCRequest``, was read as a
    ``JSONRPCNotification`` (which ignores the extra key) and answered HTTP 202 with no
    body: never run, its client left waiting for an answer."""
    if not isinstance(message, dict):
        field = "body"
        detail = f"must be one JSON-RPC request or notification object, not {_json_type(message)}"
    elif "method" not in message and ("result" in message or "error" in message):
        return None
    elif message.get("jsonrpc") != "2.0":
        field, detail = "jsonrpc", 'must be "2.0"'
    elif not isinstance(message.get("method"), str):
        field = "method"
        detail = "missing" if message.get("method") is None else "must be a string"
    elif "id" in message and request_id(message) is None:
        shown = json.dumps(message["id"])
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        field, detail = "id", f"must be a string or an integer (MCP requests), not {shown}"
    else:
        return None
    data = {"code": "invalid_value", "field": field, "detail": detail}
    message_id = request_id(message)
    return _error(message_id, INVALID_REQUEST, f"Invalid request: `{field}` {detail}", data)


MCP_MEDIA_TYPES = ("application/json", "text/event-stream")
"""What an MCP client's ``Accept`` lists on every POST (the specification's
basic/transports/streamable-http, "Sending Messages to the Server": "The client MUST include an
Accept header, listing both application/json and text/event-stream")."""


def wants_json_rpc(accept: str | None) -> bool:
    """Whether a refusal of the gate (:func:`refusal`) should be a JSON-RPC error rather than
    problem+json: ``accept`` (the request's ``Accept``) names ``application/json`` or
    ``text/event-stream`` — as an MCP client's does (:data:`MCP_MEDIA_TYPES`) — and not
    ``application/problem+json``. A request without ``Accept``, or with ``*/*`` alone (curl),
    gets problem+json as the search API answers."""
    types = {part.split(";", 1)[0].strip().lower() for part in (accept or "").split(",")}
    return "application/problem+json" not in types and any(t in types for t in MCP_MEDIA_TYPES)


def refusal(
    status: int,
    code: str,
    detail: str,
    headers: dict[str, str] | None = None,
    field: str | None = None,
    request_id: str | int | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """The gate's refusal (401, 413, 429, 503, and the transport's 400, 403, 421) for an MCP
    client: HTTP ``status`` with ``headers`` (``WWW-Authenticate``, ``Retry-After``) and a
    JSON-RPC error body (``application/json``) whose ``data`` is ``{"code", "field",
    "detail", "status"}`` — the product's code, the offending header or ``body``, as the
    problem+json answer has them — and ``retry_after`` (seconds, an integer) when
    ``Retry-After`` is set. ``error.code`` is -32600 (Invalid Request) for a 4xx and -32603
    for a 5xx, as the SDK's own transport answers its HTTP refusals
    (``mcp.server.streamable_http``, ``_create_error_response``); ``id`` is the request's
    where the body was read, else ``null`` (the SDK's client puts its own request's id on an
    error answered with ``id`` ``null``).

    The SDK's client hands a non-2xx answer's JSON-RPC error to its caller as ``MCPError``
    with ``code``, ``message`` and ``data`` only when the body is ``application/json``; a
    problem+json body became a bare -32603 "Server returned an error response"
    (``mcp.client.streamable_http``, ``_handle_post_request``), so an agent could not tell
    refused credentials from a rate limit or a Nextcloud outage, nor when to retry."""
    data: dict[str, Any] = {"code": code, "field": field, "detail": detail, "status": status}
    data.update(extra or {})  # a 413's limit, in bytes, as the problem+json answer has it
    retry = (headers or {}).get("Retry-After")
    if retry is not None and retry.isdigit():
        data["retry_after"] = int(retry)
    error = {
        "code": INTERNAL_ERROR if status >= 500 else INVALID_REQUEST,
        "message": f"{code}{f' ({field})' if field else ''}: {detail}",
        "data": data,
    }
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status, headers=headers
    )


def request_id(message: Any) -> str | int | None:
    """The JSON-RPC ``id`` of ``message`` (a decoded body) when it is a request's, else
    ``None`` (a notification, a batch, or an id of another type)."""
    if isinstance(message, dict):
        value = message.get("id")
        if isinstance(value, str | int) and not isinstance(value, bool):
            return value
    return None


class ToolCall:
    """Server middleware (``mcp.server.context.ServerMiddleware``, on ``Server.middleware``):
    a ``tools/call`` that does not name one of ``tools`` by ``name``, or whose ``arguments``
    is given and is not an object, is a JSON-RPC -32602 naming the field (MCP spec,
    server/tools, "Error Handling": an unknown tool and invalid arguments are protocol errors):
    ``data`` is ``{"code": "invalid_value", "field": "name" | "arguments", "detail"}``,
    ``name`` checked first. The SDK refused a missing or non-string ``name`` and a non-object
    ``arguments`` with -32602 as well, but as "Invalid request parameters" with empty ``data``
    (its params validation, ``mcp.shared.jsonrpc_dispatcher.handler_exception_to_error_data``,
    keeps pydantic's text off the wire), and left an unknown name to the tool handler.
    ``arguments`` absent or ``null`` goes on: the tool reads no arguments."""

    def __init__(self, tools: Sequence[str]) -> None:
        self.tools = tuple(tools)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/call":
            params = ctx.params or {}
            self._check_name(params.get("name"))
            arguments = params.get("arguments")
            if arguments is not None and not isinstance(arguments, dict):
                kind = _json_type(arguments)
                _refuse(
                    "arguments", f"must be an object (the tool's arguments by name), not {kind}"
                )
        return await call_next(ctx)

    def _check_name(self, name: Any) -> None:
        tools = ", ".join(self.tools)
        if name is None:
            _refuse("name", f"missing: the tool to call, one of {tools}")
        if not isinstance(name, str):
            _refuse(
                "name",
                f"must be a string, the tool to call, one of {tools}; not {_json_type(name)}",
            )
        if name not in self.tools:
            _refuse("name", f"unknown tool {name[:64]!r}; one of {tools}")


def _refuse(field: str, detail: str) -> NoReturn:
    """Raise the -32602 of a ``tools/call`` whose ``field`` is at fault."""
    data = {"code": "invalid_value", "field": field, "detail": detail}
    raise MCPError(INVALID_PARAMS, _message(field, detail), data)


def _message(field: str, detail: str) -> str:
    """The message of a -32602 whose ``field`` is at fault."""
    return f"Invalid request parameters: `{field}` {detail}"


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, with its article ("an array"; ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "a string"


def _error(
    request_id: str | int | None, code: int, message: str, data: dict[str, Any] | None = None
) -> Response:
    """HTTP 400 with a JSON-RPC error response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=400)
