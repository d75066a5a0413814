"""The search page (``GET /``) and its sign-in: Login Flow v2 or a typed app password.

Static HTML, CSS and one small vanilla JavaScript file (``search_api/static``) served by
Flask: the page is a form, a list and a few chips, which needs no framework and therefore no
build step, no npm dependency tree to audit and nothing generated to keep in step.

Routes (JSON unless said; every ``POST`` needs the session's CSRF token in ``X-CSRF-Token``;
a query parameter on a ``/ui/`` route but the static files is 400 ``unknown_field``; a
``POST`` that takes no body — all but ``/ui/login/password`` — takes none or ``{}``, and
answers another 400 ``invalid_json`` on ``body`` or ``unknown_field`` naming the key):

* ``GET /`` — the page; ``/ui/static/<file>`` — its script and style sheet; any other
  address a browser asks for as a page (``Accept`` prefers ``text/html`` to JSON) is 404 with
  a page leading to ``/``, an API client's 404 problem+json; so is a browser's ``GET`` of an
  address that takes only ``POST`` (``/v1/search``, ``/rcp/…``, the sign-in routes below):
  405 with its ``Allow``, as a page leading to ``/`` (an API client's: problem+json);
* ``GET /ui/session`` — ``{"user", "csrf", "nextcloud_url", "default_limit", "signing_in",
  "sign_in_ended"}``, ``default_limit`` the results a search answers without ``limit``
  (``NCINDEX_SEARCH_DEFAULT_LIMIT``: the page's results per page and per "More results");
  starts an anonymous session, setting the cookie, when there is none; while a Login Flow is
  under way also ``login_url`` and ``flow_seconds_left``, so that a page reloaded meanwhile goes on
  waiting for the approval instead of losing the app password Nextcloud makes for it. A
  signed-in session's credential is confirmed with Nextcloud first
  (:func:`~ncindex.web.auth.still_accepted`: ``GET /ocs/v2.php/cloud/user``, at most
  :data:`~ncindex.nextcloud.client.CONFIRM_SECONDS`): refused (401: its app password revoked,
  invalid since the user's password changed outside Nextcloud, or the account disabled), the
  session is signed out as a ``/v1/`` call's 401 signs it out, ``user`` is null and
  ``sign_in_ended`` true (the page says so, as it does when a search is refused); without an
  answer in that time it stays signed in;
* ``POST /ui/login/flow`` — starts Login Flow v2: ``{"login_url"}`` for the user to open
  (always an http(s) URL: a Nextcloud answering another is 502 ``backend_unavailable``);
* ``POST /ui/login/poll`` — ``{"user": null}`` until the user granted access, then
  ``{"user", "csrf"}`` once Nextcloud confirmed the credentials the flow gave (a new session:
  the cookie is replaced; an answer of Nextcloud in no known shape is 502
  ``backend_unavailable``, so are credentials that are no text or hold a control character,
  which Nextcloud never makes (the latter's app password deleted); credentials it refuses,
  401 ``unauthenticated``, their app password deleted unless Nextcloud's answer was a 401
  (kept for one more delete a day later) for an account the webhook admin does not see
  disabled; 400
  ``invalid_value`` on ``poll_token`` when no sign-in is under way, also for a poll whose
  sign-in was cancelled or replaced while it ran). Nextcloud hands those credentials out once
  and deletes the flow as it does (nextcloud/server ``core/Controller/
  ClientFlowLoginV2Controller.php`` ``poll`` → ``core/Service/LoginFlowV2Service.php``
  ``poll``), so they are kept in the session (in Redis, never sent to the browser) from the
  moment they arrive until a sign-in with them, their refusal, or a cancel: a check that failed
  (503 ``backend_unavailable`` with ``"approved": true``, Nextcloud briefly down) is made again
  by the next poll, without a new Login Flow, and so is one whose worker died (after
  :data:`~ncindex.web.session.FLOW_CHECK_SECONDS`). One poll at a time checks them (it claims
  them; another poll meanwhile answers ``{"user": null}``) and only the poll holding the claim
  signs in: a sign-in makes one session. Credentials that cannot be kept (Redis failing as
  they arrive) have their app password deleted and are 503 ``backend_unavailable`` with
  ``"restart": true``: the flow is spent, so only a new one can sign in (the page cancels it,
  and, reloaded before that got through, does not wait for it again). Any ``/ui/`` route
  meeting Redis failing is 503 ``backend_unavailable`` with ``"backend": "sessions"``, said
  apart from Nextcloud failing;
* ``POST /ui/login/cancel`` — forgets the Login Flow under way (its poll token and login URL,
  and credentials it gave that no sign-in used, whose app password is deleted in Nextcloud
  where it can be: nextcloud/server ``core/Controller/AppPasswordController.php``
  ``deleteAppPassword``), so that nothing polls it any more and ``/ui/session`` no longer
  reports it: ``{"cancelled"}``, whether there was one. A cancel wins over a poll checking
  those credentials meanwhile: that poll does not sign in, and one receiving them from
  Nextcloud meanwhile deletes their app password. Nextcloud has no request to end a flow
  (nextcloud/server ``core/Controller/ClientFlowLoginV2Controller.php``: init, landing, grant,
  poll only); one approved after this makes an app password nobody takes, which Nextcloud
  lists under the account's devices & sessions. Starting another Login Flow, or signing in
  with a typed app password, ends the flow before in the same way. Every such delete is
  recorded first, in the same Redis step that drops the credentials, and beat retries it until
  Nextcloud answers (:mod:`ncindex.web.revocations`; it also deletes the app passwords of
  sessions that expired holding them);
* ``POST /ui/login/password`` — body ``{"login_name", "app_password"}``: signs in with an app
  password made by hand (401 ``unauthenticated`` if Nextcloud refuses it; 400
  ``unknown_field`` for another key, ``invalid_value`` on ``login_name`` for one holding ``:``
  or a control character (U+0000-U+001F, U+007F-U+009F), and on ``app_password`` for one
  holding a control character (:func:`~ncindex.web.auth.refuse_control_characters`), Nextcloud
  not asked; 429
  ``rate_limited`` once the login name has used up the per-caller rate limit, which it shares
  with that login's Basic requests to the API);
* ``POST /ui/logout`` — deletes the app password in Nextcloud (only one ncindex obtained
  through Login Flow v2: a typed-in one is the user's to keep) and the session:
  ``{"app_password_deleted"}``.

With a signed-in session cookie and no ``Authorization`` header, the ``/v1/`` endpoints act
as the session's user (see :func:`install_session_auth`). Every answer of this app carries
:data:`SECURITY_HEADERS` (a Content-Security-Policy without inline scripts or styles).
"""

from __future__ import annotations

import base64
import contextlib
import time
from pathlib import Path
from string import Template
from typing import Any

import redis
import structlog
from flask import Blueprint, Flask, Response, g, jsonify, request, send_from_directory
from werkzeug.exceptions import MethodNotAllowed, NotFound

from ncindex.errors import (
    RETRY_AFTER_SECONDS,
    InputError,
    NextcloudAuthError,
    NextcloudProtocolError,
    TransientError,
    Unauthenticated,
    public_reason,
    refused_with_401,
)
from ncindex.nextcloud.client import CONFIRM_SECONDS, basic_login
from ncindex.nextcloud.loginflow import poll_login_flow, start_login_flow
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.web.auth import (
    MAX_AUTHORIZATION_CHARS,
    forget_caller,
    refuse_control_characters,
    request_address,
    resolve_caller,
    still_accepted,
)
from ncindex.web.problems import PROBLEM_JSON, answered_401, http_problem, problem, problem_for
from ncindex.web.ratelimit import CallerLimit
from ncindex.web.revocations import account_disabled, revocations
from ncindex.web.session import COOKIE, CSRF_HEADER, UiSessions, csrf_ok
from search_api.search import Decorator, int_args, read_json_object

log = structlog.get_logger(__name__)

STATIC = Path(__file__).parent / "static"
#: Pages filled in before they are served (``string.Template``), not served as files.
PAGES = Path(__file__).parent / "pages"
CLIENT_NAME = "ncindex search page"
"""The name Nextcloud shows on its grant page and gives the app password (``User-Agent``)."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
MAX_FIELD_CHARS = 1024
FLOW_LIFETIME_SECONDS = 1200
"""How long Nextcloud keeps a Login Flow v2 (nextcloud/server core/Db/LoginFlowV2Mapper.php,
lifetime 1200 s): a page reloaded meanwhile goes on waiting for the rest of it."""
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _sessions(services: Services) -> UiSessions:
    return UiSessions(
        services.redis_breaker, services.settings.names, services.settings.ui_session_seconds
    )


def install_session_auth(app: Flask, services: Services) -> None:
    """Let a signed-in page call the ``/v1/`` endpoints: a request without an
    ``Authorization`` header but with a session cookie whose session holds a credential gets
    that credential as its ``Authorization`` header (inside this process; the browser never
    sees it), after its CSRF token is checked on state-changing methods (403
    ``csrf_failed``). Runs before every other hook, so the rate limit counts the session's
    user. A 401 answer to such a request signs the session out (the app password was
    revoked), and when Nextcloud's own answer was a 401
    (:func:`~ncindex.web.problems.answered_401`) the record of app passwords to delete keeps
    it for one more delete a day later (:meth:`~ncindex.web.session.UiSessions.refused`: a
    revoked app password and one whose login password expired answer alike) unless the
    webhook admin says the
    account is disabled (:func:`~ncindex.web.revocations.account_disabled`: OCS answers that
    401 too, and the app password works again once enabled), asked only for a Login Flow's
    credential (a typed one is the user's, never recorded to delete); answers to requests
    carrying the cookie lose ``WWW-Authenticate``, so the browser shows no password prompt."""
    sessions = _sessions(services)

    def attach() -> Response | None:
        g.ui_session_id = request.cookies.get(COOKIE)
        g.ui_signed_in = False
        if "Authorization" in request.headers or not g.ui_session_id:
            return None
        if not request.path.startswith("/v1/"):
            return None
        try:
            record = sessions.load(g.ui_session_id)
        except redis.RedisError:
            return problem(503, "backend_unavailable", "sessions cannot be read")
        if not record or not record.get("authorization"):
            return None
        if request.method not in _SAFE_METHODS and not csrf_ok(
            record, request.headers.get(CSRF_HEADER)
        ):
            return problem(403, "csrf_failed", "missing or wrong CSRF token", field=CSRF_HEADER)
        request.environ["HTTP_AUTHORIZATION"] = record["authorization"]
        g.ui_signed_in = True
        g.ui_user = record.get("user", "")
        g.ui_flow = record.get("origin") == "flow"
        return None

    app.before_request_funcs.setdefault(None, []).insert(0, attach)

    @app.after_request
    def _finish(response: Response) -> Response:
        response.headers.update(SECURITY_HEADERS)
        if g.get("ui_session_id"):
            response.headers.pop("WWW-Authenticate", None)
        if g.get("ui_signed_in") and response.status_code == 401:
            # a 401 of Nextcloud's own is a revoked app password's or a disabled account's
            # (OCS answers both alike): only the webhook admin's lookup tells them apart, asked
            # for a flow's credential alone (a typed one is never recorded to delete), within
            # CONFIRM_SECONDS: no answer keeps the entry, for the sweep to settle
            invalid = answered_401() and not (
                g.ui_flow and account_disabled(services, g.ui_user, CONFIRM_SECONDS) is not False
            )
            with contextlib.suppress(redis.RedisError):
                sessions.refused(g.ui_session_id, invalid=invalid, address=request_address())
        return response


def ui_blueprint(
    services: Services, limited: Decorator | None = None, settings: Settings | None = None
) -> Blueprint:
    """The page and the ``/ui/`` routes (see the module docstring). ``limited`` wraps the
    sign-in routes that ask Nextcloud, so they share the search rate limits — among them the
    per-address limit of refused credentials: guessing app passwords through the page must not
    make Nextcloud's brute-force protection throttle ncindex's own address. ``settings``
    (default ``services.settings``) are the app's, whose rate limit the typed login name
    counts against too."""
    bp = Blueprint("ui", __name__, static_folder=str(STATIC), static_url_path="/ui/static")
    limit = limited or (lambda f: f)
    sessions = _sessions(services)
    revoked = revocations(services)
    settings = settings or services.settings
    # the typed login name counts as a Basic login to the search API does: the page's request
    # has no Authorization header, so ``limited`` keys it on the client's address alone
    per_login = CallerLimit(settings) if limited and settings.search_rate_limit.strip() else None

    def session_cookie(response: Response, session_id: str) -> Response:
        response.set_cookie(
            COOKIE,
            session_id,
            httponly=True,
            samesite="Strict",
            # Secure over TLS, also behind a TLS-terminating proxy (a client claiming https
            # only makes its own cookie stricter)
            secure=request.is_secure or request.headers.get("X-Forwarded-Proto") == "https",
            path="/",
        )
        return response

    def current(check_csrf: bool) -> tuple[str, dict[str, str]] | Response:
        session_id = request.cookies.get(COOKIE) or ""
        record = sessions.load(session_id)
        if record is None:
            return problem(401, "unauthenticated", "no session: reload the page")
        if check_csrf and not csrf_ok(record, request.headers.get(CSRF_HEADER)):
            return problem(403, "csrf_failed", "missing or wrong CSRF token", field=CSRF_HEADER)
        return session_id, record

    def signed_in(new_id: str, record: dict[str, str]) -> Response:
        return session_cookie(jsonify({"user": record["user"], "csrf": record["csrf"]}), new_id)

    def claim_lost(session_id: str) -> Response:
        # the answer of a poll whose claim on the flow's credentials went meanwhile: another
        # poll took the check over (its claim ran out) and holds them, or a cancel or another
        # sign-in won
        if (sessions.load(session_id) or {}).get("flow_authorization"):
            return jsonify({"user": None})  # that poll is checking them now
        return _no_sign_in()

    def drop_flow_password(held: str | None) -> None:
        # a flow's credentials nobody will sign in with: cancelled, or another sign-in
        # replaced theirs. Their app password is deleted in Nextcloud rather than left unused
        # (listed under the account's devices & sessions until someone revokes it); the step
        # that dropped them recorded them, so a delete that fails or never runs is swept
        if held:
            revoked.delete(held, request_address())

    @bp.before_request
    def _no_query_parameters() -> Response | None:
        # the /ui/ routes take none (as GET /v1/status): a misspelt one would otherwise be
        # ignored without a word; the page itself (GET /, its ?q=) and its files are not judged
        if request.path.startswith("/ui/") and not request.path.startswith("/ui/static/"):
            try:
                int_args()
            except InputError as exc:
                return problem_for(exc)
        return None

    @bp.errorhandler(redis.RedisError)
    def _redis_down(exc: redis.RedisError) -> Response:
        log.warning("ui_session_redis_failed", error=str(exc))
        # said apart from Nextcloud failing (``backend``): a page waiting for a Login Flow
        # said "Nextcloud is not answering" for either
        detail = "sessions cannot be read or written"
        return problem(503, "backend_unavailable", detail, backend="sessions")

    @bp.get("/")
    def page() -> Response:
        return send_from_directory(STATIC, "index.html", max_age=0)

    elsewhere = Template((PAGES / "elsewhere.html").read_text(encoding="utf-8"))

    @bp.app_errorhandler(NotFound)
    def not_found(exc: NotFound) -> Response:
        # a person's browser at a wrong address (a mistyped or old bookmark, ``/index.html``)
        # gets a page leading to the search page, not problem+json to read
        if not _wants_page():
            return http_problem(exc)
        page = elsewhere.substitute(
            heading="Page not found", text="There is no page at this address."
        )
        return Response(page, 404, mimetype="text/html")

    @bp.app_errorhandler(MethodNotAllowed)
    def not_a_page(exc: MethodNotAllowed) -> Response:
        # a person's browser opening an API address (``/v1/search``, ``/ui/logout``: a link
        # someone shared, an address typed from the documentation) gets a page leading to the
        # search page too; still 405 with its Allow (RFC 9110 §15.5.6)
        if not _wants_page():
            return http_problem(exc)
        page = elsewhere.substitute(
            heading="Not a page",
            text="This address is for programs using the search API, not for a browser.",
        )
        allow = {k: v for k, v in exc.get_headers() if k.lower() == "allow"}
        return Response(page, 405, headers=allow, mimetype="text/html")

    @bp.get("/ui/session")
    @limit  # each call without a cookie makes a session in Redis: counted per address
    def session() -> Response:
        session_id = request.cookies.get(COOKIE) or ""
        record = sessions.load(session_id)
        fresh = record is None
        if record is None:
            session_id, record = sessions.create()
        # signed in: Nextcloud is asked whether it still takes the credential (an app password
        # revoked there showed signed in until a search was refused); no answer within
        # CONFIRM_SECONDS leaves the session as it is
        ended = bool(record.get("authorization")) and not still_accepted(
            services, record["authorization"]
        )
        if ended:
            # as a /v1/ call answered 401 signs it out; refused with 401 (only then is it
            # False), so the record keeps it for one more delete a day later (revoked, or its
            # login password expired: UiSessions.refused) unless the account is disabled:
            # that app password works again once enabled (asked for a flow's credential
            # alone: a typed one is never recorded to delete; within CONFIRM_SECONDS, no
            # answer keeps the entry for the sweep to settle)
            kept = record.get("origin") == "flow" and (
                account_disabled(services, record.get("user", ""), CONFIRM_SECONDS) is not False
            )
            sessions.refused(session_id, invalid=not kept, address=request_address())
        body = {
            "user": None if ended else record.get("user"),
            "csrf": record["csrf"],
            "nextcloud_url": settings.nextcloud_url,
            "default_limit": settings.search_default_limit,
            "signing_in": bool(record.get("poll_token") or record.get("flow_authorization")),
            "sign_in_ended": ended,
        }
        if body["signing_in"]:  # a page reloaded during a Login Flow goes on waiting
            started = int(record.get("flow_started") or 0)
            body["login_url"] = record.get("login_url")
            body["flow_seconds_left"] = max(0, started + FLOW_LIFETIME_SECONDS - int(time.time()))
        response = jsonify(body)
        return session_cookie(response, session_id) if fresh else response

    @bp.post("/ui/login/flow")
    @limit
    def login_flow() -> Response:
        found = current(check_csrf=True)
        if isinstance(found, Response):
            return found
        refused = _no_fields()
        if refused is not None:
            return refused
        session_id, _ = found
        try:
            flow = start_login_flow(services.http, CLIENT_NAME)
        except TransientError as exc:
            return problem_for(exc)
        except NextcloudProtocolError as exc:  # nothing the page can link to, or poll
            log.warning("login_flow_refused", error=str(exc))
            detail = (
                "Nextcloud's answer to the sign-in cannot be used (it must give an http or https "
                "login URL and a poll token); sign in with an app password instead"
            )
            return problem(502, "backend_unavailable", detail)
        # the flow before, and credentials it gave, are replaced: a check of them under way
        # signs in no more, and their app password is deleted
        held = sessions.end_flow(
            session_id,
            poll_token=flow.poll_token,
            login_url=flow.login_url,
            flow_started=str(int(time.time())),
        )
        if held is None:
            return problem(401, "unauthenticated", "no session: reload the page")
        drop_flow_password(held)
        return jsonify({"login_url": flow.login_url})

    @bp.post("/ui/login/poll")
    @limit
    def login_poll() -> Response:
        found = current(check_csrf=True)
        if isinstance(found, Response):
            return found
        refused = _no_fields()
        if refused is not None:
            return refused
        session_id, record = found
        poll_token = record.get("poll_token")
        if record.get("flow_authorization"):
            # received by an earlier poll whose check failed, or died: checked again by one
            # poll at a time, the one that claims them (two polls at once — two tabs, a page
            # reloaded while its poll was under way — signed in twice)
            claimed = sessions.claim_flow(session_id)
            if claimed is None:
                return jsonify({"user": None})  # another poll is checking them
            authorization, claim = claimed
        elif poll_token:
            try:
                creds = poll_login_flow(services.http, poll_token)
            except TransientError as exc:
                return problem_for(exc)
            except NextcloudProtocolError as exc:  # as /ui/login/flow answers one: a bad gateway
                log.warning("login_poll_unreadable", error=str(exc))
                detail = "Nextcloud's answer to the sign-in cannot be used (an unknown format)"
                return problem(502, "backend_unavailable", detail)
            if creds is None:
                return jsonify({"user": None})
            authorization = _basic(creds.login_name, creds.app_password)
            # Nextcloud gave them once: stored before anything else, so that a check that
            # fails, or a worker that dies, loses nothing
            try:
                received = sessions.receive_flow(session_id, poll_token, authorization)
            except redis.RedisError as exc:  # nowhere to keep them: not left unused in Nextcloud
                # nor recorded: Redis failed (tried once)
                revoked.delete(authorization, request_address())
                log.warning("ui_session_redis_failed", error=str(exc))
                # Nextcloud's flow is spent (it hands its credentials out once and then
                # answers 404, as for a flow not yet approved): polling it again would wait
                # for an approval already given, so the page is told to start again
                detail = "sessions cannot be written just now: start the sign-in again"
                return problem(503, "backend_unavailable", detail, restart=True)
            if received is None:  # cancelled, or another sign-in, meanwhile: recorded to delete
                revoked.delete(authorization, request_address())
                return _no_sign_in()
            if not received:
                return jsonify({"user": None})  # another poll received them too
            claim = received
        else:
            return _no_sign_in()
        # claimed: a worker that dies from here on leaves them to the next poll after
        # FLOW_CHECK_SECONDS; a cancel meanwhile makes this poll's sign-in fail
        try:
            user = resolve_caller(services, authorization).user or ""
        except Unauthenticated as exc:  # the flow's credentials: no field of the request
            # a 401 (not a disabled account's, which OCS answers 401 too) is a revoked app
            # password's or an expired login password's: kept for one more delete a day later
            # (UiSessions.release_flow), not deleted now; another refusal (a 404 or 403 of a
            # proxy, an answer in no known shape) may leave it alive: deleted now
            invalid = refused_with_401(exc) and (
                account_disabled(services, basic_login(authorization)) is False
            )
            address = request_address()
            if not sessions.release_flow(
                session_id, claim, refused=True, invalid=invalid, address=address
            ):
                return claim_lost(session_id)
            if not invalid:
                revoked.delete(authorization, address)
            return problem(401, "unauthenticated", str(exc))
        except InputError as exc:
            # Nextcloud's credentials hold a control character (refuse_basic_controls), which
            # none it makes does (LoginFlowV2Service::flowDone: letters and digits): its answer
            # cannot be used, a bad gateway as an unreadable poll is. Its app password is
            # deleted now, recorded first (a refusal, not a 401), not left unused
            log.warning("login_poll_unreadable", error=exc.detail)
            if not sessions.release_flow(session_id, claim, refused=True, invalid=False):
                return claim_lost(session_id)
            revoked.delete(authorization, request_address())
            detail = "Nextcloud's answer to the sign-in cannot be used (a control character)"
            return problem(502, "backend_unavailable", detail)
        except Exception as exc:
            # kept in the session for the next poll, which checks them again
            kept = sessions.release_flow(session_id, claim, refused=False)
            if not isinstance(exc, TransientError):
                raise
            if not kept:
                return claim_lost(session_id)
            # said apart: the user approved, the check is to come
            log.warning("login_check_failed", error=str(exc))
            return problem(
                503,
                "backend_unavailable",
                public_reason(exc),
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                approved=True,
            )
        replaced = sessions.replace_claimed(
            session_id, claim, authorization=authorization, user=user, origin="flow"
        )
        if replaced is None:
            return claim_lost(session_id)
        for held in replaced.dropped:  # a Login Flow's sign-in the session had before
            drop_flow_password(held)
        return signed_in(replaced.session_id, replaced.record)

    @bp.post("/ui/login/cancel")
    def login_cancel() -> Response:
        found = current(check_csrf=True)
        if isinstance(found, Response):
            return found
        refused = _no_fields()
        if refused is not None:
            return refused
        session_id, record = found
        # credentials a flow gave and no sign-in used: a poll checking them signs in no more
        held = sessions.end_flow(session_id)
        drop_flow_password(held)
        return jsonify({"cancelled": bool(record.get("poll_token") or held)})

    @bp.post("/ui/login/password")
    @limit
    def login_password() -> Response:
        found = current(check_csrf=True)
        if isinstance(found, Response):
            return found
        session_id, _ = found
        try:
            body = _fields("login_name", "app_password")
            login_name = _text_field(body, "login_name")
            app_password = _text_field(body, "app_password")
            authorization = _typed_basic(login_name, app_password)
        except InputError as exc:
            return problem_for(exc)
        retry = per_login.hit(authorization, request.remote_addr) if per_login else None
        if retry is not None:
            return problem(
                429,
                "rate_limited",
                "too many sign-ins with this login name",
                field="login_name",
                headers={"Retry-After": str(retry)},
            )
        try:
            client = resolve_caller(services, authorization)
            # one typed just after its use with the API may come from the credential cache,
            # revoked since: a sign-in asks Nextcloud (NextcloudClient.confirm)
            client.confirm()
            user = client.user or ""
        except Unauthenticated as exc:  # refused: the typed app password (no Basic challenge)
            return problem(401, "unauthenticated", str(exc), field="app_password")
        except NextcloudAuthError:  # refused after resolving from the cache: revoked
            forget_caller(services, authorization)
            detail = "Nextcloud rejected the credentials"
            return problem(401, "unauthenticated", detail, field="app_password")
        except TransientError as exc:
            return problem_for(exc)
        replaced = sessions.replace(
            session_id, authorization=authorization, user=user, origin="typed"
        )
        for held in replaced.dropped:  # a Login Flow approved, or signed in, not needed now
            drop_flow_password(held)
        return signed_in(replaced.session_id, replaced.record)

    @bp.post("/ui/logout")
    @limit
    def logout() -> Response:
        found = current(check_csrf=True)
        if isinstance(found, Response):
            return found
        refused = _no_fields()
        if refused is not None:
            return refused
        session_id, _ = found
        dropped = sessions.sign_out(session_id)  # a Login Flow's app password: recorded
        deleted = [revoked.delete(held, request_address()) for held in dropped]
        response = jsonify({"app_password_deleted": bool(deleted) and all(deleted)})
        response.delete_cookie(COOKIE, path="/", samesite="Strict", httponly=True)
        return response

    return bp


def _fields(*known: str) -> dict[str, Any]:
    """The request body, a JSON object holding no key but ``known`` (read as the search API
    reads its body: with or without a Content-Type); a route that takes none (``known``
    empty) also takes an empty body, which is what the page sends. Raises
    :class:`~ncindex.errors.InputError`: ``invalid_json`` on ``body`` for a body that is not
    JSON or not an object, ``unknown_field`` naming another key (a misspelt one, as the search
    API names it), and a 413 past :data:`~ncindex.web.problems.MAX_BODY_BYTES`."""
    body = read_json_object(empty_ok=not known)
    for name in body:
        if name not in known:
            taken = f"known: {', '.join(known)}" if known else "this request takes none"
            raise InputError("unknown_field", name, f"not a field here ({taken})")
    return body


def _no_fields() -> Response | None:
    """The answer refusing the body of a ``/ui/`` ``POST`` that takes none (:func:`_fields`),
    or ``None`` for an empty body or ``{}``: a malformed body was ignored, and a Login Flow
    started for ``{"a":``."""
    try:
        _fields()
    except InputError as exc:
        return problem_for(exc)
    return None


def _no_sign_in() -> Response:
    """A poll's answer when no Login Flow is under way (none started, cancelled, or replaced
    by another sign-in)."""
    return problem(400, "invalid_value", "no sign-in under way", field="poll_token")


def _wants_page() -> bool:
    """Whether the request is a person's browser asking for a page: its ``Accept`` prefers
    ``text/html`` to JSON. An API client, which does not (``*/*``, ``application/json``,
    ``application/problem+json``), gets problem+json."""
    accept = request.accept_mimetypes
    return accept["text/html"] > max(accept["application/json"], accept[PROBLEM_JSON])


def _basic(login_name: str, password: str) -> str:
    token = base64.b64encode(f"{login_name}:{password}".encode()).decode()
    return f"Basic {token}"


def _typed_basic(login_name: str, app_password: str) -> str:
    """:func:`_basic` of a typed sign-in. Raises :class:`InputError` ``invalid_value`` on
    ``app_password`` when it is longer than :data:`~ncindex.web.auth.MAX_AUTHORIZATION_CHARS`,
    the most any request may send on: two fields within :data:`MAX_FIELD_CHARS` characters
    each can be four times as many UTF-8 bytes, and such a header was refused as a credential
    (401 "too long" on ``app_password``) after the rate limit had counted it."""
    authorization = _basic(login_name, app_password)
    if len(authorization) > MAX_AUTHORIZATION_CHARS:
        raise InputError(
            "invalid_value",
            "app_password",
            "with the login name, too long for a Basic header (at most "
            f"{MAX_AUTHORIZATION_CHARS} characters of base64 of their UTF-8)",
        )
    return authorization


def _text_field(body: Any, name: str) -> str:
    if not isinstance(body, dict):
        raise InputError("invalid_json", "body", "body must be a JSON object")
    value = body.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD_CHARS:
        raise InputError(
            "invalid_value",
            name,
            f"must be a non-empty string of at most {MAX_FIELD_CHARS} characters",
        )
    try:  # a lone surrogate ("\\ud800" in the JSON) cannot go into the UTF-8 Basic header
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("invalid_value", name, "is not valid Unicode (lone surrogate)") from None
    if name != "login_name":
        refuse_control_characters(value, name, "an app password")
        return value
    if ":" in value:
        raise InputError("invalid_value", name, "a login name cannot contain ':' (Basic auth)")
    value = value.strip()  # a name pasted with a line break after it is the name
    # Nextcloud matches an app password only with the login name its token was made with,
    # compared as is (nextcloud/server lib/private/User/Session.php validateToken, `!==`)
    refuse_control_characters(value, name, "a login name")
    return value
