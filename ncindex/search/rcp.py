"""ncindex as an RCP/1 server (Retrieval Context Protocol, JSON-RPC 2.0 over HTTP; DESIGN §9).

``POST /rcp/<method>`` carries one JSON-RPC request (or a batch); the method in the path must
match the body's. Methods:

* ``info``, ``ping`` — open (no credentials), any time; outside the search API's rate limit
  (:data:`OPEN_METHODS`).
* ``initialize`` — authenticates the caller (their Nextcloud credentials in
  ``Authorization``, as for ``/v1/search``; one taken from the credential cache is confirmed
  with Nextcloud, :meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`), checks the
  types of ``protocolVersion``, ``client`` and ``capabilities`` (:func:`_peer_info`) and
  starts a session; the result advertises
  ``retrieve`` (``maxK``, ``modes``, ``fusion`` and ``x-ncindex.fusion``), ``filter`` (the
  same fields, types and operators as ``GET /v1/filters``, dates RFC 3339 only) and
  ``citations``.
* ``retrieve`` — ``query``, ``k``, ``mode``, ``filter``, ``fusion``, ``minScore``,
  ``includeText``, ``unit`` (see :func:`parse_retrieve` for the rest): answered by
  :meth:`ncindex.search.service.SearchService.search`, verify-on-read included; hits carry
  ``id`` (the ``doc_key``), ``score``, ``text`` (the chunk), ``chunk``, ``citation`` and
  ``meta``, the free-form object of a hit (the ``1ay1/rcp`` repository's ``spec/rcp-1.0.md``
  §7.7, "Hit": ``"meta"?: object``; its keys are the server's, but for the federation's
  ``engine``, §16.3), which holds the search result's ``doc_type``, ``doc_id``, ``title``,
  ``path``, ``board_title`` and ``stack_title`` (a Deck card's board and stack, null for other
  types), ``url``, ``snippet`` (HTML, its line breaks, code indentation and re-opened fence
  as ``POST /v1/search``'s, see :class:`~ncindex.search.service.SearchResult`),
  ``snippet_title_chars`` (how many of the snippet's first
  characters are the title a Deck card's or News item's text opens with, as ``POST
  /v1/search`` says it), ``modified_at`` (RFC 3339) and ``verified`` (false for a hit
  Nextcloud could not confirm just now, which ``usage.notes`` also says; under
  ``NCINDEX_UNVERIFIED_RESULTS=hide_text`` such a hit's ``text`` and ``snippet`` are empty and
  its ``citation`` has no offsets). With
  ``_meta: {"explain": true}`` in the params (an ncindex extension) the result's
  ``_meta.explain`` lists, per hit (``id``), the ``explain`` object of ``POST /v1/search``
  (branch ranks and scores, fused score, matched terms, filters, ``verified_at``). The
  result's ``_meta`` (spec §4.4: every result object may carry one, for
  implementation-specific data, and a peer ignores keys it does not know) holds
  ``verification``, ``degraded``, ``timingsMs`` and ``hints``: ``POST /v1/search``'s
  ``hints`` (empty unless no hit was found; each ``{code: "selects_nothing", field,
  detail}``, ``field`` naming the ``filter`` value that selects none of the caller's
  documents).
* ``shutdown`` — ends the caller's session: ``{}``. Its ``Authorization`` is authenticated as
  ``retrieve``'s is (the credential cache, else Nextcloud; no confirmation), so a refused one is
  -32012 (HTTP 401, counted against the address as a refused login) and ends nothing, and
  Nextcloud unreachable for an uncached one is -32010. Without ``Authorization`` it is ``{}``
  and ends nothing: spec §13 has ``shutdown`` "callable at any time", and the SDK's client and
  the public conformance checker send it last, the checker without credentials. (Unchecked,
  any made-up header left a tombstone key per ended session in Redis for an hour, each a
  caller of its own for the rate limiter: Redis grew at the sender's request rate.)

**Sessions.** HTTP is request-scoped, so the ``initialize`` state lives in Redis
(:class:`~ncindex.search.rcp_sessions.RcpSessions`; in each process's memory while Redis does
not answer, where a session the process knows nothing of is answered as initialized) for
``SESSION_SECONDS`` (refreshed by use), keyed by the credential (a SHA-256 of the
``Authorization`` header, never the credential) and a session id. A client that sends no
``RCP-Session`` header (the SDK's ``HttpTransport`` sends none; the public conformance
checker neither) has one *implicit* session per credential; a client that sends the header
names its own session: a value it chose (``[A-Za-z0-9._~-]``, 8 to 128 characters) or the
token ``initialize`` returned in ``_meta.session``. Spec §13 holds for every session: after a
successful ``initialize``, a second one on the same session is refused with -32600 (its
``data.hint`` says how to start afresh); one that failed version negotiation (-32002) leaves
the session uninitialized and may be retried. A fresh session is started by ``shutdown``
(callable any time: it ends the implicit session and the named one) followed by
``initialize``, by ``initialize`` with a new ``RCP-Session`` value (sessions of one
credential are independent, and one credential cannot touch another's, whatever id it
sends), or by ``SESSION_SECONDS`` of idleness. A gated method outside a session is -32001.

Dispatch follows the SDK's ``rcp.Server`` rules and message shapes: a request without ``id``
is a notification and gets no answer (HTTP 204); before ``initialize`` a gated method is
-32001; a known RCP method we do not offer is -32003; an unknown method -32004 (these two,
and a malformed message's -32600, with ``data.field``: ``jsonrpc``, ``method``, ``id``, or
``message`` for a batch member that is no object); malformed
params -32602 with ``data.field`` (``params`` itself when it is not an object, for every
method: spec §4.1; absent or ``null`` is ``{}``, §4.6); an operator outside the advertised
list or an unsupported mode/option -32005 with ``data.option``; a string holding a lone
surrogate (``"\\ud800"`` in the JSON), as a value or a key anywhere in a request, is refused
before the method runs, so no answer echoes one (:func:`_not_unicode`: -32602 naming the param,
-32600 naming another member, ``data.code`` ``invalid_value``; an ``id`` holding one is -32600
with id null); missing or rejected
credentials -32012 (HTTP 401); a back end down -32010 (retryable). A body that is not JSON,
or holds a number no finite float can carry (``1e309``, ``NaN``, ``Infinity``), is -32700. A
batch of more than ``MAX_BATCH`` messages is answered with one -32013 "batch too large"
(``id`` null) and none of it is run: the rate limit counts an HTTP request once, so the cap
bounds the retrieves one unit of it buys. Every other well-formed response is HTTP 200; a
batch in which the credential was refused is one refused login all the same
(:attr:`HttpAnswer.refused`), counted as a REST 401 is.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import rcp
import structlog
from pydantic import ValidationError

from ncindex import __version__, strict_json
from ncindex.errors import (
    RETRY_AFTER_SECONDS,
    FilterError,
    InputError,
    NextcloudAuthError,
    PermanentError,
    RpcError,
    TransientError,
    Unauthenticated,
    public_reason,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.search.filter_fields import rcp_filter_capability
from ncindex.search.filters import parse_rcp_tree
from ncindex.search.links import open_link
from ncindex.search.rcp_sessions import RcpSessions, already_initialized
from ncindex.search.service import Mode, SearchRequest, SearchResponse, SearchService
from ncindex.store.schema import RRF_K

log = structlog.get_logger(__name__)

Errc = rcp.Errc
MAX_K = 100
"""Largest ``k`` honoured (larger values are clamped, as the spec requires)."""

MAX_BATCH = 10
"""Most messages in one JSON-RPC batch; a larger batch is -32013 "batch too large"."""

OPEN_METHODS: tuple[str, ...] = (rcp.Method.INFO, rcp.Method.PING)
"""The methods answered without credentials, at any time (spec §14.1.1), from what the process
holds (no Redis, store or Nextcloud): the search API serves them outside the rate limit."""
MODES: tuple[Mode, ...] = ("dense", "sparse", "hybrid")
CORE_FUSIONS = ("rrf",)
"""The fusion methods of the spec's enum (``rrf``, ``weighted``, ``convex``; §6.1, §7.7) served,
advertised in ``retrieve.fusion``."""
VENDOR_FUSIONS = ("dbsf",)
"""Fusion methods outside that enum, advertised under ``retrieve.x-ncindex.fusion``: spec §6.2
reserves the core enum values ("only a future RCP revision may add to core") and puts vendor
names under ``x-<vendor>`` keys. Distribution-based score fusion (Qdrant's DBSF) is none of
the three."""
FUSIONS = CORE_FUSIONS + VENDOR_FUSIONS
SESSION_HEADER = "RCP-Session"
_SESSION_ID = re.compile(r"[A-Za-z0-9._~-]{8,128}")
# Options a client may ask for that this server does not offer (spec §7.7): -32005 when strict.
# tokenBudget too: "a server that does not support budgeting ignores it (per strict)" (§7.7.2).
_UNOFFERED = ("rerank", "mmr", "rewrite", "recency", "cursor", "tokenBudget")
# Spec params this server does not act on and never refuses, named in the notes: seed ("one
# that cannot MUST ignore it (never error) and SHOULD note non-determinism in usage.notes",
# §7.7.1), indexVersion (no snapshots advertised, §7.7.1), sessionId ("a hint, never a
# requirement", §7.7.3), level (a flat corpus, §6.1 levels absent; "safely ignorable",
# §7.7.2) and includeVectors (no vectors are returned).
_UNREAD = ("includeVectors", "indexVersion", "level", "seed", "sessionId")
_UNITS = ("chunk", "passage")
"""The ``unit`` values served: ``retrieve.units`` is not advertised, which "means
``chunk``/``passage`` only" (spec §6.1); a hit's text is a chunk."""
_POSITIVE_INTS = ("k", "candidateK", "tokenBudget")
_RETRIEVE_PARAMS = frozenset(
    {"query", "mode", "modality", "fusion", "filter", "minScore", "includeText", "_meta"}
    | {"strict", "unit", *_POSITIVE_INTS, *_UNOFFERED, *_UNREAD}
)
"""The ``retrieve`` params this server reads or refuses by name; any other is unknown."""
_FUSION_FIXED = frozenset({"weights", "rrfK", "alpha"})
"""The keys of ``retrieve``'s ``fusion`` (spec §7.7) that only the server sets."""
_CONTENT_KEYS = frozenset({"type", "text", "mimeType", "data", "uri"})
"""The keys of a Content block (spec §4.8)."""


@dataclass
class HttpAnswer:
    """What to send: HTTP ``status``, JSON ``body`` (``None`` ⇒ no body, 204) and headers;
    ``refused``: the caller's credential was refused while answering (missing or malformed,
    or refused by Nextcloud: :attr:`_Call.refused`), whatever the status — a batch is HTTP 200
    though its messages were all -32012, and still one refused login (the search API counts it
    against the client's address as it counts a REST 401)."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    refused: bool = False


@dataclass
class _Call:
    """Per-HTTP-request context: the credential, lazily authenticated once. Once Nextcloud
    refused it (authenticating, or a retrieve's request after: :meth:`refuse`), every later
    message of the same batch is refused without asking again: a batch counts once against
    the rate limits, and each refused login asked would count against ncindex's address (or
    the caller's) in Nextcloud's brute-force protection (nextcloud/server
    ``lib/private/User/Session.php`` ``logClientIn`` → ``Throttler::registerAttempt``).
    Likewise once authenticating failed for want of an answer (``TransientError``: Nextcloud
    down, or stalled past ``settings.http_timeout``), the rest of the batch gets that failure
    without asking again, so a stalled Nextcloud costs a batch one timeout, not one per
    message. The same holds once authenticated: the client is one for the whole batch, and
    ``authenticate`` (``ncindex.web.auth.resolve_caller``) makes it stop asking a part of
    Nextcloud (an endpoint family: the DAV server, one app's routes, …) at the first request
    that part gave no answer to, and every part once a connection could not be made
    (:attr:`~ncindex.nextcloud.client.NextcloudClient.stop_when_unanswered`), so a later
    message's search meets that failure without asking — its checks of that part keep their
    candidates unconfirmed (``meta.verified`` false, named in ``usage.notes``), and a cached
    credential's confirmation, asked of OCS once whatever else stalled, stands once OCS
    itself gave no answer, as when Nextcloud is asked and does not answer; each message
    still gets its answer, only without waiting another timeout for a part that gave none (a
    batch waits at most one per family).
    (A search meeting Nextcloud's silence raises no error: it is fail-open, DESIGN §9.)"""

    authorization: str | None
    session: str | None
    authenticate: Callable[[str | None], NextcloudClient]
    _client: NextcloudClient | None = None
    _refused: str | None = None
    _unavailable: TransientError | None = None

    @property
    def cred(self) -> str:
        return hashlib.sha256((self.authorization or "").encode("utf-8", "replace")).hexdigest()

    @property
    def refused(self) -> bool:
        """Whether the credential was refused during this HTTP request (at most once asked)."""
        return self._refused is not None

    def client(self) -> NextcloudClient:
        """The authenticated client; raises :class:`Unauthenticated` when Nextcloud refused
        the credential during this HTTP request, ``TransientError`` as ``authenticate`` (the
        first one again, unasked, once authenticating failed so during this request)."""
        if self._refused is not None:
            raise Unauthenticated(self._refused)
        if self._unavailable is not None:
            raise self._unavailable
        if self._client is None:
            try:
                self._client = self.authenticate(self.authorization)
            except Unauthenticated as exc:
                self.refuse(str(exc) or "unauthenticated")
                raise
            except TransientError as exc:
                self._unavailable = exc
                raise
        return self._client

    def refuse(self, reason: str) -> None:
        """Note that Nextcloud refused the credential (``reason``: the message to answer)."""
        self._refused = reason
        self._client = None


class RcpServer:
    """Dispatches RCP/1 requests to a :class:`SearchService`.

    ``service`` returns the search service (built lazily by the app); ``authenticate`` turns
    an ``Authorization`` header into a client with ``user`` resolved, raising
    :class:`Unauthenticated` (or ``TransientError`` when Nextcloud cannot be asked);
    ``sessions`` holds the ``initialize`` state; ``citation_base`` is the Nextcloud URL that
    ``citation.uri`` links are made from (:func:`~ncindex.search.links.open_link`, as MCP's
    ``url``), or ``None``.
    """

    def __init__(
        self,
        service: Callable[[], SearchService],
        authenticate: Callable[[str | None], NextcloudClient],
        sessions: RcpSessions,
        *,
        citation_base: str | None = None,
        forget: Callable[[str | None], None] | None = None,
    ) -> None:
        self.service = service
        self.authenticate = authenticate
        self.sessions = sessions
        self.citation_base = citation_base
        self.forget = forget

    # --- protocol surface -----------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        """The ``info``/``initialize`` result (protocol version, identity, capabilities)."""
        return {
            "protocolVersion": rcp.PROTOCOL_VERSION,
            "server": {"name": "ncindex", "version": __version__},
            "capabilities": self.capabilities(),
            "_meta": {"conformance": "L1"},
        }

    @staticmethod
    def capabilities() -> dict[str, Any]:
        """``retrieve`` (``maxK``, ``modes``, ``fusion`` — the core methods, the others under
        ``x-ncindex`` —, ``defaultMode``), ``filter`` (as ``GET /v1/filters``) and
        ``citations``."""
        return {
            rcp.Capability.Retrieve.value: {
                "maxK": MAX_K,
                "modes": list(MODES),
                "fusion": list(CORE_FUSIONS),
                "x-ncindex": {"fusion": list(VENDOR_FUSIONS)},
                "defaultMode": "hybrid",
                "mmr": False,
                "rerankBuiltin": False,
            },
            rcp.Capability.Filter.value: rcp_filter_capability(),
            rcp.Capability.Citations.value: {},
        }

    # --- HTTP entry -----------------------------------------------------------------------

    def handle_http(
        self,
        path_method: str,
        body: bytes,
        authorization: str | None,
        session: str | None = None,
    ) -> HttpAnswer:
        """Answer one HTTP POST to ``/rcp/<path_method>``. Never raises."""
        call = _Call(authorization, session or None, self.authenticate)
        try:
            message = strict_json.loads(body)  # an empty body is no JSON either: -32700
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            return HttpAnswer(200, _err(None, Errc.PARSE_ERROR, f"parse error: {exc}"))
        if isinstance(message, list):
            if not message:
                return HttpAnswer(200, _err(None, Errc.INVALID_REQUEST, "empty batch"))
            if len(message) > MAX_BATCH:
                # -32013 PayloadTooLarge, whose row in spec §12 names "batch size" (§15.5); §11
                # says "MAY cap batch size and reject an oversized batch with -32602", written
                # before ed.2 added -32013. Either way not -32600: the batch is well formed.
                return HttpAnswer(
                    200,
                    _err(
                        None,
                        Errc.PAYLOAD_TOO_LARGE,
                        f"batch too large: {len(message)} messages, at most {MAX_BATCH}",
                        {"maxBatch": MAX_BATCH},
                    ),
                )
            replies = [r for r in (self._one(m, path_method, call) for m in message) if r]
            answer = HttpAnswer(200, replies) if replies else HttpAnswer(204, None)
        else:
            reply = self._one(message, path_method, call)
            error = (reply or {}).get("error") or {}
            if reply is None:
                answer = HttpAnswer(204, None)
            elif error.get("code") == Errc.UNAUTHORIZED:
                answer = HttpAnswer(401, reply, {"WWW-Authenticate": 'Basic realm="ncindex"'})
            else:
                answer = HttpAnswer(200, reply)
        answer.refused = call.refused
        return answer

    def _one(self, message: Any, path_method: str, call: _Call) -> dict[str, Any] | None:
        if not isinstance(message, dict):
            return _err(None, Errc.INVALID_REQUEST, "not a JSON-RPC request object", dict(_MESSAGE))
        id_ = message.get("id")
        method = message.get("method")
        if message.get("jsonrpc") != "2.0":  # JSON-RPC 2.0 §4: MUST be exactly "2.0"
            said = "'jsonrpc' must be \"2.0\""
            return _err(answerable_id(id_), Errc.INVALID_REQUEST, said, {"field": "jsonrpc"})
        if not isinstance(method, str):
            said = "missing 'method'" if method is None else "'method' must be a string"
            return _err(answerable_id(id_), Errc.INVALID_REQUEST, said, {"field": "method"})
        if "id" not in message:
            return None  # a notification is never answered (spec §4.5)
        if answerable_id(id_) is None:
            said = "'id' must be a string (valid Unicode: no lone surrogate) or a number"
            return _err(None, Errc.INVALID_REQUEST, said, {"field": "id"})
        where = strict_json.lone_surrogate_at(message)
        if where is not None:  # refused before any member is read, so none is echoed
            return _not_unicode(id_, where)
        if method != path_method:
            return _err(
                id_,
                Errc.INVALID_REQUEST,
                f"method {method!r} does not match the path {path_method!r}",
                {"field": "method"},
            )
        params = message.get("params")
        if params is None:  # absent, or null, which a receiver reads as absent (spec §4.6)
            params = {}
        try:
            return _ok(id_, self._dispatch(method, params, call))
        except RpcError as exc:
            return _err(id_, exc.code, exc.message, exc.data)
        except Exception as exc:  # a bug is an internal error, never a crash
            log.exception("rcp_internal_error", method=method)
            return _err(id_, Errc.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")

    def _dispatch(self, method: str, params: Any, call: _Call) -> dict[str, Any]:
        # Each method that reads its params first checks they are an object (spec §4.1), after
        # what a method's gating answers (-32001, -32003, -32004), as the SDK's Server does.
        if method == rcp.Method.INFO:
            _object(params)
            return self.server_info()
        if method == rcp.Method.PING:
            return _pong(_object(params))
        if method.startswith("notifications/"):
            raise RpcError(
                Errc.INVALID_REQUEST,
                f"'{method}' is a notification and MUST NOT carry an 'id'",
                {"field": "id"},
            )
        if call.session is not None and not _SESSION_ID.fullmatch(call.session):
            raise RpcError(
                Errc.INVALID_REQUEST,
                f"the {SESSION_HEADER} header must be 8 to 128 of A-Z a-z 0-9 . _ ~ -",
                {"field": SESSION_HEADER},
            )
        if method == rcp.Method.SHUTDOWN:
            _object(params)
            if call.authorization:  # none: no one's session to end, nothing to refuse (§13)
                self._authenticated(call)  # ends only sessions the caller holds the key to
                self.sessions.end(call.cred, call.session)
            return {}
        client = self._authenticated(call)
        if method == rcp.Method.INITIALIZE:
            return self._initialize(_object(params), call, client)
        if not self.sessions.active(call.cred, call.session):
            raise RpcError(Errc.NOT_INITIALIZED, "call 'initialize' first")
        if method == rcp.Method.RETRIEVE:
            try:
                return self._retrieve(client, _object(params))
            except RpcError as exc:
                if exc.code == Errc.UNAUTHORIZED:  # refused after resolving: revoked
                    self._revoked(call, exc.message)
                raise
        if method in _KNOWN_METHODS:
            raise RpcError(Errc.CAPABILITY_MISSING, f"'{method}' not implemented", dict(_METHOD))
        raise RpcError(Errc.UNKNOWN_METHOD, f"unknown method '{method}'", dict(_METHOD))

    def _revoked(self, call: _Call, reason: str) -> None:
        """Nextcloud refused ``call``'s credential after it was resolved (revoked since it
        was cached): the rest of the batch is refused unasked (``reason``) and the credential
        leaves the cache (``forget``)."""
        call.refuse(reason)
        if self.forget is not None:
            self.forget(call.authorization)

    def _authenticated(self, call: _Call) -> NextcloudClient:
        try:
            return call.client()
        except Unauthenticated as exc:
            raise _unauthorized(str(exc) or "unauthenticated") from None
        except InputError as exc:  # a Basic credential holding a control character
            raise RpcError(Errc.INVALID_REQUEST, exc.detail, {"field": exc.field}) from None
        except TransientError as exc:
            log.warning("rcp_authentication_unavailable", error=f"{type(exc).__name__}: {exc}")
            raise RpcError(
                Errc.BACKEND_UNAVAILABLE,
                f"cannot authenticate now: {public_reason(exc)}",
                {"retryable": True, "retryAfterMs": RETRY_AFTER_SECONDS * 1000},
            ) from None

    def _initialize(
        self, params: dict[str, Any], call: _Call, client: NextcloudClient
    ) -> dict[str, Any]:
        if self.sessions.started(call.cred, call.session):  # spec §13: no re-negotiation
            raise already_initialized()
        wanted = params.get("protocolVersion")  # absent or null: ours (as the SDK's Server)
        # an integer (spec §7.1 and the schema's InitializeParams); the SDK's negotiate_version
        # read "abc", true and 1.9 as versions, so a wrong type went unnoticed (§14.1 item 5)
        version = rcp.negotiate_version(
            rcp.PROTOCOL_VERSION if wanted is None else _integer("protocolVersion", wanted)
        )
        _peer_info(params)
        if version < 1:  # the session stays uninitialized; a retry is allowed (spec §13)
            raise RpcError(Errc.VERSION_MISMATCH, "no common version", {"field": "protocolVersion"})
        try:  # a credential from the cache, revoked since, starts no session
            client.confirm()
        except NextcloudAuthError:
            self._revoked(call, "Nextcloud rejected the credentials")
            raise _unauthorized("Nextcloud rejected the credentials") from None
        token = self.sessions.start(call.cred, call.session)
        result = self.server_info()
        result["protocolVersion"] = version
        result["_meta"] = {**result["_meta"], "session": token}
        return result

    # --- retrieve -------------------------------------------------------------------------

    def _retrieve(self, client: NextcloudClient, params: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        args = parse_retrieve(params)
        try:
            response = self.service().search(
                client,
                args.request,
                mode=args.mode,
                min_score=args.min_score,
                tree=args.tree,
            )
        except NextcloudAuthError:
            raise _unauthorized("Nextcloud rejected the credentials") from None
        except FilterError as exc:  # a tag or category the caller's documents spell otherwise
            raise _filter_error(exc) from None
        except TransientError as exc:
            log.warning("rcp_backend_unavailable", error=f"{type(exc).__name__}: {exc}")
            raise RpcError(
                Errc.BACKEND_UNAVAILABLE,
                public_reason(exc),
                {"retryable": True, "retryAfterMs": RETRY_AFTER_SECONDS * 1000},
            ) from None
        except PermanentError as exc:
            log.warning("rcp_backend_failed", error=f"{type(exc).__name__}: {exc}")
            raise RpcError(Errc.INTERNAL_ERROR, public_reason(exc)) from None
        return self._retrieve_result(response, args, started)

    def _retrieve_result(
        self, response: SearchResponse, args: RetrieveArgs, started: float
    ) -> dict[str, Any]:
        hits = []
        for r in response.results:
            hit: dict[str, Any] = {
                "id": r.doc_key,
                "score": r.score,
                "chunk": {"docId": r.doc_key, "index": r.chunk_index},
                "citation": self._citation(r.doc_type, r.doc_id, r.title, r.url, r),
                "meta": {
                    "doc_type": r.doc_type,
                    "doc_id": r.doc_id,
                    "title": r.title,
                    "path": r.path,
                    "board_title": r.board_title,
                    "stack_title": r.stack_title,
                    "url": r.url,
                    "modified_at": _rfc3339(r.modified_at),
                    "snippet": r.snippet,
                    "snippet_title_chars": r.snippet_title_chars,
                    "verified": r.verified,
                },
            }
            if args.include_text:
                hit["text"] = r.text
            hits.append(hit)
        usage: dict[str, Any] = {
            "candidates": response.candidates,
            "latencyMs": round((time.perf_counter() - started) * 1000),
        }
        notes = list(args.notes)
        if response.degraded:
            notes.append("dense half failed: sparse-only answer")
        notes.extend(_unverified_notes(response))
        if notes:
            usage["notes"] = notes
        meta: dict[str, Any] = {
            "verification": response.verification.model_dump(),
            "degraded": response.degraded,
            "timingsMs": response.timings_ms,
            "hints": [hint.model_dump() for hint in response.hints],
        }
        if args.request.explain:
            meta["explain"] = [
                {"id": r.doc_key, **r.explain.model_dump(mode="json")}
                for r in response.results
                if r.explain is not None
            ]
        return {"hits": hits, "usage": usage, "_meta": meta}

    def _citation(
        self, doc_type: str, doc_id: str, title: str, url: str | None, r: Any
    ) -> dict[str, Any]:
        citation: dict[str, Any] = {
            "source": r.path or title or f"{doc_type}:{doc_id}",
            "title": title,
        }
        if r.char_start is not None and r.char_end is not None:  # null: text withheld
            citation["start"], citation["end"] = r.char_start, r.char_end
        uri = open_link(self.citation_base, doc_type, doc_id, url)  # as MCP's url
        if uri:
            citation["uri"] = uri
        return citation


def _unverified_notes(response: SearchResponse) -> list[str]:
    """``usage.notes`` saying that results could not be confirmed with Nextcloud: shown
    unconfirmed (``meta.verified`` false; their text withheld when ``snippet`` is empty) or
    left out (``_meta.verification.withheld``)."""
    notes = []
    shown = sum(not r.verified for r in response.results)
    if shown:
        notes.append(f"{shown} hit(s) not confirmed with Nextcloud (meta.verified false)")
    if response.verification.withheld:
        notes.append(
            f"{response.verification.withheld} hit(s) left out: not confirmed with Nextcloud"
        )
    return notes


@dataclass
class RetrieveArgs:
    """``retrieve`` params, validated: the search request, mode, absolute ``min_score``,
    the parsed filter tree, ``include_text`` and the notes for ``usage.notes``."""

    request: SearchRequest
    mode: Mode
    min_score: float | None
    tree: Any
    include_text: bool
    notes: list[str]


def parse_retrieve(params: dict[str, Any]) -> RetrieveArgs:
    """Validate ``retrieve`` params (spec §7.7). ``k`` and ``candidateK`` are integers as
    JSON counts them: ``10`` or ``10.0`` (as ``limit`` of ``POST /v1/search`` and MCP's
    ``search``), never ``10.5``, a string or a boolean; without ``k`` the request's limit is
    left to the search service (``settings.search_default_limit``, as for those two).
    Raises :class:`RpcError`: -32602 with ``data.field`` for a malformed param or filter,
    -32005 with ``data.option`` for a mode, fusion, operator or option this server does not
    advertise (unless ``strict`` is false, in which case options are dropped and noted). A
    param this server does not know, a key of a filter node the tree does not define
    (``valu``; not a ``field`` value it does not know), and a key of ``fusion`` or of a query
    block that it does not read, are tolerated (spec §4.6, §14.1.7) and named in the notes
    (``unknown filter key 'filter.and[1].valu' ignored``, ``unknown parameter 'fusion.x'
    ignored``). A param, or a
    key of ``fusion``, ``_meta`` or a query block, that is ``null`` is absent (§4.6)."""
    params = _present(params)
    notes: list[str] = []
    strict = params.get("strict", True)
    if not isinstance(strict, bool):
        raise _invalid("strict", "'strict' must be a boolean")
    for name in sorted(set(params) - _RETRIEVE_PARAMS):  # a misspelt `minscore`, say
        notes.append(f"unknown parameter '{name}' ignored")  # tolerated (spec §14.1.7)
    k = _counts(params).get("k")  # none: the default, as for POST /v1/search without limit
    if k is not None and k > MAX_K:
        notes.append(f"k clamped to maxK={MAX_K}")
        k = MAX_K
    query = _query_text(params.get("query"), notes)
    mode = params.get("mode", "hybrid")
    if not isinstance(mode, str):
        raise _invalid("mode", "'mode' must be a string")
    if mode not in MODES:
        raise _unsupported("mode", mode)
    modality = params.get("modality", "text")
    if modality != "text":
        raise _unsupported("modality", str(modality))
    fusion = _fusion(params.get("fusion"), notes)
    _options(params, strict, notes)
    min_score = params.get("minScore")
    if min_score is not None and (
        isinstance(min_score, bool)
        or not isinstance(min_score, int | float)
        or not math.isfinite(min_score)
    ):
        raise _invalid("minScore", "'minScore' must be a finite number")
    include_text = params.get("includeText", True)
    if not isinstance(include_text, bool):
        raise _invalid("includeText", "'includeText' must be a boolean")
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        raise _invalid("_meta", "'_meta' must be an object")
    explain = _present(meta or {}).get("explain", False)
    if not isinstance(explain, bool):
        raise _invalid("_meta.explain", "'_meta.explain' must be a boolean")
    try:
        tree, ignored = parse_rcp_tree(params.get("filter"))
    except FilterError as exc:
        raise _filter_error(exc) from None
    notes.extend(f"unknown filter key '{path}' ignored" for path in ignored)  # spec §4.6
    try:
        request = SearchRequest(query=query, limit=k, fusion=fusion, explain=explain)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or "query"
        # a validator's own ValueError reads "Value error, <its message>", as in REST's
        # validation_error: the message is enough
        raise _invalid(name, f"{name}: {first['msg'].removeprefix('Value error, ')}") from None
    return RetrieveArgs(
        request=request,
        mode=mode,
        min_score=None if min_score is None else float(min_score),
        tree=tree,
        include_text=include_text,
        notes=notes,
    )


def _counts(params: dict[str, Any]) -> dict[str, int]:
    """``k``, ``candidateK``, ``tokenBudget`` and ``rerank.topN`` where given, each an integer
    >= 1, and the funnel ``candidateK >= rerank.topN >= k`` (spec §3.3, §7.7: MUST) checked
    among those given, as the SDK's Server does, whether or not ``rerank`` is then refused or
    dropped: a violation is malformed whatever the capabilities (§12). Raises -32602."""
    counts: dict[str, int] = {}
    rerank = params.get("rerank")
    top_n = _present(rerank).get("topN") if isinstance(rerank, dict) else None
    given = {name: params.get(name) for name in _POSITIVE_INTS} | {"rerank.topN": top_n}
    for name, value in given.items():
        if value is not None:
            count = _integer(name, value)
            if count < 1:
                raise _invalid(name, f"'{name}' MUST be >= 1")
            counts[name] = count
    funnel = [name for name in ("candidateK", "rerank.topN", "k") if name in counts]
    for wider, narrower in itertools.pairwise(funnel):
        if counts[wider] < counts[narrower]:
            raise _invalid(wider, f"'{wider}' MUST be >= '{narrower}' (funnel invariant)")
    return counts


def _options(params: dict[str, Any], strict: bool, notes: list[str]) -> None:
    """Options this server does not offer (spec §7.7): -32005 naming one when ``strict``, else
    dropped and noted (``'rerank' is not supported; ignored``); a ``unit`` other than
    :data:`_UNITS` likewise ("Requesting an unadvertised unit follows the usual strict rule",
    §7.7.2). The :data:`_UNREAD` params are noted, never refused."""
    unit = params.get("unit", _UNITS[0])
    if not isinstance(unit, str):
        raise _invalid("unit", "'unit' must be a string")
    if unit not in _UNITS:
        if strict:
            raise _unsupported("unit", unit)
        notes.append(f"unit {unit!r} is not supported; ignored")
    for option in _UNOFFERED:
        if params.get(option, False) is False:
            continue
        if strict:
            raise _unsupported(option, option)
        notes.append(f"'{option}' is not supported; ignored")
    notes.extend(
        f"'{name}' is not supported; ignored"
        for name in _UNREAD
        if params.get(name, False) is not False
    )


def _rfc3339(seconds: int) -> str | None:
    """Unix ``seconds`` as an RFC 3339 UTC time (``2026-01-31T00:00:00Z``), the one encoding
    of a point in time the RCP filter reads (spec §4.6), so a hit's ``meta.modified_at`` can
    be written back into a filter; ``None`` for a time outside years 1–9999 (an mtime a
    client set), which no RFC 3339 string holds."""
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return None


def _integer(name: str, value: Any) -> int:
    """``value`` as an integer as JSON counts one: ``10`` or ``10.0`` (as ``limit`` of
    ``POST /v1/search`` takes it), never ``10.5``, a string or a boolean (-32602 naming
    ``name``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(name, f"'{name}' MUST be an integer")
    return value


def _peer_info(params: dict[str, Any]) -> None:
    """Type-check ``initialize``'s ``client`` and ``capabilities`` (neither is read): the
    schema's InitializeParams (``schema/rcp-1.0.json`` of the 1ay1/rcp repository) makes
    ``client`` a PeerInfo, an object whose ``name`` and ``version`` are strings, and
    ``capabilities`` an object (spec §7.1: hints, none required, unknown keys ignored, so its
    members are not checked). A wrong type is -32602 naming ``client``, ``client.name``,
    ``client.version`` or ``capabilities``; ``null`` is absent (§4.6), as is a PeerInfo
    without ``name`` (the schema requires one; nothing here needs it)."""
    client = params.get("client")
    if client is not None:
        if not isinstance(client, dict):
            raise _invalid("client", "'client' must be an object")
        for key in ("name", "version"):
            value = client.get(key)
            if value is not None and not isinstance(value, str):
                raise _invalid(f"client.{key}", f"'client.{key}' must be a string")
    capabilities = params.get("capabilities")
    if capabilities is not None and not isinstance(capabilities, dict):
        raise _invalid("capabilities", "'capabilities' must be an object")


def _pong(params: dict[str, Any]) -> dict[str, Any]:
    """The ``ping`` result: the ``nonce`` echoed (spec §7.15), a string or a number (§7.15, the
    schema's PingParams), else -32602; a ``null`` nonce is absent (§4.6) and not echoed."""
    nonce = params.get("nonce")
    if nonce is None:
        return {}
    if isinstance(nonce, bool) or not isinstance(nonce, str | int | float):
        raise _invalid("nonce", "'nonce' must be a string or a number")
    return {"nonce": nonce}


def _query_text(query: Any, notes: list[str]) -> str:
    """A string, a text Content block, or a list of text blocks (joined by spaces). A block's
    key beyond ``type`` and ``text`` is ignored and named in ``notes`` (spec §4.6): one the
    Content block does not define (``query.lang``, ``query[1].x-hint``) as an unknown
    parameter, ``mimeType`` and ``data`` as not read for a text block. A ``uri`` is -32602:
    §4.8, servers "MUST treat a uri they will not or cannot fetch as -32602 rather than
    silently ignoring it", and this server fetches none."""
    if isinstance(query, str):
        return query
    blocks = query if isinstance(query, list) else [query] if isinstance(query, dict) else None
    if not blocks:
        raise _invalid("query", "'query' must be a string or text Content blocks")
    parts = []
    for i, block in enumerate(blocks):
        path = f"query[{i}]" if isinstance(query, list) else "query"
        if isinstance(block, dict):
            block = _present(block)
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid("query", "a Content block needs a 'type'")
        if block["type"] != "text":
            raise _unsupported("modality", block["type"])
        if "uri" in block:
            raise _invalid(f"{path}.uri", "a Content 'uri' is not fetched by this server")
        if not isinstance(block.get("text"), str):
            raise _invalid("query", "a text block needs a string 'text'")
        for key in sorted(set(block) - {"type", "text"}):
            if key in _CONTENT_KEYS:
                notes.append(f"'{path}.{key}' is not read for a text block; ignored")
            else:
                notes.append(f"unknown parameter '{path}.{key}' ignored")
        parts.append(block["text"])
    return " ".join(parts)


def _fusion(value: Any, notes: list[str]) -> str | None:
    """The fusion ``method`` of ``value`` (an object, or its method alone). ``weights``,
    ``rrfK`` and ``alpha`` are the server's, so ignored and noted; any other key is an
    unknown parameter, ignored and named in ``notes`` (spec §4.6)."""
    if value is None:
        return None
    if isinstance(value, dict):
        value = _present(value)
    method = value.get("method") if isinstance(value, dict) else value
    if not isinstance(method, str):
        raise _invalid("fusion.method", "'fusion.method' must be a string")
    if method not in FUSIONS:
        raise _unsupported("fusion.method", method)
    if isinstance(value, dict):
        notes.extend(
            f"unknown parameter 'fusion.{key}' ignored"
            for key in sorted(set(value) - {"method", *_FUSION_FIXED})
        )
        if _FUSION_FIXED & set(value):
            notes.append(
                f"fusion weights/rrfK/alpha are fixed by the server (RRF k={RRF_K}); ignored"
            )
    return method


def _present(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without its ``null`` members: spec §4.6, "An explicit null is only meaningful
    where a schema lists null as a permitted type; elsewhere a peer MUST treat null as absent"
    (no ``retrieve`` param, and no key of ``fusion``, ``_meta`` or a Content block, lists
    it)."""
    return {key: value for key, value in obj.items() if value is not None}


def _object(params: Any) -> dict[str, Any]:
    """``params`` when it is an object; else -32602 naming ``params``: spec §4.1, "params MUST
    be an object (RCP does not use positional parameters)", for every method."""
    if not isinstance(params, dict):
        raise _invalid("params", "'params' MUST be an object")
    return params


def _filter_error(exc: FilterError) -> RpcError:
    """The RCP error of a filter that cannot be used: ``OPTION_UNSUPPORTED`` for an operator
    not advertised, else ``INVALID_PARAMS``; ``data`` has its ``field``, ``code`` and
    ``detail``, the message its detail (and field, unless the detail names it)."""
    data = {"field": exc.field, "code": exc.code, "detail": exc.detail}
    if exc.option is not None:
        return RpcError(
            Errc.OPTION_UNSUPPORTED,
            f"operator {exc.option!r} not advertised",
            {**data, "option": exc.option},
        )
    where = "" if exc.field in exc.detail else f" ({exc.field})"
    return RpcError(Errc.INVALID_PARAMS, f"{exc.detail}{where}", data)


def _invalid(field_: str, message: str) -> RpcError:
    return RpcError(Errc.INVALID_PARAMS, message, {"field": field_})


def _unsupported(field_: str, option: str) -> RpcError:
    return RpcError(
        Errc.OPTION_UNSUPPORTED,
        f"{field_} {option!r} is not supported",
        {"field": field_, "option": option},
    )


def _not_unicode(id_: Any, where: str) -> dict[str, Any]:
    """The answer to a message holding a lone surrogate (``"\\ud800"`` in the JSON) at
    ``where`` (:func:`ncindex.strict_json.lone_surrogate_at`; the id is checked before):
    -32602 naming the parameter (``mode``, ``filter.and[0].value``, a key as
    ``x\\ud800``) when it is in ``params``, else -32600 naming the member (``method``);
    ``data.code`` is ``invalid_value`` (the filter's and REST's code). Refusing the message
    whole keeps every echo (``data.option``, ``usage.notes``, ``ping``'s ``nonce``) free of
    what strict JSON readers refuse (RFC 8259 §8.2)."""
    if where.startswith("params."):
        code, field_ = Errc.INVALID_PARAMS, where.removeprefix("params.")
    elif where == "params" or where.startswith("params["):  # params not an object (§4.1)
        code, field_ = Errc.INVALID_PARAMS, "params"
    else:
        code, field_ = Errc.INVALID_REQUEST, where
    said = f"'{field_}' is not valid Unicode (lone surrogate)"
    return _err(id_, code, said, {"field": field_, "code": "invalid_value"})


def _ok(id_: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _err(id_: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": error}


def _unauthorized(message: str) -> RpcError:
    """-32012 ``Unauthorized`` with ``data.field`` ``Authorization``: the credentials are the
    part of the request at fault, as REST's and MCP's 401 name that header in ``field``
    (spec §12.1 lets ``data`` carry ``field``; the SDK's ``Server`` sends none)."""
    return RpcError(Errc.UNAUTHORIZED, message, {"field": "Authorization"})


_METHOD = {"field": "method"}
_MESSAGE = {"field": "message"}
"""``data`` of a framing error (-32600, -32003, -32004): the member of the request at fault,
as -32602's ``data.field`` names a parameter (``message`` for the message itself, not an
object). The RCP SDK's ``Server`` sends no ``data`` with these; a client that reads
``data.field`` (REST's and MCP's ``field``) got nothing to say which member was wrong."""


def answerable_id(id_: Any) -> Any:
    """``id_`` when an answer can carry it: a number, or a string of valid Unicode (a lone
    surrogate, ``"\\ud800"`` in the JSON, would be echoed as one, which strict JSON readers
    refuse: RFC 8259 §8.2, "unpredictable"); else ``None``."""
    if isinstance(id_, str):
        try:
            id_.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return id_
    return id_ if isinstance(id_, int | float) and not isinstance(id_, bool) else None


_KNOWN_METHODS = frozenset(
    value
    for name, value in vars(rcp.Method).items()
    if not name.startswith("_") and isinstance(value, str)
)
