"""Nextcloud client on httpx: OCS, Notes API v1, WebDAV and webhook_listeners.

One pooled ``httpx.Client`` per process (:func:`make_http`, with an injectable transport so unit
tests use ``httpx.MockTransport``); a lightweight :class:`NextcloudClient` per user carries
that user's credentials. httpx errors and Nextcloud status codes are translated here into
:mod:`ncindex.errors` and nowhere else:

==============================  ==========================================
what happened                   raised
==============================  ==========================================
timeout, connection error       ``NextcloudUnavailable`` (``unreachable``:
                                no answer at all)
a header httpx refuses to send  ``NextcloudProtocolError`` (never echoing the header)
5xx, 423, 429                   ``NextcloudUnavailable`` (but ``FileUnavailable``
                                for a file's download answered 423 or
                                503 out of maintenance mode;
                                ``StorageUnavailable`` for another WebDAV
                                503 of a storage that cannot be reached)
401; a WebDAV 5xx of a login    ``NextcloudAuthError`` (``AccountDisabled`` for
refused (a disabled account)    the WebDAV 5xx; ``Forbidden`` for an app
                                API's CORS refusal of a Bearer token:
                                :data:`CORS_REFUSAL`)
404 (and 403 where a caller     ``NotFound``
says so, e.g. Deck)
other 403; a note answered     ``Forbidden``
with ``"error": true``
OCS 400 with a message          ``NextcloudRefused`` (``message`` is ``meta.message``)
other 4xx, unparsable body      ``NextcloudProtocolError``
==============================  ==========================================

Formats: reference/nextcloud-api.md §0 (OCS envelope), §1.1 (webhooks), §2 (Notes), §3 (WebDAV).
"""

from __future__ import annotations

import base64
import http.cookiejar
import threading
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from ncindex.errors import (
    AccountDisabled,
    FileUnavailable,
    Forbidden,
    NcindexError,
    NextcloudAuthError,
    NextcloudProtocolError,
    NextcloudRefused,
    NextcloudUnavailable,
    NotFound,
    StorageUnavailable,
    TooLarge,
)
from ncindex.nextcloud import webdav
from ncindex.nextcloud.families import endpoint_family
from ncindex.nextcloud.http_dates import http_date_seconds
from ncindex.nextcloud.webdav import DavEntry
from ncindex.settings import Settings

log = structlog.get_logger(__name__)

NOTES_API = "/index.php/apps/notes/api/v1"
WEBHOOKS_API = "/ocs/v2.php/apps/webhook_listeners/api/v1/webhooks"
SHARES_API = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
#: Headers of every JSON API request (OCS, Notes, Deck, News). ``OCS-APIRequest`` passes the
#: CSRF check (nextcloud/server ``lib/private/AppFramework/Http/Request.php``
#: ``passesCSRFCheck``, from nextcloud/server#46760), without which the apps' ``#[CORS]``
#: methods accept Basic auth only: ``CORSMiddleware::beforeController`` logs a Bearer caller
#: out and answers 401 "CORS requires basic auth" (:data:`CORS_REFUSAL`).
API_HEADERS = {"OCS-APIRequest": "true", "Accept": "application/json"}
#: ``message`` of ``CORSMiddleware::afterException``'s 401 (nextcloud/server#44365).
CORS_REFUSAL = "CORS requires basic auth"

CONFIRM_SECONDS = 2.0
"""The timeout of :meth:`NextcloudClient.confirm`'s request, seconds (in place of the HTTP
client's ``http_timeout``): its answer stands when none comes, so a Nextcloud that stalls
delays it no longer than a search page list's check (``ncindex.search.facets.CHECK_SECONDS``)."""


def early_confirm_seconds(timeout: float) -> float:
    """How long :meth:`NextcloudClient.confirming_early` waits for an answer confirming the
    credential before it sends :meth:`~NextcloudClient.confirm`'s question alongside the
    checks still under way, seconds, for a client whose requests time out after ``timeout``
    seconds: half of it, or as long as still ends the question (:data:`CONFIRM_SECONDS`)
    with that timeout, whichever is later — a Nextcloud answering within half its timeout is
    never asked more, and one stalled whole costs the search its timeout, or half of it plus
    :data:`CONFIRM_SECONDS` when that is longer (``http_timeout`` 10 s: 10 s, was 12; 2 s:
    3 s, was 4), not the two one after the other."""
    return max(timeout / 2, timeout - CONFIRM_SECONDS)


PUBLIC_PATHS = frozenset({"/ocs/v2.php/cloud/capabilities"})
"""Paths this client asks that Nextcloud answers without a login (nextcloud/server
``core/Controller/OCSController.php`` ``getCapabilities`` is a ``#[PublicPage]``): their
answer says nothing of the credential sent, so it never runs :attr:`NextcloudClient.accepted`."""


def make_http(settings: Settings, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The process's pooled client for ``settings.nextcloud_url``.

    Timeouts are ``settings.http_timeout`` seconds; ``transport`` replaces the network (tests).
    The client is shared by every caller and account, so its cookie jar stores nothing: a
    session cookie Nextcloud sets on one user's request is never sent with another's.
    Raises ``ValueError`` when no Nextcloud URL is configured.
    """
    if not settings.nextcloud_url:
        raise ValueError("NCINDEX_NEXTCLOUD_URL is not set")
    return httpx.Client(
        base_url=settings.nextcloud_url,
        timeout=httpx.Timeout(settings.http_timeout),
        limits=httpx.Limits(max_connections=settings.http_max_connections),
        verify=settings.verify_tls,
        transport=transport,
        headers={"User-Agent": "ncindex"},
        follow_redirects=False,
        cookies=http.cookiejar.CookieJar(policy=_RefuseAll()),
    )


class _RefuseAll(http.cookiejar.DefaultCookiePolicy):
    """A cookie policy that accepts no cookie (and so never returns one)."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


@contextmanager
def _transport_errors(method: str, url: str) -> Iterator[None]:
    """Translate httpx's transport errors inside the block (see the module table): no
    answer (refused, reset, timed out) is ``NextcloudUnavailable`` with ``unreachable``."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise NextcloudUnavailable(f"{method} {url}: timed out", unreachable=True) from exc
    except httpx.LocalProtocolError as exc:  # its text quotes the header: never echo it
        raise NextcloudProtocolError(f"{method} {url}: request not sendable") from exc
    except httpx.TransportError as exc:
        raise NextcloudUnavailable(f"{method} {url}: {exc}", unreachable=True) from exc


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A ``Retry-After`` header (RFC 9110 §10.2.3: delay seconds or an HTTP date) as seconds
    from ``now`` (Unix seconds; default the clock), at least 0; ``None`` when absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = http_date_seconds(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


class HeaderAuth(httpx.Auth):
    """Sends a caller's ``Authorization`` header unchanged (Basic or Bearer) — the search API
    acts with the searching user's own credentials."""

    def __init__(self, authorization: str) -> None:
        self._value = authorization

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._value
        yield request


def basic_login(authorization: str | None) -> str:
    """The login name of a ``Basic`` ``Authorization`` header (RFC 7617: ``Basic
    base64(login:password)``), ``""`` for another scheme, no header, or one that does not
    decode."""
    scheme, _, credential = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(credential.strip(), validate=True).decode().partition(":")[0]
    except (ValueError, UnicodeDecodeError):
        return ""


@dataclass(frozen=True, slots=True)
class Note:
    """A note from the Notes API v1 (reference §2); ``modified`` is Unix seconds, ``etag`` the
    note's 32-hex etag, ``internal_path`` relative to the user folder (``/Notes/Work/Plan.md``)."""

    id: int
    title: str
    content: str
    category: str
    modified: int
    etag: str
    internal_path: str
    readonly: bool

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Note:
        """Build from the Notes API JSON; raises ``NextcloudProtocolError`` on a missing field."""
        try:
            return cls(
                id=int(data["id"]),
                title=str(data["title"]),
                content=str(data.get("content") or ""),
                category=str(data.get("category") or ""),
                modified=int(data["modified"]),
                etag=str(data["etag"]),
                internal_path=str(data.get("internalPath") or ""),
                readonly=bool(data.get("readonly", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NextcloudProtocolError(f"bad note JSON: {exc}") from exc


#: The Notes version from which its list leaves out notes in hidden folders (nextcloud/notes
#: ``lib/Service/NotesService.php`` ``gatherNoteFiles`` skips a folder whose name starts with
#: ``.``: commit 33d9d402, released in 6.0.2).
NOTES_HIDING_DOT_FOLDERS = (6, 0, 2)


@dataclass(frozen=True, slots=True)
class NotesSettings:
    """A user's Notes app settings: notes folder (relative to files root; ``""`` is the root
    itself) and the suffix of
    new notes (``.md``, ``.txt`` or the user's own, which also makes a file a note); and
    ``hides_dot_folders``: whether the Notes app leaves notes in a folder whose name starts
    with ``.`` out of its list (from :data:`NOTES_HIDING_DOT_FOLDERS`)."""

    notes_path: str
    file_suffix: str
    hides_dot_folders: bool = True


def version_tuple(version: str) -> tuple[int, ...]:
    """A dotted version's numbers: each part's leading digits, 0 where it has none
    (``"6.0.2-rc1"`` → ``(6, 0, 2)``, ``"1.18.0"`` → ``(1, 18, 0)``)."""
    parts = []
    for part in version.split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        parts.append(int(digits or 0))
    return tuple(parts)


_NO_SUCH_USER = "User does not exist"
"""``meta.message`` of the OCS 404 ``getUserData`` answers for a user id Nextcloud does not know
(nextcloud/server ``apps/provisioning_api/lib/Controller/AUserDataOCSController.php``)."""


class NextcloudClient:
    """One user's view of Nextcloud.

    ``user`` is the Nextcloud user id the credentials belong to (``None`` until
    :meth:`current_user` resolved it, for callers authenticated by header).
    """

    def __init__(self, http: httpx.Client, auth: httpx.Auth, user: str | None = None) -> None:
        self.http = http
        self.auth = auth
        self.user = user
        #: Called once before this client's first request; what it raises is raised instead
        #: of sending anything (``ncindex.runtime.Services.account`` holds back a credential
        #: Nextcloud refused lately). ``None``: nothing to check.
        self.guard: Callable[[], None] | None = None
        #: Called once after the first answer that shows Nextcloud accepted the credential
        #: (2xx, 207 or 304 from a path not in :data:`PUBLIC_PATHS`); ``None``: nothing to
        #: do. :attr:`guard` sets it when it found a refusal entry for this credential's
        #: account, to clear it (``ncindex.runtime.Services.account``). What it raises is
        #: raised in place of the answer; it should not raise.
        self.accepted: Callable[[], None] | None = None
        #: The address of the person this client acts for (a search caller), sent as
        #: ``X-Forwarded-For``; ``None`` for a configured account (the work is ncindex's own).
        #: Nextcloud reads it only from an address in its ``trusted_proxies``
        #: (nextcloud/server ``lib/private/AppFramework/Http/Request.php``
        #: ``getRemoteAddress``: the right-most address of ``forwarded_for_headers`` that is no
        #: trusted proxy), and then charges a refused login to the caller's address in its
        #: brute-force protection (``Session::logClientIn`` → ``Throttler::registerAttempt``)
        #: instead of ncindex's, whose every other login it would slow down.
        self.forwarded_for: str | None = None
        #: ``False`` while Nextcloud's acceptance of this client's credential is taken on
        #: trust: set so for a caller taken from the credential cache
        #: (``ncindex.web.auth.resolve_caller``), until an answer shows it (2xx, 207 or 304
        #: from a path not in :data:`PUBLIC_PATHS`, as :attr:`accepted`); :meth:`confirm`
        #: asks then. An app API's CORS refusal of a Bearer token (:data:`CORS_REFUSAL`)
        #: shows nothing: nextcloud/server
        #: ``lib/private/AppFramework/Middleware/Security/CORSMiddleware.php``
        #: ``beforeController`` logs the session out and logs in again from Basic credentials
        #: (``PHP_AUTH_USER``/``PHP_AUTH_PW``) alone, so that 401 is the same for a good token
        #: and a revoked one and says nothing of it. :meth:`confirm` also sets it after asking
        #: once and getting no answer (fail-open), so that one request asks at most once.
        self.confirmed = True
        #: Whether a request that got no answer at all stops this client's later requests to
        #: the same part of Nextcloud (:meth:`_sending`): each later request raises such a
        #: failure unsent. A timeout at the client's full ``http_timeout`` stops the requests
        #: of its endpoint family (:func:`~ncindex.nextcloud.families.endpoint_family`: the
        #: DAV server, an app's routes, the other OCS routes …; :attr:`stalled`), which can
        #: stall on its own while the rest answers — a Deck slow to build a big board stops
        #: the Deck checks, not the files' and notes'; a connection that could not be made
        #: (refused, no route, a connect timeout) is the server itself and stops every request
        #: (:attr:`unanswered`). Off by default; on for a client whose requests all serve one
        #: HTTP request of a caller (the one ``ncindex.web.auth.resolve_caller`` makes for a
        #: REST call, an MCP POST, an RCP batch), so that a Nextcloud that stalls costs that
        #: request at most one timeout per family it asks (those asked at once share it), not
        #: one per request it would send; never on for a client that serves many (a worker's,
        #: a service account's: it would stay stopped). Each later failure is met as a
        #: timed-out request's would be (a search keeps its candidates unconfirmed, a
        #: confirmation's answer stands), only without the wait.
        self.stop_when_unanswered = False
        #: The failure of a connection that could not be made, which stopped every request
        #: of this client (:attr:`stop_when_unanswered`), else ``None``.
        self.unanswered: NextcloudUnavailable | None = None
        #: Endpoint family → the timeout that stopped its requests
        #: (:attr:`stop_when_unanswered`); written by the verifier's threads too.
        self.stalled: dict[str, NextcloudUnavailable] = {}
        #: The timer of :meth:`confirming_early`, until :meth:`confirm` takes it; the refusal
        #: its question met, for :meth:`confirm` to raise.
        self._early: threading.Timer | None = None
        self._early_refusal: NextcloudAuthError | None = None

    def _forward(self, kwargs: dict[str, Any]) -> None:
        """Add ``X-Forwarded-For`` (:attr:`forwarded_for`) to a request's ``headers``."""
        if self.forwarded_for:
            kwargs["headers"] = {
                **dict(kwargs.get("headers") or {}),
                "X-Forwarded-For": self.forwarded_for,
            }

    def _guarded(self, url: str) -> None:
        """Run :attr:`guard` before the first request (once it passed, not again); raise
        ``NextcloudUnavailable`` (``unreachable``) instead of sending anything to ``url`` once
        a request got no answer (:attr:`unanswered`, or :attr:`stalled` for ``url``'s
        family)."""
        # a new exception per request: verifier threads raise it too
        if self.unanswered is not None:
            raise NextcloudUnavailable(f"not sent: {self.unanswered}", unreachable=True)
        stalled = self.stalled.get(self._family(url)) if self.stalled else None
        if stalled is not None:
            raise NextcloudUnavailable(f"not sent: {stalled}", unreachable=True)
        if self.guard is not None:
            self.guard()
            self.guard = None

    def _family(self, url: str) -> str:
        """The endpoint family of ``url`` (:func:`~ncindex.nextcloud.families.endpoint_family`):
        a relative URL is below the web root already (``httpx``'s ``base_url``); an absolute
        one's path loses the web root first."""
        target = httpx.URL(url)
        path = target.path
        root = self.web_root
        if target.is_absolute_url and root and (path == root or path.startswith(root + "/")):
            path = path[len(root) :]
        return endpoint_family(path)

    @contextmanager
    def _sending(self, method: str, url: str, timeout: Any = None) -> Iterator[None]:
        """:func:`_transport_errors`, and :meth:`_stop` at a failure without an answer when
        :attr:`stop_when_unanswered`; ``timeout`` is the request's own (``httpx``'s
        ``timeout`` argument; ``None``: the client's)."""
        try:
            with _transport_errors(method, url):
                yield
        except NextcloudUnavailable as exc:
            if self.stop_when_unanswered:
                self._stop(exc, url, timeout)
            raise

    def _stop(self, exc: NextcloudUnavailable, url: str, timeout: Any) -> None:
        """Keep the first failure without an answer (``exc``, raised by :meth:`_sending` for
        a request to ``url``): a connection that could not be made (``httpx.ConnectError``:
        refused, no route, a name that does not resolve; or ``httpx.ConnectTimeout``) as
        :attr:`unanswered`, which stops every request — no part of Nextcloud answers through
        it; another timeout as :attr:`stalled` for ``url``'s family alone, which stops the
        requests of that family. Neither for a request given a ``timeout`` of its own shorter
        than the client's: :meth:`confirm` waits :data:`CONFIRM_SECONDS`, and a Nextcloud
        slower than that but answering within ``http_timeout`` stopped an RCP batch's client
        after a cached credential's confirmation, every later check unsent. A connection reset
        or closed mid-exchange (``httpx.ReadError``, ``RemoteProtocolError``) stops nothing:
        it also happens to one request of a Nextcloud that answers (a keep-alive connection
        its web server closed as it was reused), and would leave the request's other checks
        unsent."""
        cause = exc.__cause__
        if isinstance(cause, httpx.ConnectError):
            self.unanswered = self.unanswered or exc
            return
        usual = self.http.timeout.read
        own = usual if timeout is None else httpx.Timeout(timeout).read
        if not isinstance(cause, httpx.TimeoutException) or (
            own is not None and (usual is None or own < usual)
        ):
            return
        if isinstance(cause, httpx.ConnectTimeout):
            self.unanswered = self.unanswered or exc
        else:
            self.stalled.setdefault(self._family(url), exc)

    def _accepted(self, url: str) -> None:
        """Set :attr:`confirmed` and run :attr:`accepted` (once) after an answer from ``url``
        that passed :meth:`_check`, unless ``url`` is a public path (:data:`PUBLIC_PATHS`)."""
        if urllib.parse.urlsplit(url).path in PUBLIC_PATHS:
            return
        self.confirmed = True
        if self.accepted is not None:
            accepted, self.accepted = self.accepted, None
            accepted()

    @property
    def web_root(self) -> str:
        """The path of the Nextcloud URL (``/nextcloud`` for a sub-path install, else ``""``):
        requests are relative to it (httpx's ``base_url``), hrefs in answers start with it."""
        return self.http.base_url.path.rstrip("/")

    @classmethod
    def for_account(
        cls, http: httpx.Client, user: str, password: str, *, login: str | None = None
    ) -> NextcloudClient:
        """Client for configured account ``user`` (a user id): Basic auth with ``login`` (its
        login name, default the user id) and its app password. Nextcloud accepts an app
        password only with the login name it was created under (``Session.php``,
        ``validateTokenLoginName``), while WebDAV paths name the user id."""
        return cls(http, httpx.BasicAuth(login or user, password), user)

    # --- transport ----------------------------------------------------------------------

    def request(
        self,
        method: str,
        url: str,
        *,
        not_found: tuple[int, ...] = (404,),
        refused: Callable[[httpx.Response], bool] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send one request and translate failures (see the module table). Statuses in
        ``not_found`` raise ``NotFound``; an answer ``refused`` says yes to raises
        ``Forbidden``, whatever its status; 2xx, 207 and 304 are returned."""
        self._guarded(url)
        self._forward(kwargs)
        with self._sending(method, url, kwargs.get("timeout")):
            response = self.http.request(method, url, auth=self.auth, **kwargs)
        if refused is not None and refused(response):
            if response.status_code == 400:
                raise NextcloudRefused(f"{method} {url}", 400, _ocs_message(response))
            raise Forbidden(f"{method} {url}: HTTP {response.status_code}, access refused")
        self._check(method, url, response, not_found)
        self._accepted(url)
        return response

    @contextmanager
    def stream(
        self, method: str, url: str, *, one_file: bool = False, **kwargs: Any
    ) -> Iterator[httpx.Response]:
        """Like :meth:`request` but the body is streamed (``response.iter_bytes()``).
        ``one_file``: the request reads one file's bytes, so a 423 or a 503 out of maintenance
        mode raises ``FileUnavailable`` (see :meth:`download`)."""
        self._guarded(url)
        self._forward(kwargs)
        with (
            self._sending(method, url, kwargs.get("timeout")),
            self.http.stream(method, url, auth=self.auth, **kwargs) as response,
        ):
            self._check(method, url, response, (404,), one_file=one_file)
            self._accepted(url)
            yield response

    def _check(
        self,
        method: str,
        url: str,
        response: httpx.Response,
        not_found: tuple[int, ...],
        *,
        one_file: bool = False,
    ) -> None:
        status = response.status_code
        if status < 300 or status == 304:
            return
        where = f"{method} {url}: HTTP {status}"
        if status in not_found:
            raise NotFound(where)
        body = _error_body(response) if status >= 500 else None
        if body is not None and webdav.login_refused(body):
            # the credentials are right but the account may not log in (disabled): DAV says
            # so with a 503, which is no outage — retrying cannot help, and a search must not
            # go on unverified as if Nextcloud were down
            raise AccountDisabled(where + " (login refused: account disabled)")
        maintenance = response.headers.get("X-Nextcloud-Maintenance-Mode") == "1"
        if (
            status == 503
            and not one_file
            and not maintenance
            and body is not None
            and webdav.storage_unavailable(body)
        ):
            # apps/dav/lib/Connector/Sabre/ObjectTree.php getNodeForPath: the path lies on
            # a storage that cannot be reached (an external storage, a federated share)
            raise StorageUnavailable(where + f" ({webdav.STORAGE_UNAVAILABLE})")
        if one_file and status in (423, 503) and not maintenance:
            # apps/dav/lib/Connector/Sabre/File.php get: FileLocked (423) for a
            # LockedException, ServiceUnavailable (503) for a file it cannot open, whose
            # encryption is not ready or whose storage is away: this file, not Nextcloud
            raise FileUnavailable(where)
        if status == 401:
            if _cors_refused_bearer(response):
                # this app's API takes Basic auth only on this server: Nextcloud refuses a
                # Bearer token here whether it is good or revoked (confirm asks OCS)
                raise Forbidden(where + f" ({CORS_REFUSAL}: Bearer refused)")
            raise NextcloudAuthError(where)
        if status >= 500 or status in (423, 429):
            # maintenance mode: nextcloud/server lib/base.php, OC::checkMaintenanceMode
            # answers 503 with "X-Nextcloud-Maintenance-Mode: 1" and "Retry-After: 120"
            raise NextcloudUnavailable(
                where + (" (maintenance mode)" if maintenance else ""),
                retry_after=retry_after_seconds(response.headers.get("Retry-After")),
                maintenance=maintenance,
            )
        if status == 403:
            raise Forbidden(where)
        raise NextcloudProtocolError(where)

    # --- OCS ----------------------------------------------------------------------------

    def ocs(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call an OCS v2 endpoint with JSON and return the envelope's ``data``; an OCS 400
        (``OCSBadRequestException``) raises ``NextcloudRefused`` with Nextcloud's reason."""
        response = self.request(
            method, path, headers=API_HEADERS, refused=_ocs_bad_request, **kwargs
        )
        try:
            return response.json()["ocs"]["data"]
        except (ValueError, KeyError, TypeError) as exc:
            raise NextcloudProtocolError(f"{path}: not an OCS JSON envelope") from exc

    def user_exists(self, uid: str) -> bool:
        """Whether Nextcloud has a user ``uid`` (:meth:`user_account` is not ``None``); raises
        as it does."""
        return self.user_account(uid) is not None

    def user_account(self, uid: str, timeout: float | None = None) -> dict[str, Any] | None:
        """Nextcloud's data of user ``uid``, asked with these credentials (an admin's: the
        webhook admin) through ``GET /ocs/v2.php/cloud/users/{uid}``, or ``None`` when there is
        no such user. The data is ``getUserData``'s object: ``id`` always, and ``enabled`` (a
        JSON boolean: ``IConfig::getUserValue($uid, 'core', 'enabled', 'true') === 'true'``)
        only for an admin, a delegated admin of the Users setting
        (``IGroupManager::isDelegatedAdmin``) or a subadmin of a group of the user
        (``ISubAdmin::isUserAccessible``); a user asking of themselves gets no ``enabled``.

        nextcloud/server ``apps/provisioning_api/lib/Controller/UsersController.php``
        ``getUser`` → ``AUserDataOCSController::getUserData``, which looks the user up
        (``IUserManager::get``) before anything else and throws
        ``OCSNotFoundException('User does not exist')`` when there is none: OCS
        ``meta.statuscode`` 404, mirrored as HTTP 404 under v2 (``V2Response``; under v1 the
        HTTP status is 200). That answer alone — an OCS JSON envelope whose
        ``meta.statuscode`` is 404 — returns ``None``. OCS 998 is not such an answer, though
        v2 mirrors it as HTTP 404 too: ``getUser`` throws it for a user these credentials may
        not see (``getUserData`` returned null: no admin), and it is the answer of an unknown
        route (provisioning_api disabled). A user that exists returns its data (HTTP 200).
        The message must be ``User does not exist`` too: ``getUserData`` throws it as a PHP
        literal, not through ``IL10N::t``, so no admin's language changes it. For an admin
        ``getUserData`` also throws ``OCSNotFoundException`` with the message of a
        ``NoUserException`` from ``IUser::getHome`` — a user that exists in Nextcloud (an LDAP
        user no longer found in LDAP keeps their files and shares until an admin deletes
        them), so that OCS 404 is not ``None``. Everything else raises, never ``None``:
        ``NextcloudAuthError`` when these credentials are refused (401);
        ``NextcloudUnavailable`` for a timeout or 5xx; ``NextcloudProtocolError`` for any other
        answer (OCS 998 included). ``timeout``: seconds (default: the HTTP client's)."""
        path = "/ocs/v2.php/cloud/users/" + urllib.parse.quote(uid, safe="")
        data = self._ocs_object(
            path, lambda code, message: code == 404 and message == _NO_SUCH_USER, timeout
        )
        if data is not None and "id" not in data:
            raise NextcloudProtocolError(f"GET {path}: the answer names no user")
        return data

    def _ocs_object(
        self, path: str, missing: Callable[[Any, Any], bool], timeout: float | None = None
    ) -> dict[str, Any] | None:
        """The ``data`` object of ``GET path`` (an OCS v2 route), or ``None`` when Nextcloud
        answers HTTP 404 with an OCS JSON envelope whose ``meta.statuscode`` and
        ``meta.message`` ``missing`` says yes to (its answer for an object that does not
        exist). Any other 404 — no OCS envelope; OCS 998, the answer of a route not served (its
        app disabled) — and an answer whose ``data`` is no object raise
        ``NextcloudProtocolError``; the rest raises as :meth:`request` does. ``timeout``:
        seconds (default: the HTTP client's)."""
        where = f"GET {path}"
        self._guarded(path)
        kwargs: dict[str, Any] = {"headers": API_HEADERS}
        if timeout is not None:
            kwargs["timeout"] = timeout
        self._forward(kwargs)
        with self._sending("GET", path, timeout):
            response = self.http.request("GET", path, auth=self.auth, **kwargs)
        if response.status_code == 404:
            try:
                meta = response.json()["ocs"]["meta"]
                code, message = meta["statuscode"], meta.get("message")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise NextcloudProtocolError(f"{where}: HTTP 404, not an OCS envelope") from exc
            if missing(code, message):
                return None
            raise NextcloudProtocolError(f"{where}: HTTP 404, OCS status {code!r}: {message!r}")
        self._check("GET", path, response, ())
        self._accepted(path)
        try:
            data = response.json()["ocs"]["data"]
        except (ValueError, KeyError, TypeError) as exc:
            raise NextcloudProtocolError(f"{where}: not an OCS JSON envelope") from exc
        if not isinstance(data, dict):
            raise NextcloudProtocolError(f"{where}: the answer is not an object")
        return data

    def current_user(self, timeout: float | None = None) -> str:
        """Resolve the credentials' user id through ``GET /ocs/v2.php/cloud/user``; sets
        :attr:`user`. ``timeout``: seconds (default: the HTTP client's). Raises
        ``NextcloudAuthError`` for bad credentials."""
        kwargs: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        data = self.ocs("GET", "/ocs/v2.php/cloud/user", **kwargs)
        try:
            self.user = str(data["id"])
        except (KeyError, TypeError) as exc:
            raise NextcloudProtocolError("cloud/user answer has no id") from exc
        return self.user

    def confirm(self) -> None:
        """Make sure Nextcloud still accepts this client's credential before an answer given as its
        user: when no answer has shown it (:attr:`confirmed` is ``False``: a caller taken
        from the credential cache whose request asked Nextcloud nothing, or only an app's
        ``#[CORS]`` API that refused a Bearer token whatever it is), ask ``GET
        /ocs/v2.php/cloud/user`` (:meth:`current_user`, within :data:`CONFIRM_SECONDS`).
        That route is no ``#[CORS]`` one: nextcloud/server ``lib/private/User/Session.php``
        ``tryTokenLogin`` checks a Bearer token (``validateToken``), ``tryBasicAuthLogin``
        an app password, and ``apps/provisioning_api/lib/Controller/UsersController.php``
        ``getCurrentUser`` throws ``RESPOND_UNAUTHORISED`` when neither logged anyone in.
        Nothing is asked once confirmed. Raises ``NextcloudAuthError`` when Nextcloud
        refuses the credential; any other failure (Nextcloud unreachable, an answer not its
        format) is logged and the answer stands, as a search keeps a result whose check
        failed so (fail-open), and is not asked again by this client (an MCP search tool
        confirms in the search and after it: a Nextcloud that does not answer was waited for
        twice). It is asked too when every request of this client timed out (:attr:`stalled`)
        before any got an answer: a part of Nextcloud that stalls in front of its login check
        (a Deck whose PHP-FPM pool is stuck) leaves a revoked credential unrefused, as
        Nextcloud logs a caller in before any app runs (nextcloud/server ``lib/base.php``
        ``OC::handleRequest`` calls ``handleLogin`` before the router's ``match``;
        ``ocs/v1.php`` likewise before ``match('/ocsapp' …)``; ``remote.php`` serves the DAV
        server, whose ``Connector/Sabre/Auth.php`` ``validateUserPass`` runs before any
        method), so only an answer of another family tells. Not when the OCS family itself is
        stopped (it stalled, or no connection could be made: :meth:`_guarded` sends nothing),
        when the answer stands likewise. The question may have gone out already, alongside
        checks that got no answer in time (:meth:`confirming_early`): then its answer is
        waited for and taken as here, so a Nextcloud stalled whole costs a search about the
        longer of its checks' timeout and the question's, not the two one after the other."""
        early, self._early = self._early, None
        if early is not None:
            early.cancel()  # not fired yet: asked below, as it would have been
            if not self.confirmed:
                early.join()  # fired: its question's answer (cancelled: at once)
        refusal, self._early_refusal = self._early_refusal, None
        if refusal is not None and not self.confirmed:
            raise refusal
        if self.confirmed:
            return
        self._ask()

    @contextmanager
    def confirming_early(self) -> Iterator[None]:
        """Within this block (a search's checks), when no answer has confirmed the credential
        (:attr:`confirmed`) after :func:`early_confirm_seconds` of the client's read timeout,
        send :meth:`confirm`'s question (OCS ``cloud/user``) at once in a thread of its own,
        beside the checks still waiting (each of which holds a verifier thread): a Nextcloud
        answering them in time is asked nothing more, and :meth:`confirm` after the block
        waits for that question's answer instead of asking it after the checks' timeout. A
        refusal it meets is raised by :meth:`confirm`. Leaving the block stops a timer that
        has not fired (so a search failing meanwhile sends nothing more); nothing is armed
        for a client confirmed already or without a read timeout."""
        usual = None if self.confirmed else self.http.timeout.read
        if usual is None:
            yield
            return
        timer = threading.Timer(early_confirm_seconds(usual), self._ask_early)
        timer.daemon = True
        if self._early is not None:  # a block before whose confirm() never came (it failed)
            self._early.cancel()
        self._early = timer
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _ask_early(self) -> None:
        """:meth:`_ask` in :meth:`confirming_early`'s timer, unless confirmed meanwhile; a
        refusal is kept for :meth:`confirm` to raise."""
        if self.confirmed:
            return
        try:
            self._ask()
        except NextcloudAuthError as exc:
            self._early_refusal = exc

    def _ask(self) -> None:
        """Ask OCS ``cloud/user`` within :data:`CONFIRM_SECONDS` (:meth:`confirm`): raises
        ``NextcloudAuthError`` for a refusal; another failure is logged and the answer stands
        (fail-open: :attr:`confirmed` set, not asked again)."""
        try:
            self.current_user(timeout=CONFIRM_SECONDS)
        except NextcloudAuthError:
            raise
        except NcindexError as exc:
            log.warning("credential_not_confirmed", error=str(exc))
            self.confirmed = True  # fail-open: the answer stands, and is not asked about again

    # --- Notes API v1 -------------------------------------------------------------------

    def get_note(self, note_id: int, etag: str | None = None) -> Note | None:
        """``GET /notes/{id}``; with ``etag`` (the note etag held) a conditional GET that
        returns ``None`` when Nextcloud answers 304 (unchanged). Raises ``NotFound`` when it is
        not a note the user can see (Notes answers 404 ``{"errorType":"Exception"}``), and
        ``Forbidden`` when its content cannot be read: nextcloud/notes ``lib/Service/Note.php``
        ``getData`` answers such a note with HTTP 200, ``"error": true``, the exception's
        class in ``errorType`` and an error text as ``content``."""
        headers = API_HEADERS | ({"If-None-Match": f'"{etag}"'} if etag else {})
        response = self.request("GET", f"{NOTES_API}/notes/{int(note_id)}", headers=headers)
        if response.status_code == 304:
            return None
        data = json_object(response)
        if data.get("error") is True:
            # Note::getData caught the content's exception (NotPermittedException when a
            # files_accesscontrol rule removes read permission) and answered 200 anyway
            raise Forbidden(f"note {int(note_id)}: content unreadable ({data.get('errorType')})")
        return Note.from_json(data)

    def notes_settings(self) -> NotesSettings:
        """``GET /settings``: the user's notes folder and file suffix (nextcloud/notes
        ``SettingsService::getPublic``: a custom suffix in place of ``custom``; a
        ``notesPath`` of ``""`` is the user's files root — the ``notesPath`` validator of
        ``SettingsService::__construct`` drops the empty parts of ``/``, and
        ``NoteUtil::getOrCreateNotesFolder`` takes ``$userFolder->get("")``, the root itself;
        ``Notes`` only when the answer has no ``notesPath``); and from the
        user's capabilities (``GET /ocs/v2.php/cloud/capabilities``, ``notes.version``:
        nextcloud/notes ``lib/AppInfo/Capabilities.php``) whether the Notes list hides notes
        in dot-folders (an unknown version is taken as a current one)."""
        data = _json(self.request("GET", f"{NOTES_API}/settings", headers=API_HEADERS))
        capabilities = self.ocs("GET", "/ocs/v2.php/cloud/capabilities")
        apps = capabilities.get("capabilities") if isinstance(capabilities, dict) else None
        notes = apps.get("notes") if isinstance(apps, dict) else None
        version = str(notes.get("version") or "") if isinstance(notes, dict) else ""
        path = data.get("notesPath")
        return NotesSettings(
            notes_path=(path if isinstance(path, str) else "Notes").strip("/"),
            file_suffix=str(data.get("fileSuffix") or ".md"),
            hides_dot_folders=not version or version_tuple(version) >= NOTES_HIDING_DOT_FOLDERS,
        )

    # --- WebDAV -------------------------------------------------------------------------

    def _me(self) -> str:
        if self.user is None:
            raise ValueError("user id unknown: call current_user() first")
        return self.user

    def propfind(
        self, path: str, depth: int = 1, *, timeout: float | None = None
    ) -> list[DavEntry]:
        """PROPFIND ``path`` (relative to the files root) with ``Depth`` 0 or 1; the first
        entry is ``path`` itself. Raises ``NotFound`` when it does not exist for this user.
        ``timeout`` (seconds) replaces ``settings.http_timeout`` for this request."""
        user = self._me()
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        response = self.request(
            "PROPFIND",
            webdav.file_url_path(user, path),
            headers={"Depth": str(depth), "Content-Type": "application/xml; charset=utf-8"},
            content=webdav.PROPFIND_BODY,
            **extra,
        )
        return webdav.parse_multistatus(response.content, user, self.web_root)

    def find_by_id(self, file_id: int) -> DavEntry:
        """WebDAV SEARCH for ``file_id`` in this user's view (reference §3.4); raises
        ``NotFound`` when the user cannot see it (Nextcloud answers an empty multistatus). Of
        several entries (a file the user reaches through several mounts), the first one
        :func:`readable <ncindex.nextcloud.webdav.preferred>` wins.

        A 404 answer is ``NextcloudProtocolError``, not ``NotFound``: it says the search's
        scope (``/files/<user>``) was not found, nothing of the file — nextcloud/server
        ``apps/dav/lib/Files/FileSearchBackend.php`` ``search`` answers an id outside the
        user's view with an empty result, not a 404 — and callers evict on ``NotFound``
        (``Indexer.index_node``; ``viewers_of``, for every holder of the file)."""
        user = self._me()
        response = self.request(
            "SEARCH",
            "/remote.php/dav/",
            not_found=(),
            headers={"Content-Type": "text/xml; charset=utf-8"},
            content=webdav.search_by_fileid_body(user, file_id),
        )
        entries = [
            e for e in webdav.parse_multistatus(response.content, user, self.web_root) if e.file_id
        ]
        if not entries:
            raise NotFound(f"file {file_id} is not visible to {user}")
        return webdav.preferred(entries)

    def find_by_ids(self, file_ids: Sequence[int]) -> dict[int, DavEntry]:
        """File id → entry of each of ``file_ids`` this user can see, by WebDAV SEARCH (one
        request per :data:`~ncindex.nextcloud.webdav.MAX_FILEIDS_PER_SEARCH` ids, their
        ``oc:fileid`` equalities inside ``d:or``); an id the user cannot see is absent, as
        nextcloud/server ``apps/dav/lib/Files/FileSearchBackend.php`` ``search`` answers only
        the caller's view. An id answered several times (through several mounts) is
        :func:`~ncindex.nextcloud.webdav.preferred`'s pick of its entries."""
        user = self._me()
        wanted = list(dict.fromkeys(int(i) for i in file_ids))
        asked = set(wanted)
        found: dict[int, list[DavEntry]] = {}
        for start in range(0, len(wanted), webdav.MAX_FILEIDS_PER_SEARCH):
            response = self.request(
                "SEARCH",
                "/remote.php/dav/",
                headers={"Content-Type": "text/xml; charset=utf-8"},
                content=webdav.search_by_fileids_body(
                    user, wanted[start : start + webdav.MAX_FILEIDS_PER_SEARCH]
                ),
            )
            for entry in webdav.parse_multistatus(response.content, user, self.web_root):
                if entry.file_id is not None and entry.file_id in asked:
                    found.setdefault(entry.file_id, []).append(entry)
        return {file_id: webdav.preferred(entries) for file_id, entries in found.items()}

    def system_tags(self, *, timeout: float | None = None) -> dict[int, str]:
        """The system tags this user can see: id → name (``PROPFIND
        /remote.php/dav/systemtags/``, ``Depth: 1``; nextcloud/server
        ``apps/dav/lib/SystemTag/SystemTagsByIdCollection.php`` ``getChildren`` lists the
        user-visible tags, every tag for an admin). ``timeout`` (seconds) replaces
        ``settings.http_timeout`` for this request."""
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        response = self.request(
            "PROPFIND",
            "/remote.php/dav/systemtags/",
            headers={"Depth": "1", "Content-Type": "application/xml; charset=utf-8"},
            content=webdav.SYSTEMTAGS_PROPFIND_BODY,
            **extra,
        )
        return webdav.parse_system_tags(response.content)

    def system_tag_ids(self) -> dict[str, int]:
        """The system tags this user can see (:meth:`system_tags`): case-folded name → id,
        as :mod:`ncindex.sources.eligibility` compares them (of two names alike but for case,
        the later in the answer)."""
        return {name.casefold(): tag_id for tag_id, name in self.system_tags().items()}

    def folders(self, limit: int, *, timeout: float | None = None) -> list[str]:
        """The paths of the folders in this user's files, by one WebDAV SEARCH
        (:func:`~ncindex.nextcloud.webdav.search_folders_body`): fewer than ``limit`` paths
        are every folder; ``limit`` or more (one more at most) may have left some out.
        ``timeout`` (seconds) replaces ``settings.http_timeout`` for this request."""
        user = self._me()
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        response = self.request(
            "SEARCH",
            "/remote.php/dav/",
            headers={"Content-Type": "text/xml; charset=utf-8"},
            content=webdav.search_folders_body(user, limit),
            **extra,
        )
        return [e.path for e in webdav.parse_multistatus(response.content, user, self.web_root)]

    def tagged(self, tag_id: int) -> dict[int, webdav.DavEntry]:
        """File id → entry (the PROPFIND properties) of every file and folder carrying system
        tag ``tag_id`` in this user's view: one ``REPORT oc:filter-files`` (reference §3.2).
        A tag the user cannot see (Nextcloud answers 412,
        ``FilesReportPlugin::processFilterRulesForFileIDs``: "Cannot filter by non-existing
        tag") tags nothing for them: an empty dict."""
        user = self._me()
        try:
            response = self.request(
                "REPORT",
                webdav.file_url_path(user, "/"),
                headers={"Content-Type": "application/xml; charset=utf-8"},
                content=webdav.filter_files_body(tag_id),
                not_found=(404, 412),
            )
        except NotFound:
            return {}
        entries = webdav.parse_multistatus(response.content, user, self.web_root)
        return {e.file_id: e for e in entries if e.file_id is not None}

    def tagged_ids(self, tag_id: int) -> set[int]:
        """Ids of the files and folders carrying system tag ``tag_id`` in this user's view:
        :meth:`tagged` asking for ``oc:fileid`` only (verification needs nothing else)."""
        try:
            response = self.request(
                "REPORT",
                webdav.file_url_path(self._me(), "/"),
                headers={"Content-Type": "application/xml; charset=utf-8"},
                content=webdav.filter_files_body(tag_id, webdav.FILEID_PROP),
                not_found=(404, 412),
            )
        except NotFound:
            return set()
        return webdav.parse_file_ids(response.content)

    def download(self, path: str, max_bytes: int) -> bytes:
        """GET a file's bytes, streamed; raises ``TooLarge`` past ``max_bytes`` bytes, and
        ``FileUnavailable`` when Nextcloud answers 423 (the file is locked) or 503 out of
        maintenance mode (it cannot open that file: nextcloud/server
        ``apps/dav/lib/Connector/Sabre/File.php`` ``get``)."""
        with self.stream("GET", webdav.file_url_path(self._me(), path), one_file=True) as response:
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise TooLarge(f"{path}: {declared} bytes > {max_bytes}")
            parts, total = [], 0
            for part in response.iter_bytes():
                total += len(part)
                if total > max_bytes:
                    raise TooLarge(f"{path}: more than {max_bytes} bytes")
                parts.append(part)
        return b"".join(parts)

    # --- files_sharing ---------------------------------------------------------------------

    def shares_with_me(self) -> list[dict[str, Any]]:
        """The shares made with this account: ``GET`` :data:`SHARES_API` with
        ``shared_with_me=true`` (nextcloud/server ``apps/files_sharing/lib/Controller/
        ShareAPIController.php`` ``getShares`` → ``getSharedWithMe``: the user, group,
        team, Talk room, Deck and ScienceMesh shares whose recipient is the user, not those
        they own, each as ``formatShare`` makes it — ``id``, ``share_type``,
        ``item_source`` (the node's file id), ``item_type`` (``file``/``folder``),
        ``path`` (the node in the user's view), ``file_target`` …). One request, however
        many shares. Raises ``NotFound`` when Nextcloud answers 404 (the sharing API off:
        "Share API is disabled"; files_sharing not enabled), ``NextcloudProtocolError`` when
        ``data`` is not a list of objects."""
        data = self.ocs("GET", SHARES_API, params={"shared_with_me": "true"})
        if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
            raise NextcloudProtocolError("share list is not a list of objects")
        return data

    # --- webhook_listeners (admin) ------------------------------------------------------

    def list_webhooks(self, uri: str | None = None) -> list[dict[str, Any]]:
        """Registered webhooks, or those whose ``uri`` equals ``uri``."""
        data = self.ocs("GET", WEBHOOKS_API, params={"uri": uri} if uri else None)
        if not isinstance(data, list):
            raise NextcloudProtocolError("webhook list is not a list")
        return data

    def create_webhook(self, registration: dict[str, Any]) -> dict[str, Any]:
        """Register one webhook (fields as in reference §1.1); returns the WebhookInfo."""
        return dict(self.ocs("POST", WEBHOOKS_API, json=registration))

    def get_webhook(self, webhook_id: int | str) -> dict[str, Any] | None:
        """Registration ``webhook_id`` as its WebhookInfo (``GET /webhooks/{id}``), or ``None``
        when Nextcloud has none of that id: nextcloud/server ``WebhooksController::show``
        answers the ``DoesNotExistException`` of ``WebhookListenerMapper::getById``
        (``QBMapper::findOneQuery``: no row) with ``OCSNotFoundException``, OCS 404 (HTTP 404
        under v2). An OCS 998 404 (webhook_listeners disabled) raises
        ``NextcloudProtocolError``."""
        return self._ocs_object(f"{WEBHOOKS_API}/{webhook_id}", lambda code, _: code == 404)

    def update_webhook(
        self, webhook_id: int | str, registration: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Replace every field of registration ``webhook_id`` (``POST /webhooks/{id}``,
        nextcloud/server ``WebhooksController::update``); returns the WebhookInfo, or ``None``
        when no registration of that id exists (deleted since it was listed). Nextcloud answers
        such an id as it answers an update — 200 with the WebhookInfo of what it was sent,
        that id included — and stores nothing: ``WebhookListenerMapper::updateWebhookListener``
        returns the entity it gave ``QBMapper::update``, whose ``UPDATE … WHERE id = ?`` does not
        look at how many rows it changed. So the registration is read back after
        (:meth:`get_webhook`: one more request) to tell."""
        info = dict(self.ocs("POST", f"{WEBHOOKS_API}/{webhook_id}", json=registration))
        return info if self.get_webhook(webhook_id) is not None else None

    def delete_webhook(self, webhook_id: int | str) -> bool:
        """Delete a registration; ``True`` when a row was deleted."""
        return bool(self.ocs("DELETE", f"{WEBHOOKS_API}/{webhook_id}"))


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise NextcloudProtocolError(f"{response.request.url}: body is not JSON") from exc


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The body of ``response`` as a JSON object; raises ``NextcloudProtocolError`` naming the
    URL for a body that is not JSON or not an object."""
    data = _json(response)
    if not isinstance(data, dict):
        raise NextcloudProtocolError(f"{response.request.url}: body is not a JSON object")
    return data


def json_list(response: httpx.Response) -> list[dict[str, Any]]:
    """The objects of the body of ``response``, a JSON list (other members are dropped);
    raises ``NextcloudProtocolError`` naming the URL for a body that is not a JSON list."""
    data = _json(response)
    if not isinstance(data, list):
        raise NextcloudProtocolError(f"{response.request.url}: body is not a JSON list")
    return [d for d in data if isinstance(d, dict)]


def _cors_refused_bearer(response: httpx.Response) -> bool:
    """A 401 of ``CORSMiddleware`` (``{"message": CORS_REFUSAL}``) to a request sent with a
    Bearer token: nextcloud/server ``CORSMiddleware::beforeController`` logs out a caller whose
    request fails the CSRF check and accepts Basic credentials only (nextcloud/server#44365;
    ``OCS-APIRequest`` passes that check from nextcloud/server#46760 on)."""
    if not response.request.headers.get("Authorization", "").startswith("Bearer "):
        return False
    try:
        return bool(response.json().get("message") == CORS_REFUSAL)
    except (ValueError, AttributeError):
        return False


def _error_body(response: httpx.Response) -> bytes | None:
    """The XML body of an error answer (5xx), to tell Nextcloud's refusals from an outage
    (:func:`~ncindex.nextcloud.webdav.login_refused`: a disabled account's app password answers
    503 ``Sabre\\DAV\\Exception\\ServiceUnavailable`` with ``OC\\User\\LoginException: …``;
    :func:`~ncindex.nextcloud.webdav.storage_unavailable`), or ``None`` for an answer that is
    not XML or is larger than :data:`_MAX_ERROR_BODY` bytes. Only a small XML body is read: a
    streamed answer's body is read here up to :data:`_MAX_ERROR_BODY` bytes, with or without a
    ``Content-Length``."""
    if "xml" not in response.headers.get("Content-Type", ""):
        return None
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > _MAX_ERROR_BODY:
        return None
    body = b""
    try:
        for part in response.iter_bytes():
            body += part
            if len(body) > _MAX_ERROR_BODY:
                return None
    except httpx.HTTPError:
        return None
    return body


#: The largest error body read to classify an answer (Sabre's error bodies are a few hundred
#: bytes), bytes.
_MAX_ERROR_BODY = 64 * 1024


def _ocs_bad_request(response: httpx.Response) -> bool:
    """An OCS v2 answer 400 (``meta.statuscode`` 400 mirrored in the HTTP status)."""
    return response.status_code == 400


def _ocs_message(response: httpx.Response) -> str:
    """``meta.message`` of an OCS JSON envelope, or ``""``."""
    try:
        message = response.json()["ocs"]["meta"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""
    return str(message) if message is not None else ""
