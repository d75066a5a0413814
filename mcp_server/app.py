"""The MCP server's app factory: an ASGI (Starlette) app with the MCP Streamable HTTP transport
at ``/mcp`` (the official ``mcp`` SDK's low-level server) and ``/livez``, ``/readyz``,
``/metrics``.

A browser's requests to ``/mcp`` from an origin of ``settings.mcp_allowed_origins`` get CORS
answers (:mod:`mcp_server.cors`: it answers their preflight ``OPTIONS`` itself and adds its
headers to the rest). Every request but a preflight passes the *gate* first: the search API's
rate limits (``settings.search_rate_limit``, the same counters as ``/v1/search``'s: per caller,
and refused credentials per client address unless Nextcloud confirmed the caller recently;
429 with ``Retry-After``), then the caller's own Nextcloud credentials in ``Authorization`` (Basic
with an app password, or a Bearer token Nextcloud accepts), resolved exactly as the search API
does (:func:`ncindex.web.auth.resolve_caller`; 401 with ``WWW-Authenticate`` when missing or
refused, 503 when Nextcloud cannot be asked), then the body: at most 64 KiB (413) and strict
JSON (:mod:`ncindex.strict_json`: no ``NaN``, no key named twice, no string holding a lone
surrogate, which the transport's parser refuses too; else the transport's own 400 parse error,
JSON-RPC -32700, naming where a lone surrogate is), then the transport's header checks, run
by the gate with the transport's own rules (``TransportSecurityMiddleware.validate_request``): a
``Content-Type`` other than ``application/json`` (400 ``invalid_value``), a ``Host`` outside
``settings.mcp_allowed_hosts`` (421 ``host_not_allowed``) and an ``Origin`` outside
``settings.mcp_allowed_origins`` (403 ``origin_not_allowed``; DNS-rebinding protection, on
while ``mcp_allowed_hosts`` is not empty); an entry ``name:*`` allows ``name`` with any port or
none (:func:`with_portless`); last, an ``Mcp-Protocol-Version`` naming no version the SDK
serves is 400, JSON-RPC -32022 naming the header and listing the versions
(:func:`mcp_server.rpc_errors.unsupported_version`), a body that is not one request or
notification object (an array, a wrong ``jsonrpc``, no ``method``, an ``id`` that is not a
string or an integer) is 400, JSON-RPC -32600 naming ``body``, ``jsonrpc``, ``method`` or ``id``
(:func:`mcp_server.rpc_errors.message_not_valid`), and a request or notification whose
``params`` is not an object is 400, JSON-RPC -32602 naming ``params`` with the request's ``id``
(:func:`mcp_server.rpc_errors.params_not_object`). Only ``POST`` is served (405 with ``Allow:
POST`` otherwise). Errors of the gate carry the product's ``code`` and, where one part of the
request is at fault, its ``field`` (a header, or ``body``): as a JSON-RPC error whose ``data``
holds them for an MCP client (an ``Accept`` naming ``application/json``, which the SDK's
client reads; :func:`mcp_server.rpc_errors.refusal`), as problem+json for others (curl, a
browser); those the MCP specification or JSON-RPC itself gives a JSON-RPC error (text that is
not JSON, the protocol version, ``params``; :mod:`mcp_server.rpc_errors`) are one for all.
A ``tools/call`` whose ``arguments`` is not an object is JSON-RPC -32602 naming
``arguments``, and one without the ``name`` of one of the tools -32602 naming ``name``
(:class:`mcp_server.rpc_errors.ToolCall`).
The transport is stateless (each POST stands alone, so replicas need no sticky sessions) and
answers JSON, not SSE.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import structlog
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import (
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mcp_server.cors import ORIGIN_REFUSED, Cors
from mcp_server.problems import problem
from mcp_server.rpc_errors import (
    PROTOCOL_VERSION_HEADER,
    SUPPORTED_VERSIONS,
    ToolCall,
    message_not_valid,
    params_not_object,
    parse_error,
    refusal,
    request_id,
    unsupported_version,
    wants_json_rpc,
)
from mcp_server.tools import (
    DEFAULT_FETCH_CHARS,
    MAX_FETCH_CHARS,
    FetchArgs,
    NoArgs,
    PageArgs,
    Tools,
    ValuesArgs,
    failure_of,
    output_schema,
    search_schema,
)
from ncindex import __version__, strict_json
from ncindex.errors import (
    RETRY_AFTER_SECONDS,
    InputError,
    NextcloudAuthError,
    TransientError,
    Unauthenticated,
    public_reason,
)
from ncindex.ingest.queueing import Producer, celery_app
from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services
from ncindex.search.facets import DEFAULT_PAGE, MAX_PAGE
from ncindex.search.service import MAX_LIMIT
from ncindex.search.wiring import service_factory
from ncindex.settings import Settings
from ncindex.telemetry import MCP_TOOL_CALLS, metrics_payload
from ncindex.web.auth import confirmed, forget_caller, resolve_caller
from ncindex.web.health import SharedRedis, readiness, shared_reports
from ncindex.web.problems import BASIC_CHALLENGE, MAX_BODY_BYTES
from ncindex.web.proxies import TrustedProxies
from ncindex.web.ratelimit import CallerLimit, breach_detail

log = structlog.get_logger(__name__)

MCP_PATH = "/mcp"
CALLER = "ncindex_caller"
"""Key of the resolved :class:`NextcloudClient` in the ASGI scope's ``state``."""

INSTRUCTIONS = (
    "Search the caller's own Nextcloud (notes, files, Deck cards, News items): `search` "
    "returns verified results with ids, titles, links and plain-text snippets; `fetch` "
    "returns a result's text by its id; `list_filters` lists the filter fields and operators; "
    "`list_folders` and `list_tags` list the caller's folders and system tags, the values "
    "`search`'s `path_prefixes` and `tags` filters can name; `list_values` lists the doc types, "
    "MIME types, note categories, tags and owners of the caller's documents with their "
    "counts; "
    "`index_status` says what is "
    "indexed and what is still pending (a document added a moment ago may not be found yet), "
    'and the server\'s current time (`now`), to reckon a relative time such as "last month" '
    "from for `search`'s `modified_after`/`modified_before`."
)
_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def tool_list(default_limit: int) -> list[Tool]:
    """The tools with their input and output JSON Schemas (:func:`output_schema`), all
    annotated read-only; ``search``'s ``limit`` described with ``default_limit`` (the
    server's ``NCINDEX_SEARCH_DEFAULT_LIMIT``)."""

    def tool(name: str, title: str, description: str, schema: dict[str, Any]) -> Tool:
        return Tool(
            name=name,
            title=title,
            description=description,
            input_schema=schema,
            output_schema=output_schema(name),
            annotations=_READ_ONLY.model_copy(update={"title": title}),
        )

    return [
        tool(
            "search",
            "Search Nextcloud",
            "Hybrid (dense + BM25) search of the caller's notes, files, Deck cards and News "
            "items; every result is re-checked with Nextcloud. Only `query` is required; the "
            "`filter` tree's fields and operators are those the `list_filters` tool lists. "
            "Folders, tags, categories and owners are matched by exact name (case and "
            "Unicode form too), so take them from `list_folders`, `list_tags` and "
            "`list_values`. A search that finds nothing with a tag or category that must "
            "hold and that the caller's documents hold only in another case or Unicode form "
            "is an `invalid_value` error naming their spelling; otherwise an empty answer's "
            "`hints` name each folder, path, tag, category or owner value that must hold and "
            "selects none of the caller's documents, and each tag or category under an `or` "
            "spelt otherwise than theirs (`code` `selects_nothing`, `field`, `detail`): a "
            "valid search, so drop or change that filter rather than the words. "
            f"Answers `limit` results (1–{MAX_LIMIT}, default {default_limit}), at most one per "
            "document, "
            "best first: the nearest documents, so a query about nothing in the index still "
            "answers some (judge them by their snippets), unless `mode` is `sparse` (words "
            "alone: no document holding a query word, no result). There is no next page (no "
            "offset or cursor): for more, search again with a larger `limit`. Each result "
            "carries `id` "
            "(for `fetch`), `title`, `url` (opens it in Nextcloud), `path`, `owner` (a user id, "
            "as the `owner` filter takes it), a Deck card's `board_title` and `stack_title` (its "
            "board and stack as Nextcloud names them now) and `board_id`/`stack_id` (the values "
            "the filters of those names take: the other cards of its board), a News item's "
            "`feed_id`, `snippet` (plain "
            "text) with `matches` (`start`/`end` offsets into it) and `snippet_title_chars` "
            "(how many of its first characters are the title a Deck card's or News item's "
            "text opens with; 0 for none), `chunk_index` and "
            "`char_start`/`char_end` (the matching chunk, for "
            "`fetch`), `modified_at` (Unix seconds) and `score`: the fused rank score, higher "
            "is better, comparable only within one search (not a similarity, not 0–1). A "
            "result with `verified` false could not be confirmed with Nextcloud just now (the "
            "caller may have lost access); its `snippet` is then empty and its offsets null "
            "when the server withholds unconfirmed text (`verification` counts these, and "
            "`withheld` the ones left out). The "
            "candidate pool grows with `limit`, and with DBSF fusion (the default) scores are "
            "normalised over it: the same document can score differently, and close results "
            "swap places, under another `limit`; ask once with the `limit` you need rather "
            "than merging or comparing searches of different limits.",
            search_schema(default_limit),
        ),
        tool(
            "fetch",
            "Fetch a document",
            "The text of one document from `search` (by its `id`), or of the file or note at "
            "a `path` of the caller's, checked with Nextcloud first: at most `max_chars` "
            f"characters (default {DEFAULT_FETCH_CHARS:,}, at most "
            f"{MAX_FETCH_CHARS:,}) from character `offset` (default: the start), or with "
            "`chunk_index` the chunks around it (`window` on each side, default 2). "
            "`char_start`/`char_end` are the text's offsets in the document (a search "
            "result's offset `i` is `text[i - char_start]`); when `truncated` (the document "
            "goes on, past `max_chars` or past the window), call again with `offset` = "
            "`next_offset` and no `chunk_index` to read on.",
            FetchArgs.model_json_schema(),
        ),
        tool(
            "list_filters",
            "List search filters",
            "The fields `search`'s `filter` tree may name, their types and operators.",
            NoArgs.model_json_schema(),
        ),
        tool(
            "list_folders",
            "List the caller's folders",
            "The folders holding indexed documents the caller can read, as paths in the "
            "caller's own files (`/Projects/Lighthouse`), sorted: the values for `search`'s "
            "`path_prefixes`. Read from the index, then held to the caller's files in Nextcloud "
            "as they are now (a folder no longer there, such as a share revoked, is left out). "
            f"Paged: at most `limit` folders (1–{MAX_PAGE:,}, default {DEFAULT_PAGE}) from "
            "`offset`; `total` counts them all and `next_offset` (null on the last page) is the "
            "`offset` of the next page.",
            PageArgs.model_json_schema(),
        ),
        tool(
            "list_tags",
            "List the caller's tags",
            "The names of the system tags the caller can see on indexed documents the caller "
            "can read, sorted: the values for `search`'s `tags`. Read from the index, then held "
            "to the tags the caller can see in Nextcloud now (a tag deleted or renamed since is "
            f"left out). Paged: at most `limit` tags (1–{MAX_PAGE:,}, default {DEFAULT_PAGE}) "
            "from `offset`; `total` counts them all and `next_offset` (null on the last page) "
            "is the `offset` of the next page.",
            PageArgs.model_json_schema(),
        ),
        tool(
            "list_values",
            "List a field's values",
            "The values of `field` — `doc_type`, `mime_type`, `category` (notes), `tags` or "
            "`owner` — on the indexed documents the caller can read, each with `count`, how "
            "many of them hold it, most first: the values `search`'s `doc_types`, "
            "`mime_types`, `category` and `tags` can name, and an `owner` filter (take a MIME "
            "type from here rather than guessing one; only the owners of the caller's "
            "documents are listed). Read "
            "from the index, restricted to the caller's documents as every search is; the "
            "counts are not re-checked with Nextcloud per document, so one may include a "
            "document unshared since the last scan (tags are held to those the caller can see "
            "now). "
            f"Paged: at most `limit` values (1–{MAX_PAGE:,}, default {DEFAULT_PAGE}) from "
            "`offset`; `total` counts them all and `next_offset` (null on the last page) is the "
            "`offset` of the next page.",
            ValuesArgs.model_json_schema(),
        ),
        tool(
            "index_status",
            "Index status",
            "The caller's own indexed document counts per type, pending and failed documents, "
            "and `now`: the server's current time (ISO 8601, UTC), the time to reckon a "
            'relative `modified_after`/`modified_before` ("last month") from.',
            NoArgs.model_json_schema(),
        ),
    ]


def create_app(
    settings: Settings | None = None,
    *,
    services: Services | None = None,
    producer: Producer | None = None,
    proxy_hops: int | None = None,
) -> Starlette:
    """Build the MCP server app (see the module docstring). ``services`` (default: built
    from ``settings``) provides the store, embedder, Redis and the Nextcloud client;
    ``producer`` sends the re-check tasks for results verify-on-read drops; ``proxy_hops``
    is how many proxies in front write the client address trusted in ``X-Forwarded-For``
    (:class:`~ncindex.web.proxies.TrustedProxies`; default ``settings.trusted_proxy_hops``;
    ``ncindex up``'s relay, which sends the address it resolved itself: 1). The model and
    store open on first use. Raises ``ValueError`` for a rate limit string that cannot be
    parsed."""
    settings = settings or (services.settings if services else Settings())
    services = services or Services(settings)
    producer = producer or celery_app(settings)
    tools = Tools(service_factory(services, producer), services, settings.nextcloud_url)
    handlers = {
        "search": tools.search,
        "fetch": tools.fetch,
        "list_filters": tools.list_filters,
        "list_folders": tools.list_folders,
        "list_tags": tools.list_tags,
        "list_values": tools.list_values,
        "index_status": tools.index_status,
    }
    listed = tool_list(settings.search_default_limit)
    hops = settings.trusted_proxy_hops if proxy_hops is None else proxy_hops

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        handler = handlers[params.name]  # ToolCall refused any other name
        client = _caller(ctx)
        try:
            result = await anyio.to_thread.run_sync(_confirmed, handler, client, params.arguments)
        except Exception as exc:
            failure = failure_of(exc)
            if isinstance(exc, NextcloudAuthError | Unauthenticated):
                # refused since the gate resolved them (revoked): the next request is a 401
                await anyio.to_thread.run_sync(forget_caller, services, _authorization(ctx))
            MCP_TOOL_CALLS.labels(params.name, failure.code).inc()
            where = f" ({failure.field})" if failure.field else ""
            return CallToolResult(
                content=[TextContent(type="text", text=f"{failure.code}{where}: {failure.detail}")],
                structured_content=failure.as_dict(),
                is_error=True,
            )
        MCP_TOOL_CALLS.labels(params.name, "ok").inc()
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
        )

    server: Server[Any] = Server(
        "ncindex",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(ToolCall(list(handlers)))
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=bool(settings.mcp_allowed_hosts),
        allowed_hosts=with_portless(settings.mcp_allowed_hosts),
        allowed_origins=with_portless(settings.mcp_allowed_origins),
    )
    manager = StreamableHTTPSessionManager(
        app=server, json_response=True, stateless=True, security_settings=security
    )
    limit = CallerLimit(settings) if settings.search_rate_limit.strip() else None
    gate = Gate(
        StreamableHTTPASGIApp(manager), services, limit, TransportSecurityMiddleware(security)
    )

    async def livez(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    # ready through a Redis outage once Redis has answered, as the search API and the receiver
    # are: every replica shares the one Redis, so none would be left to answer
    redis_ready = SharedRedis(services.redis.ping)

    async def readyz(request: Request) -> Response:
        def ready_store() -> None:
            services.store.count()

        def ready_model() -> None:
            services.embedder.embed_query_sparse("ready")

        body, status = await anyio.to_thread.run_sync(
            readiness,
            {"redis": redis_ready, "store": ready_store, "model": ready_model},
            shared_reports(redis_ready, services.redis, settings.names, settings.accounts),
        )
        return JSONResponse(body, status_code=status)

    async def metrics(request: Request) -> Response:
        body, content_type = metrics_payload()
        return Response(body, headers={"Content-Type": content_type})

    app = Starlette(
        routes=[
            Route(MCP_PATH, endpoint=Cors(gate, settings.mcp_allowed_origins)),
            Route("/livez", livez, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        lifespan=lambda _app: manager.run(),
        exception_handlers={HTTPException: _http_problem},
        # the client address of the rate limits behind an ingress; the only reading of
        # X-Forwarded-For (uvicorn's own is off: deploy/gunicorn.conf.py, ncindex.web.asgi)
        middleware=[Middleware(TrustedProxies, hops=hops)],
    )
    app.state.services = services
    return app


async def _http_problem(request: Request, exc: Exception) -> Response:
    """Starlette's own answers (an unknown path 404, a ``POST /livez`` 405 with ``Allow``),
    which it writes in plain text, as problem+json like every other answer."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "invalid_value")
    return problem(status, code, exc.detail, dict(exc.headers or {}))


def with_portless(allowed: list[str]) -> list[str]:
    """``allowed`` (``Host`` or ``Origin`` values) with ``name`` added after each
    ``name:*``. The SDK's transport reads ``name:*`` as ``name:`` followed by a port
    (``TransportSecurityMiddleware._validate_host``/``_validate_origin`` in
    ``mcp.server.transport_security``), so it refused a ``Host`` without one — a client on
    the scheme's default port, or a proxy that drops it — that "any port" includes."""
    out: list[str] = []
    for value in allowed:
        out.append(value)
        bare = value.removesuffix(":*")
        if bare != value and bare and bare not in allowed:
            out.append(bare)
    return out


_TRANSPORT_REFUSALS = {
    400: ("invalid_value", "Content-Type", "the MCP endpoint takes application/json bodies"),
    421: (
        "host_not_allowed",
        "Host",
        "this server does not answer for that Host (NCINDEX_MCP_ALLOWED_HOSTS)",
    ),
    403: ("origin_not_allowed", "Origin", ORIGIN_REFUSED),
}
"""The transport's header refusals by status (``TransportSecurityMiddleware.validate_request``
answers them in plain text): the product's code, the offending header and a detail."""


class Gate:
    """ASGI wrapper of the MCP transport: rate limit, authentication, body, the transport's
    header checks by ``transport``, then the protocol version and ``params`` (see the module
    docstring); the resolved client goes into ``scope["state"][CALLER]``."""

    def __init__(
        self,
        app: Any,
        services: Services,
        limit: CallerLimit | None,
        transport: TransportSecurityMiddleware,
    ) -> None:
        self.app = app
        self.services = services
        self.limit = limit
        self.transport = transport

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            # stateless: no SSE stream to open with GET, no session to end with DELETE (the
            # transport's spec: a GET is answered with an SSE stream or 405)
            detail = "the MCP endpoint takes JSON-RPC messages by POST only (stateless, no SSE)"
            answer = problem(405, "method_not_allowed", detail, {"Allow": "POST"})
            await answer(scope, receive, send)
            return
        request = Request(scope)
        authorization = request.headers.get("Authorization")
        address = request.client.host if request.client else None
        retry = await anyio.to_thread.run_sync(self._limited, authorization, address)
        if retry is not None:
            assert self.limit is not None  # only a limit answers a retry time
            detail = breach_detail(self.limit.items)
            answer = _refused(request, 429, "rate_limited", detail, {"Retry-After": str(retry)})
            await answer(scope, receive, send)
            return
        try:
            # the caller's address goes to Nextcloud as X-Forwarded-For, so that its
            # brute-force protection charges the caller's refused logins, not ncindex's
            client = await anyio.to_thread.run_sync(
                resolve_caller, self.services, authorization, address
            )
        except Unauthenticated as exc:
            if self.limit is not None:
                await anyio.to_thread.run_sync(self.limit.count_refused, address)
            answer = _refused(
                request, 401, "unauthenticated", str(exc), BASIC_CHALLENGE, "Authorization"
            )
            await answer(scope, receive, send)
            return
        except InputError as exc:  # a Basic credential holding a control character
            answer = _refused(request, 400, exc.code, exc.detail, {}, exc.field)
            await answer(scope, receive, send)
            return
        except TransientError as exc:
            log.warning("mcp_authentication_unavailable", error=f"{type(exc).__name__}: {exc}")
            retry = {"Retry-After": str(RETRY_AFTER_SECONDS)}
            answer = _refused(request, 503, "backend_unavailable", public_reason(exc), retry)
            await answer(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER] = client
        body = await _body(receive, MAX_BODY_BYTES)
        if body is None:
            detail = f"request body larger than {MAX_BODY_BYTES} bytes, the most accepted here"
            limit = {"limit": MAX_BODY_BYTES}  # as the search API's 413 has it
            await _refused(request, 413, "payload_too_large", detail, {}, "body", None, limit)(
                scope, receive, send
            )
            return
        try:
            message = strict_json.loads(body)
        except (ValueError, RecursionError) as exc:
            # what the transport answers for text that is not JSON, for what its parser lets by
            await parse_error(f"Parse error: {exc}")(scope, receive, send)
            return
        where = strict_json.lone_surrogate_at(message)
        if where is not None:  # the transport's parser refuses it as well; a refusal of ours
            # below echoed the id, and UTF-8 cannot carry a lone surrogate: a 500
            detail = f"Parse error: a lone surrogate (not valid Unicode) in {where or 'the body'}"
            await parse_error(detail)(scope, receive, send)
            return
        refused = await self.transport.validate_request(request, is_post=True)
        if refused is not None:  # the transport would answer it in plain text
            status = refused.status_code
            code, field, detail = _TRANSPORT_REFUSALS.get(
                status, ("invalid_value", None, bytes(refused.body).decode(errors="replace"))
            )
            answer = _refused(request, status, code, detail, {}, field, request_id(message))
            await answer(scope, receive, send)
            return
        version = request.headers.get(PROTOCOL_VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            await unsupported_version(version, request_id(message))(scope, receive, send)
            return
        refused_message = message_not_valid(message) or params_not_object(message)
        if refused_message is not None:
            await refused_message(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _limited(self, authorization: str | None, address: str | None) -> int | None:
        """Seconds to wait when a limit is used up: the caller's, or — unless Nextcloud
        confirmed these credentials recently — the address's refused-credentials limit."""
        if self.limit is None:
            return None
        retry = self.limit.hit(authorization, address)
        if retry is None and not confirmed(self.services, authorization):
            retry = self.limit.refused_exceeded(address)
        return retry


def _refused(
    request: Request,
    status: int,
    code: str,
    detail: str,
    headers: dict[str, str],
    field: str | None = None,
    message_id: str | int | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """The gate's refusal of ``request``: a JSON-RPC error for an MCP client, whose ``Accept``
    names ``application/json`` (:func:`mcp_server.rpc_errors.refusal`, which the SDK's client
    can read), else problem+json (curl, a browser) — the same status, headers, ``code``,
    ``field`` and further members ``extra`` either way."""
    if wants_json_rpc(request.headers.get("Accept")):
        return refusal(status, code, detail, headers, field, message_id, extra)
    return problem(status, code, detail, headers, field, extra)


def _authorization(ctx: Any) -> str | None:
    """The ``Authorization`` header of the HTTP request carrying this MCP request."""
    request = ctx.request
    return request.headers.get("Authorization") if request is not None else None


def _confirmed(
    handler: Callable[[NextcloudClient, dict[str, Any]], dict[str, Any]],
    client: NextcloudClient,
    arguments: dict[str, Any] | None,
) -> dict[str, Any]:
    """``handler``'s answer to ``arguments`` as ``client``'s user, once Nextcloud has shown it
    still accepts ``client``'s credential: a tool answered from the index or Redis alone
    (``list_values``, ``index_status``) asks nothing that would, so a credential from the
    credential cache is asked about then
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`). Raises what ``handler``
    raises, and ``NextcloudAuthError`` for a credential refused since it was cached."""
    result = handler(client, arguments or {})
    client.confirm()
    return result


def _caller(ctx: Any) -> NextcloudClient:
    """The client the gate resolved for the HTTP request carrying this MCP request."""
    request = ctx.request
    client = getattr(request.state, CALLER, None) if request is not None else None
    if not isinstance(client, NextcloudClient):  # only reachable past the gate
        raise MCPError(-32603, "no authenticated caller")
    return client


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request body read whole from ``receive``, or ``None`` once it passes ``limit``
    bytes (the rest is not read)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: what came is the body
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the transport ``body`` (already read) first, then waits on
    the connection as ``receive`` does (for its disconnect)."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
