"""The search page's sign-in and filter endpoints on the real stack: Login Flow v2 against the
simulator, the session cookie, CSRF, ``GET /v1/folders`` and ``GET /v1/tags`` per caller, and
sign-out deleting the app password in Nextcloud. Also, on ``httpx.MockTransport``, a Nextcloud
whose Login Flow answers a login URL the page must not link to."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from ncindex import names
from ncindex.embedding.embedder import Embedder
from ncindex.index.indexing import Indexer
from ncindex.runtime import Services
from ncindex.search import facets
from ncindex.search.facets import CHECK_SECONDS
from ncindex.settings import Settings
from ncindex.web.auth import MAX_AUTHORIZATION_CHARS
from ncindex.web.session import ANONYMOUS_SECONDS, COOKIE, CSRF_HEADER
from search_api import create_app
from search_api.ui import MAX_FIELD_CHARS
from support import ADMIN, PASSWORDS, Stack, build_stack, wait_until


def session(client: FlaskClient) -> dict:
    response = client.get("/ui/session")
    assert response.status_code == 200
    return response.get_json()


def sign_in_with_flow(stack: Stack, client: FlaskClient, user: str) -> dict:
    csrf = session(client)["csrf"]
    assert client.post("/ui/login/flow").status_code == 403  # no CSRF token
    started = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
    assert started.status_code == 200
    login_url = started.get_json()["login_url"]
    pending = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert pending.get_json() == {"user": None}
    flows = stack.sim.app_state["login_flows"]
    assert flows.approve(login_url, user, PASSWORDS[user])
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 200
    body = done.get_json()
    assert body["user"] == user and body["csrf"] != csrf  # a new session, a new token
    return body


@pytest.mark.parametrize("route", ["flow", "poll", "cancel"])
def test_a_body_sent_where_none_is_taken_is_refused(stack: Stack, route: str) -> None:
    """``POST /ui/login/flow`` with ``{"a":`` answered 200 and started a Login Flow: the body
    was ignored, where ``/ui/login/password`` refuses malformed JSON and unknown keys. The
    ``/ui/`` routes that take no body refuse one that is not JSON (``invalid_json``) or holds
    a key (``unknown_field`` naming it), and take none or ``{}``."""
    client = stack.search.application.test_client()
    csrf = session(client)["csrf"]
    path = f"/ui/login/{route}"
    for body, code, field in [
        (b'{"a":', "invalid_json", "body"),
        (b'{"a": 1}', "unknown_field", "a"),
    ]:
        refused = client.post(path, data=body, headers={CSRF_HEADER: csrf})
        assert refused.status_code == 400, refused.get_json()
        assert (refused.get_json()["code"], refused.get_json()["field"]) == (code, field)
    assert session(client)["signing_in"] is False  # no Login Flow was started
    for body in (b"", b"{}"):  # taken: poll's 400 is its own, no sign-in under way
        taken = client.post(path, data=body, headers={CSRF_HEADER: csrf})
        if route == "poll":
            assert taken.get_json()["field"] == "poll_token", taken.get_json()
        else:
            assert taken.status_code == 200, taken.get_json()
    started = client.post("/ui/login/flow", data=b"{}", headers={CSRF_HEADER: csrf})
    assert started.status_code == 200 and session(client)["signing_in"] is True


def test_flow_sign_in_filters_per_caller_and_sign_out(stack: Stack) -> None:
    sim = stack.sim
    tag = sim.create_tag("lighthouse-project")
    secret_tag = sim.create_tag("alice-only")
    sim.put_file("alice", "/Projects/Lighthouse/plan.md", b"Lighthouse plan: polish the lens.")
    sim.put_file("alice", "/Private/Diary/day.md", b"Lighthouse diary: the lens shone.")
    sim.put_file("bob", "/Bobs/notes.md", b"Bob's lighthouse lens notes.")
    wait_until(lambda: stack.services.store.count() >= 3, 30)
    stack.wait_idle(30)
    sim.assign_tag("alice", "/Projects/Lighthouse/plan.md", tag)
    sim.assign_tag("alice", "/Private/Diary/day.md", secret_tag)
    sim.flush_deliveries(timeout=5)
    wait_until(lambda: stack.services.store.count() >= 3, 30)

    alice = stack.search.application.test_client()
    # a flow cancelled is forgotten: /ui/session no longer reports it, nothing is polled
    csrf = session(alice)["csrf"]
    assert alice.post("/ui/login/flow", headers={CSRF_HEADER: csrf}).status_code == 200
    assert session(alice)["signing_in"] is True
    assert alice.post("/ui/login/cancel").status_code == 403  # no CSRF token
    cancelled = alice.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
    assert cancelled.status_code == 200 and cancelled.get_json() == {"cancelled": True}
    after = session(alice)
    assert after["signing_in"] is False and "login_url" not in after
    assert alice.post("/ui/login/poll", headers={CSRF_HEADER: csrf}).status_code == 400
    again = alice.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
    assert again.get_json() == {"cancelled": False}
    body = sign_in_with_flow(stack, alice, "alice")
    csrf = body["csrf"]
    cookie = alice.get_cookie(COOKIE)
    assert cookie is not None and cookie.http_only and cookie.same_site == "Strict"
    assert "Basic" not in str(session(alice))  # the credential never reaches the page
    assert not cookie.secure

    def ttl(client: FlaskClient) -> int:
        digest = hashlib.sha256(client.get_cookie(COOKIE).value.encode()).hexdigest()
        return stack.services.redis.ttl(stack.settings.names.ui_session(digest))

    assert ttl(alice) > ANONYMOUS_SECONDS  # signed in: NCINDEX_UI_SESSION_SECONDS
    behind_tls = stack.search.application.test_client()
    behind_tls.get("/ui/session", headers={"X-Forwarded-Proto": "https"})
    assert behind_tls.get_cookie(COOKIE).secure
    assert 0 < ttl(behind_tls) <= ANONYMOUS_SECONDS  # not signed in: short-lived

    def alice_folders() -> list[str]:
        return alice.get("/v1/folders").get_json()["folders"]

    wait_until(lambda: "/Projects/Lighthouse" in alice_folders(), 30)
    wait_until(lambda: "alice-only" in alice.get("/v1/tags").get_json()["tags"], 30)
    assert {"/Projects", "/Projects/Lighthouse", "/Private", "/Private/Diary"} <= set(
        alice_folders()
    )
    paged = alice.get("/v1/folders?limit=1&offset=1").get_json()
    assert paged["folders"] == [alice_folders()[1]] and paged["next_offset"] == 2
    assert alice.get("/v1/folders?limit=0").get_json()["field"] == "limit"

    # search as the session's user: CSRF required for the POST
    refused = alice.post("/v1/search", json={"query": "lighthouse lens"})
    assert refused.status_code == 403 and refused.get_json()["code"] == "csrf_failed"
    found = alice.post("/v1/search", json={"query": "lighthouse lens"}, headers={CSRF_HEADER: csrf})
    assert found.status_code == 200 and len(found.get_json()["results"]) == 2

    # bob, typing his app password, sees his own folder, never alice's folders or tags
    bob = stack.search.application.test_client()
    bob_csrf = session(bob)["csrf"]
    wrong = bob.post(
        "/ui/login/password",
        json={"login_name": "bob", "app_password": "nope"},
        headers={CSRF_HEADER: bob_csrf},
    )
    assert wrong.status_code == 401 and "WWW-Authenticate" not in wrong.headers
    misspelt = bob.post(
        "/ui/login/password",
        json={"login_name": "bob", "app_password": PASSWORDS["bob"], "remember": True},
        headers={CSRF_HEADER: bob_csrf},
    )
    assert misspelt.status_code == 400, misspelt.get_json()
    assert (misspelt.get_json()["code"], misspelt.get_json()["field"]) == (
        "unknown_field",
        "remember",
    )
    assert session(bob)["user"] is None
    typed = bob.post(  # a JSON body is read as the search API reads it: Content-Type or not
        "/ui/login/password",
        data=json.dumps({"login_name": "bob", "app_password": PASSWORDS["bob"]}),
        headers={CSRF_HEADER: bob_csrf},
    )
    assert typed.status_code == 200 and typed.get_json()["user"] == "bob"
    assert bob.get("/v1/folders").get_json()["folders"] == ["/Bobs"]
    assert bob.get("/v1/tags").get_json()["tags"] == []
    # bob's typed-in app password is his to keep
    assert bob.post("/ui/logout", headers={CSRF_HEADER: typed.get_json()["csrf"]}).get_json() == {
        "app_password_deleted": False
    }
    assert sim.check_password("bob", PASSWORDS["bob"])

    # sign-out deletes the flow's app password in Nextcloud and the session
    passwords_before = set(sim.tree.user("alice").passwords)
    assert len(passwords_before) == 2
    out = alice.post("/ui/logout", headers={CSRF_HEADER: csrf})
    assert out.get_json() == {"app_password_deleted": True}
    assert sim.tree.user("alice").passwords == {PASSWORDS["alice"]}
    assert alice.get("/v1/folders").status_code == 401
    assert session(alice)["user"] is None


def approved_flow(stack: Stack, client: FlaskClient, user: str) -> str:
    """A Login Flow started by ``client``'s session and approved in Nextcloud as ``user``: the
    session's CSRF token."""
    csrf = session(client)["csrf"]
    started = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
    login_url = started.get_json()["login_url"]
    assert stack.sim.app_state["login_flows"].approve(login_url, user, PASSWORDS[user])
    return csrf


def poll_with_nextcloud_down(stack: Stack, client: FlaskClient, csrf: str) -> dict:
    """A poll that takes the flow's credentials while Nextcloud's user check (OCS) answers
    503: its problem, once Nextcloud answers again."""
    stack.sim.faults.set("ocs", status=503)
    try:
        failed = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    finally:
        stack.sim.faults.clear()
    assert failed.status_code == 503, failed.get_json()
    return failed.get_json()


def test_a_failed_check_after_the_login_flow_is_retried_with_its_credentials(
    stack: Stack,
) -> None:
    """Nextcloud hands a finished flow's credentials out once and deletes the flow
    (nextcloud/server ``ClientFlowLoginV2Controller::poll``). When the check of them right
    after failed (Nextcloud briefly down), they were lost: the next polls found no flow and
    waited for an approval already given, the user had to start over, and the app password
    stayed unused in Nextcloud. They are kept in the session, never shown to the browser, and
    the next poll signs in with them."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    problem = poll_with_nextcloud_down(stack, client, csrf)
    assert (problem["code"], problem["approved"]) == ("backend_unavailable", True)
    assert "Basic" not in json.dumps(problem) + json.dumps(session(client))
    assert session(client)["signing_in"] is True  # a page reloaded meanwhile polls on
    assert len(sim.tree.user("bob").passwords) == 2  # the flow's app password, made
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 200 and done.get_json()["user"] == "bob"
    assert client.get("/v1/folders").status_code == 200
    out = client.post("/ui/logout", headers={CSRF_HEADER: done.get_json()["csrf"]})
    assert out.get_json() == {"app_password_deleted": True}  # the flow's, as a flow sign-in's
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


def test_credentials_kept_from_a_flow_are_dropped_when_refused_and_deleted_when_cancelled(
    stack: Stack,
) -> None:
    """Credentials a flow gave, kept after a failed check, are forgotten once Nextcloud
    refuses them (401; nothing is left to poll), and a sign-in cancelled while they are held
    deletes their app password in Nextcloud: nobody could use it any more."""
    sim = stack.sim
    refused = stack.search.application.test_client()
    csrf = approved_flow(stack, refused, "bob")
    poll_with_nextcloud_down(stack, refused, csrf)
    (made,) = sim.tree.user("bob").passwords - {PASSWORDS["bob"]}
    assert sim.app_state["login_flows"].delete_app_password("bob", made)  # revoked meanwhile
    answer = refused.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert answer.status_code == 401 and answer.get_json()["code"] == "unauthenticated"
    assert session(refused)["signing_in"] is False
    assert refused.post("/ui/login/poll", headers={CSRF_HEADER: csrf}).status_code == 400

    cancelled = stack.search.application.test_client()
    csrf = approved_flow(stack, cancelled, "bob")
    poll_with_nextcloud_down(stack, cancelled, csrf)
    assert len(sim.tree.user("bob").passwords) == 2
    answer = cancelled.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
    assert answer.get_json() == {"cancelled": True}
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert session(cancelled)["signing_in"] is False


def during_the_check(
    monkeypatch: pytest.MonkeyPatch,
    client: FlaskClient,
    path: str,
    csrf: str,
    *,
    step: str = "resolve_caller",
    after: bool = False,
) -> list:
    """Makes the search page's next ``step`` (``resolve_caller``: the check of credentials;
    ``poll_login_flow``: Nextcloud's poll) send a ``POST`` of ``path`` from ``client`` —
    before it (Nextcloud is asked after that request) or ``after`` it (Nextcloud answered,
    the poll has not gone on yet): a request made while a poll is under way, in a set order.
    The list it returns gets that request's answer (status, JSON)."""
    import search_api.ui

    answers: list = []
    original = getattr(search_api.ui, step)

    def meanwhile() -> None:
        answers.append(None)  # the request's own steps go straight on
        other = client.post(path, headers={CSRF_HEADER: csrf})
        answers[0] = (other.status_code, other.get_json())

    def wrapped(*args: object, **kwargs: object) -> object:
        first = not answers
        if first and not after:
            meanwhile()
        result = original(*args, **kwargs)
        if first and after:
            meanwhile()
        return result

    monkeypatch.setattr(search_api.ui, step, wrapped)
    return answers


@pytest.mark.parametrize("held", [False, True])
def test_two_polls_at_once_sign_in_once(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """The flow's credentials went into the session before their check: a second poll while
    the first one checked them (two tabs, a page reloaded during its poll) found them and
    signed in too — two signed-in sessions for one sign-in, the browser keeping one cookie.
    So did two polls after a failed check (``held``). The poll that takes them checks them;
    the other one waits."""
    client = stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    if held:
        poll_with_nextcloud_down(stack, client, csrf)
    other = during_the_check(monkeypatch, client, "/ui/login/poll", csrf)
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 200 and done.get_json()["user"] == "bob"
    assert other == [(200, {"user": None})]
    assert client.get("/v1/folders").status_code == 200


@pytest.mark.parametrize(
    ("held", "step"),
    [(False, "poll_login_flow"), (False, "resolve_caller"), (True, "resolve_caller")],
)
def test_a_cancel_while_a_poll_runs_wins_and_deletes_the_app_password(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, held: bool, step: str
) -> None:
    """A cancel made while a poll had the flow's credentials — just received from Nextcloud
    (``poll_login_flow``), or confirmed by Nextcloud and not yet signed in with
    (``resolve_caller``), first time or kept from a failed check (``held``) — let that poll
    sign in: the user who cancelled was signed in after all, or (kept ones) with an app
    password the cancel had deleted. The cancel wins: the poll answers that no sign-in is
    under way, and the app password is deleted in Nextcloud (nextcloud/server
    ``AppPasswordController::deleteAppPassword``)."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    if held:
        poll_with_nextcloud_down(stack, client, csrf)
    cancel = during_the_check(monkeypatch, client, "/ui/login/cancel", csrf, step=step, after=True)
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 400, done.get_json()
    assert (done.get_json()["code"], done.get_json()["field"]) == ("invalid_value", "poll_token")
    assert cancel == [(200, {"cancelled": True})]
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert session(client)["user"] is None and session(client)["signing_in"] is False
    assert client.get("/v1/folders").status_code == 401


def session_key(stack: Stack, client: FlaskClient) -> str:
    """The Redis key of ``client``'s search-page session."""
    digest = hashlib.sha256(client.get_cookie(COOKIE).value.encode()).hexdigest()
    return stack.settings.names.ui_session(digest)


def test_a_worker_killed_while_checking_the_flows_credentials_loses_nothing(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow's credentials were stored only when their check failed: a worker killed
    during the check lost them — Nextcloud had handed them out once and deleted the flow, so
    the page waited for an approval already given until the flow's 20 minutes ran out, and the
    app password stayed unused in Nextcloud. They are stored as they arrive; the poll checking
    them holds them for ``FLOW_CHECK_SECONDS``, after which the next poll checks them again."""
    import search_api.ui

    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")

    def killed(*args: object, **kwargs: object) -> None:
        # what a gunicorn worker does past its timeout (SIGABRT: Worker.handle_abort calls
        # sys.exit(1)); after a SIGKILL nothing of the request runs on either
        raise SystemExit(1)

    with monkeypatch.context() as patched:
        patched.setattr(search_api.ui, "resolve_caller", killed)
        with pytest.raises(SystemExit):
            client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert session(client)["signing_in"] is True
    assert "Basic" not in json.dumps(session(client))  # held server-side only
    # the dead worker's claim holds until it runs out: no other poll checks them meanwhile
    assert client.post("/ui/login/poll", headers={CSRF_HEADER: csrf}).get_json() == {"user": None}
    stack.services.redis.hset(session_key(stack, client), "flow_check", "dead 0")  # ran out
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 200 and done.get_json()["user"] == "bob"
    assert client.get("/v1/folders").status_code == 200
    out = client.post("/ui/logout", headers={CSRF_HEADER: done.get_json()["csrf"]})
    assert out.get_json() == {"app_password_deleted": True}
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


def test_a_check_outliving_its_claim_does_not_sign_in_twice(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check slower than ``FLOW_CHECK_SECONDS`` lets the next poll check the credentials too
    (its claim ran out, as a dead worker's does); only the poll whose claim is there signs in,
    so one sign-in still makes one session: the slow poll answers that no sign-in is under way
    (the session it polled for was replaced)."""
    import search_api.ui

    client = stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    key = session_key(stack, client)
    check = search_api.ui.resolve_caller
    answers: list = []

    def slow(*args: object, **kwargs: object) -> object:
        if not answers:  # the first poll's check: its claim runs out, another poll comes
            answers.append(None)
            stack.services.redis.hset(key, "flow_check", "slow 0")
            other = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
            answers[0] = (other.status_code, other.get_json())
        return check(*args, **kwargs)

    monkeypatch.setattr(search_api.ui, "resolve_caller", slow)
    first = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    (status, body) = answers[0]
    assert status == 200 and body["user"] == "bob"  # the poll that took the check over
    assert first.status_code == 400, first.get_json()  # its session was replaced meanwhile
    assert client.get("/v1/folders").status_code == 200


def test_a_sign_in_cancelled_and_started_again_during_a_check_waits_for_the_new_flow(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guard (passes before and after the claim-takeover fix): a cancel and a new Login Flow
    made while a poll checks the first flow's credentials. That poll does not sign in (400),
    the first flow's app password is deleted, and the new flow, approved, signs in."""
    import search_api.ui

    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    check = search_api.ui.resolve_caller
    started: list[str] = []

    def cancelled_and_started_again(*args: object, **kwargs: object) -> object:
        if not started:
            client.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
            again = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
            started.append(again.get_json()["login_url"])
        return check(*args, **kwargs)

    monkeypatch.setattr(search_api.ui, "resolve_caller", cancelled_and_started_again)
    first = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert first.status_code == 400, first.get_json()
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert session(client)["signing_in"] is True  # the new flow
    assert sim.app_state["login_flows"].approve(started[0], "bob", PASSWORDS["bob"])
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 200 and done.get_json()["user"] == "bob"


@pytest.mark.parametrize("outcome", ["nextcloud down", "refused"])
def test_a_check_whose_claim_another_poll_took_over_says_the_sign_in_goes_on(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    """A check that outlived its claim, while another poll (another worker) holds the claim it
    took over, and that then failed — Nextcloud down, or refusing the credentials — answered
    400 "no sign-in under way", though the sign-in goes on in that poll: the tab that sent it
    stopped waiting and said so. It answers as a poll finding another one checking does,
    ``{"user": null}``, and the credentials stay for the poll holding the claim."""
    import search_api.ui

    client = stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    key = session_key(stack, client)
    check = search_api.ui.resolve_caller

    def outlived(*args: object, **kwargs: object) -> object:
        # its claim ran out and another worker's poll claimed the credentials, for as long
        stack.services.redis.hset(key, "flow_check", "other 99999999999999")
        if outcome == "refused":  # the app password revoked in Nextcloud meanwhile
            (made,) = stack.sim.tree.user("bob").passwords - {PASSWORDS["bob"]}
            assert stack.sim.app_state["login_flows"].delete_app_password("bob", made)
            return check(*args, **kwargs)
        stack.sim.faults.set("ocs", status=503)
        try:
            return check(*args, **kwargs)
        finally:
            stack.sim.faults.clear()

    monkeypatch.setattr(search_api.ui, "resolve_caller", outlived)
    first = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert (first.status_code, first.get_json()) == (200, {"user": None})
    assert stack.services.redis.hget(key, "flow_check") == b"other 99999999999999"
    assert session(client)["signing_in"] is True


def poll_with_redis_down(
    monkeypatch: pytest.MonkeyPatch, client: FlaskClient, csrf: str, step: str
) -> TestResponse:
    """A poll of ``client`` during which Redis fails at the sessions' ``step`` (a method of
    :class:`~ncindex.web.session.UiSessions`): its answer."""
    from ncindex.web.session import UiSessions

    def down(*args: object) -> None:
        raise redis.ConnectionError("Redis is down")

    with monkeypatch.context() as patched:
        patched.setattr(UiSessions, step, down)
        return client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})


def test_flow_credentials_holding_a_control_character_are_a_bad_gateway_and_deleted(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Login Flow whose credentials hold a control character: Nextcloud makes none
    (nextcloud/server ``core/Service/LoginFlowV2Service.php`` ``flowDone``: 72 letters and
    digits of ``ISecureRandom::generate``), but the poll raised the ``InputError`` of
    ``refuse_basic_controls`` unhandled, a 500 (failed on main so), leaving the session
    holding them and every later poll answering the same. Now 502 ``backend_unavailable``,
    as an unreadable poll is; the sign-in is over and its app password deleted, not left
    unused."""
    from ncindex.simulator import loginflow

    made = loginflow._random
    monkeypatch.setattr(
        loginflow,
        "_random",
        lambda n: made(n) + ("\n" if n == loginflow.APP_PASSWORD_CHARS else ""),
    )
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    assert any("\n" in p for p in sim.tree.user("bob").passwords)  # made so
    polled = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert polled.status_code == 502, polled.get_json()
    assert polled.get_json()["code"] == "backend_unavailable"
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}  # deleted
    after = session(client)
    assert after["user"] is None and after["signing_in"] is False
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 0  # settled


def test_credentials_redis_cannot_keep_are_deleted_and_the_sign_in_started_again(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis failing as the flow's credentials arrived answered 503 "sessions cannot be read
    or written", and the session kept the poll token of a flow Nextcloud had spent: once Redis
    was back every poll answered "not yet" (Nextcloud's poll of a spent flow is 404, as for one
    not approved) until the 20 minutes of an anonymous session ran out. The app password is
    deleted and the answer says to start again (``restart``); a new flow then signs in."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    failed = poll_with_redis_down(monkeypatch, client, csrf, "receive_flow")
    assert failed.status_code == 503
    assert (failed.get_json()["code"], failed.get_json()["restart"]) == (
        "backend_unavailable",
        True,
    )
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}  # deleted, not left unused
    assert sign_in_with_flow(stack, client, "bob")["user"] == "bob"


@pytest.mark.parametrize("other", ["typed", "new flow"])
def test_another_sign_in_deletes_the_app_password_of_flow_credentials_held(
    stack: Stack, other: str
) -> None:
    """Credentials a flow gave, held after a failed check, were dropped by a typed sign-in
    (the session replaced) and kept by a new Login Flow (whose polls then signed in with them,
    not with the new flow): either way their app password stayed unused in Nextcloud. The other
    sign-in ends that flow and deletes its app password."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    poll_with_nextcloud_down(stack, client, csrf)
    assert len(sim.tree.user("bob").passwords) == 2
    if other == "typed":
        typed = client.post(
            "/ui/login/password",
            json={"login_name": "bob", "app_password": PASSWORDS["bob"]},
            headers={CSRF_HEADER: csrf},
        )
        assert typed.status_code == 200 and typed.get_json()["user"] == "bob"
        assert client.get("/v1/folders").status_code == 200
    else:
        started = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
        assert started.status_code == 200
        now = session(client)
        assert now["signing_in"] is True and now["login_url"] == started.get_json()["login_url"]
        pending = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
        assert pending.get_json() == {"user": None}  # the new flow, not yet approved
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


def test_a_folder_share_revoked_since_the_scan_leaves_the_folder_list(stack: Stack) -> None:
    # unsharing fires no event: bob still holds the documents until his scan, but his files
    # root (one PROPFIND) no longer holds the share's folder, so it is not offered
    sim = stack.sim
    plan = sim.put_file("alice", "/Harbour/Plans/quay.md", b"Quay plan: new bollards.")
    sim.put_file("bob", "/Bobs/notes.md", b"Bob's harbour notes.")
    wait_until(lambda: stack.points(f"file:{plan}"), 30)
    stack.wait_idle(30)
    sim.share("alice", "/Harbour", "bob")
    Indexer(stack.services).index_node("bob", plan)  # as bob's scan would

    def bobs_folders() -> list[str]:
        response = stack.search.get("/v1/folders", auth=("bob", PASSWORDS["bob"]))
        assert response.status_code == 200, response.get_json()
        return response.get_json()["folders"]

    wait_until(lambda: "/Bobs" in bobs_folders(), 30)
    assert bobs_folders() == ["/Bobs", "/Harbour", "/Harbour/Plans"]
    sim.unshare("alice", "/Harbour", "bob")
    assert "user:bob" in stack.points(f"file:{plan}")[0].payload["acl"]  # until his scan
    assert bobs_folders() == ["/Bobs"]
    # a root Nextcloud refuses to list (403: an admin's access-control rule) is not a 500:
    # the index's folders stay offered, as when Nextcloud cannot be asked
    sim.faults.set("webdav", status=403, times=1, method="PROPFIND")
    assert bobs_folders() == ["/Bobs", "/Harbour", "/Harbour/Plans"]
    # nor does a slow one hold the list for the whole request timeout (10 s): the index's
    sim.faults.set("webdav", delay=CHECK_SECONDS + 1.5, times=1, method="PROPFIND")
    assert bobs_folders() == ["/Bobs", "/Harbour", "/Harbour/Plans"]


def test_a_folder_share_mounted_below_the_top_and_revoked_leaves_the_folder_list(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mounted in a folder of bob's own, under another name than alice's: the root's listing
    # still holds /Work, so only the SEARCH of bob's folders tells the share is gone
    sim = stack.sim
    plan = sim.put_file("alice", "/Harbour/Plans/quay.md", b"Quay plan: new bollards.")
    sim.put_file("bob", "/Bobs/notes.md", b"Bob's harbour notes.")
    wait_until(lambda: stack.points(f"file:{plan}"), 30)
    stack.wait_idle(30)
    assert sim.share("alice", "/Harbour", "bob", "/Work/Port") == "/Work/Port"
    Indexer(stack.services).index_node("bob", plan)  # as bob's scan would
    indexed = ["/Bobs", "/Work", "/Work/Port", "/Work/Port/Plans"]

    def bobs_folders() -> list[str]:
        response = stack.search.get("/v1/folders", auth=("bob", PASSWORDS["bob"]))
        assert response.status_code == 200, response.get_json()
        return response.get_json()["folders"]

    wait_until(lambda: "/Bobs" in bobs_folders(), 30)
    assert bobs_folders() == indexed
    sim.unshare("alice", "/Harbour", "bob")
    assert "user:bob" in stack.points(f"file:{plan}")[0].payload["acl"]  # until his scan
    assert bobs_folders() == ["/Bobs", "/Work"]
    # the SEARCH refused, slower than the lists wait, or its answer perhaps cut short (as
    # long as the limit): the folders below the top stay as the index has them
    sim.faults.set("dav-search", status=403, times=1, method="SEARCH")
    assert bobs_folders() == indexed
    sim.faults.set("dav-search", delay=CHECK_SECONDS + 1.5, times=1, method="SEARCH")
    assert bobs_folders() == indexed
    monkeypatch.setattr(facets, "FOLDER_SEARCH_LIMIT", 2)  # bob has two folders now
    assert bobs_folders() == indexed


def test_the_tag_list_offers_only_the_tags_the_caller_sees_now(stack: Stack) -> None:
    # a tag renamed or made invisible fires no event the index hears: its documents keep the
    # old name until they are read again; and a document's tags are those its last reader
    # saw, an admin included
    sim, admin = stack.sim, ADMIN[0]
    kept, renamed, hidden = (sim.create_tag(t) for t in ("harbour", "quay", "bollards"))
    admins_only = sim.create_tag("audit", user_visible=False, user_assignable=False)
    plan = sim.put_file("alice", "/Harbour/plan.md", b"Quay plan: new bollards.")
    wait_until(lambda: stack.points(f"file:{plan}"), 30)
    for tag in (kept, renamed, hidden):
        sim.assign_tag("alice", "/Harbour/plan.md", tag)
    sim.share("alice", "/Harbour", admin)
    sim.assign_tag(admin, "/Harbour/plan.md", admins_only)
    sim.flush_deliveries(timeout=5)
    stack.wait_idle(30)
    Indexer(stack.services).index_node(admin, plan)  # as the admin's scan would
    everything = ["audit", "bollards", "harbour", "quay"]
    assert stack.points(f"file:{plan}")[0].payload["tags"] == everything

    def alices_tags() -> list[str]:
        response = stack.search.get("/v1/tags", auth=("alice", PASSWORDS["alice"]))
        assert response.status_code == 200, response.get_json()
        return response.get_json()["tags"]

    assert alices_tags() == ["bollards", "harbour", "quay"]
    sim.tags.tags[renamed].name = "wharf"
    sim.tags.tags[hidden].user_visible = False
    assert alices_tags() == ["harbour"]
    # Nextcloud refusing or slower than the lists wait: the index's list, as it is
    sim.faults.set("systemtags", status=503, times=1, method="PROPFIND")
    assert alices_tags() == everything
    sim.faults.set("systemtags", delay=CHECK_SECONDS + 1.5, times=1, method="PROPFIND")
    assert alices_tags() == everything


NOT_WEB_URLS = [
    "javascript:alert(document.cookie)",
    " javascript:alert(1)",  # browsers strip the space, then run it
    "\x01javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "//evil.example/index.php/login/v2/flow/x",
    "/index.php/login/v2/flow/x",
    "ftp://cloud.example.test/x",
    "https://",
    "http:///index.php/login/v2/flow/x",
    "https://[::1/x",
    "",
    42,
    None,
]


def test_a_login_url_that_is_not_http_is_refused(redis_url: str) -> None:
    """The page links to and opens the ``login`` URL Nextcloud's Login Flow answers: one that
    is not an absolute http(s) URL (``javascript:``, ``data:``, scheme-relative …) is a 502
    saying so, and no flow is kept; an http(s) one is handed on."""
    login = {"url": None}

    def nextcloud(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/index.php/login/v2/poll":  # an answer of no known shape
            return httpx.Response(200, json={"server": 42})
        assert request.url.path == "/index.php/login/v2"
        return httpx.Response(200, json={"poll": {"token": "p" * 128}, "login": login["url"]})

    settings = Settings(
        nextcloud_url="https://cloud.example.test", redis_url=redis_url, namespace="ui-login-url"
    )
    services = Services(settings, http_transport=httpx.MockTransport(nextcloud))
    client = create_app(settings, services=services).test_client()
    csrf = session(client)["csrf"]
    for url in NOT_WEB_URLS:
        login["url"] = url
        refused = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
        assert refused.status_code == 502, (url, refused.get_json())
        assert refused.get_json()["code"] == "backend_unavailable"
        assert "http or https login URL" in refused.get_json()["detail"]
        assert session(client)["signing_in"] is False, url
    for url in ("https://cloud.example.test/index.php/login/v2/flow/abc",
                "HTTP://cloud.example.test:8080/login/v2/flow/abc"):  # fmt: skip
        login["url"] = url
        started = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
        assert started.status_code == 200 and started.get_json() == {"login_url": url}
        assert session(client)["login_url"] == url
    # its poll answered in no known shape: a bad gateway too, as the start's (it was a 503)
    polled = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert polled.status_code == 502 and polled.get_json()["code"] == "backend_unavailable"
    services.close()


@pytest.mark.parametrize(
    "answer",
    [
        '{"server": "s", "loginName": "bob", "appPassword": "pw\\ud800"}',
        '{"server": "s", "loginName": null, "appPassword": "pw"}',
        '{"server": "s", "loginName": "bob", "appPassword": 42}',
    ],
    ids=["lone-surrogate", "null", "number"],
)
def test_a_poll_answered_credentials_that_are_no_text_is_a_bad_gateway(
    redis_url: str, answer: str
) -> None:
    """Nextcloud's poll answers its credentials as strings (nextcloud/server
    ``core/Data/LoginFlowV2Credentials.php`` ``jsonSerialize``). A lone surrogate, which no
    UTF-8 Basic header can hold, raised ``UnicodeEncodeError`` in the poll (a 500), and a
    ``null`` or a number was sent to Nextcloud as ``"None"`` or ``"42"`` (401; both failed on main):
    now 502 ``backend_unavailable``, as another answer of no known shape, Nextcloud asked
    nothing more."""
    seen: list[str] = []

    def nextcloud(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/index.php/login/v2/poll":
            return httpx.Response(200, text=answer, headers={"Content-Type": "application/json"})
        login = "https://cloud.example.test/index.php/login/v2/flow/abc"
        return httpx.Response(200, json={"poll": {"token": "p" * 128}, "login": login})

    settings = Settings(
        nextcloud_url="https://cloud.example.test", redis_url=redis_url, namespace="ui-poll-text"
    )
    services = Services(settings, http_transport=httpx.MockTransport(nextcloud))
    client = create_app(settings, services=services).test_client()
    csrf = session(client)["csrf"]
    assert client.post("/ui/login/flow", headers={CSRF_HEADER: csrf}).status_code == 200
    polled = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert polled.status_code == 502, polled.get_json()
    assert polled.get_json()["code"] == "backend_unavailable"
    assert seen == ["/index.php/login/v2", "/index.php/login/v2/poll"], seen
    services.close()


def test_hostile_sign_in_input_is_a_4xx_naming_the_field(redis_url: str) -> None:
    """A lone surrogate in the typed login name or app password cannot be sent as UTF-8 in a
    Basic header: 400 ``invalid_value`` naming the field, and Nextcloud is not asked (it was a
    500); nor is a control character in the login name or the app password (it was sent, and
    answered 401). A
    CSRF token with non-ASCII characters (a WSGI server hands header bytes over as latin-1) is
    403 ``csrf_failed`` on the page's routes and on a signed-in session's ``/v1/`` request (it
    was a 500), while a UTF-8 login name still signs in."""
    asked: list[str] = []

    def nextcloud(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/ocs/v2.php/cloud/user"
        asked.append(request.headers["Authorization"])
        data = {"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": {"id": "ålice"}}}
        return httpx.Response(200, json=data)

    settings = Settings(
        nextcloud_url="https://cloud.example.test", redis_url=redis_url, namespace="ui-hostile"
    )
    services = Services(settings, http_transport=httpx.MockTransport(nextcloud))
    client = create_app(settings, services=services).test_client()
    csrf = session(client)["csrf"]
    for name, body in [
        ("login_name", b'{"login_name": "al\\ud800ice", "app_password": "pw"}'),
        ("app_password", b'{"login_name": "alice", "app_password": "\\udfffpw"}'),
        # control characters: no Basic user-id holds one (RFC 7617 §2); they were sent to
        # Nextcloud and answered 401 "Nextcloud rejected the credentials"
        ("login_name", b'{"login_name": "al\\u0000ice", "app_password": "pw"}'),
        ("login_name", b'{"login_name": "al\\tice", "app_password": "pw"}'),
        ("login_name", b'{"login_name": "alice\\u007f", "app_password": "pw"}'),
        # C1 controls (U+0080-U+009F) are control characters too (Unicode's Cc; RFC 7617
        # §2.1's UTF-8 user-id is a PRECIS identifier, which refuses them, RFC 8264 §9.12);
        # they were sent to Nextcloud
        ("login_name", b'{"login_name": "al\\u0085ice", "app_password": "pw"}'),
        ("login_name", b'{"login_name": "al\\u009bice", "app_password": "pw"}'),
        # in the app password as well (a line break pasted with it, a C1 control): they
        # were sent to Nextcloud
        ("app_password", b'{"login_name": "alice", "app_password": "pw\\n"}'),
        ("app_password", b'{"login_name": "alice", "app_password": "p\\u0000w"}'),
        ("app_password", b'{"login_name": "alice", "app_password": "p\\u0085w"}'),
    ]:
        refused = client.post("/ui/login/password", data=body, headers={CSRF_HEADER: csrf})
        assert refused.status_code == 400, (name, refused.get_json())
        assert refused.get_json()["code"] == "invalid_value"
        assert refused.get_json()["field"] == name
    assert asked == []
    for token in ("ä", "Ã¤", csrf[:-1] + "é"):
        refused = client.post("/ui/login/cancel", headers={CSRF_HEADER: token})
        assert refused.status_code == 403, (token, refused.get_json())
        assert refused.get_json()["field"] == CSRF_HEADER
    typed = {"login_name": "ålice", "app_password": "pw"}
    signed = client.post("/ui/login/password", json=typed, headers={CSRF_HEADER: csrf})
    assert signed.status_code == 200 and signed.get_json()["user"] == "ålice"
    assert asked == ["Basic " + base64.b64encode("ålice:pw".encode()).decode()]
    search = {"query": "lighthouse"}
    refused = client.post("/v1/search", json=search, headers={CSRF_HEADER: "Ã¤"})
    assert refused.status_code == 403 and refused.get_json()["code"] == "csrf_failed"
    services.close()
    keys = redis.Redis.from_url(redis_url)
    for key in keys.scan_iter("ui-hostile:*"):
        keys.delete(key)


def test_a_query_parameter_on_the_page_routes_or_the_openapi_document_is_named(
    redis_url: str,
) -> None:
    """The ``/ui/`` routes and ``GET /openapi.json`` take no query parameter; one was ignored
    without a word (a 200), as ``GET /v1/status`` and the other API routes do not: 400
    ``unknown_field`` naming it, the session unchanged. The page itself (``GET /?q=…``, its
    link with a query) and its files are served as before."""
    settings = Settings(
        nextcloud_url="https://cloud.example.test", redis_url=redis_url, namespace="ui-query"
    )
    services = Services(settings, http_transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    client = create_app(settings, services=services).test_client()
    csrf = session(client)["csrf"]
    for method, path in [
        ("GET", "/ui/session?lang=de"),
        ("POST", "/ui/login/cancel?lang=de"),
        ("POST", "/ui/login/flow?lang=de"),
        ("POST", "/ui/logout?lang=de"),
        ("GET", "/openapi.json?lang=de"),
    ]:
        refused = client.open(path, method=method, headers={CSRF_HEADER: csrf})
        assert refused.status_code == 400, (path, refused.get_json())
        assert refused.get_json()["code"] == "unknown_field"
        assert refused.get_json()["field"] == "lang"
    assert session(client)["csrf"] == csrf  # the session was not ended by the refused logout
    for path in ("/?q=lighthouse", "/ui/static/app.js?v=1"):
        with client.get(path) as served:  # a file: closed when done
            assert served.status_code == 200, path
    assert client.get("/openapi.json").status_code == 200
    services.close()
    keys = redis.Redis.from_url(redis_url)
    for key in keys.scan_iter("ui-query:*"):
        keys.delete(key)


def test_a_typed_sign_in_too_long_for_a_basic_header_is_a_400_naming_the_field(
    redis_url: str,
) -> None:
    """A login name and app password within ``MAX_FIELD_CHARS`` characters each, but of
    four-byte characters, make a Basic header past ``MAX_AUTHORIZATION_CHARS``: it was
    answered 401 ``unauthenticated`` ("header too long") as if Nextcloud had refused the
    password. It is a 400 ``invalid_value`` on ``app_password``, and Nextcloud is not asked;
    one such field alone still fits and signs in."""
    asked: list[str] = []

    def nextcloud(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers["Authorization"])
        data = {"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": {"id": "alice"}}}
        return httpx.Response(200, json=data)

    settings = Settings(
        nextcloud_url="https://cloud.example.test", redis_url=redis_url, namespace="ui-long-basic"
    )
    services = Services(settings, http_transport=httpx.MockTransport(nextcloud))
    client = create_app(settings, services=services).test_client()
    csrf = session(client)["csrf"]
    wide = "\U0001f600" * MAX_FIELD_CHARS  # 4 UTF-8 bytes each
    typed = {"login_name": wide, "app_password": wide}
    refused = client.post("/ui/login/password", json=typed, headers={CSRF_HEADER: csrf})
    assert refused.status_code == 400, refused.get_json()
    assert refused.get_json()["code"] == "invalid_value"
    assert refused.get_json()["field"] == "app_password"
    assert asked == []
    typed = {"login_name": "alice", "app_password": wide}  # one wide field fits
    signed = client.post("/ui/login/password", json=typed, headers={CSRF_HEADER: csrf})
    assert signed.status_code == 200 and signed.get_json()["user"] == "alice"
    assert len(asked) == 1 and len(asked[0]) <= MAX_AUTHORIZATION_CHARS
    services.close()


def due_now(stack: Stack) -> None:
    """Make every entry of the record of app passwords to delete due (as beat finds them
    once their :data:`~ncindex.web.revocations.RETRY_SECONDS`, or their session's lifetime,
    has run out)."""
    record = stack.settings.names.ui_revoke
    for auth in stack.services.redis.zrange(record, 0, -1):
        stack.services.redis.zadd(record, {auth: 0})


@pytest.mark.parametrize("failure", ["delete failed", "worker killed"])
@pytest.mark.parametrize("drop", ["cancel", "typed sign-in", "new flow"])
def test_an_app_password_dropped_but_not_deleted_is_deleted_once_nextcloud_answers(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, drop: str, failure: str
) -> None:
    """A cancel, or another sign-in, while a flow's credentials were held removed them from
    Redis and then deleted their app password in Nextcloud: a delete that failed (only
    logged) or a worker killed between the two left it alive and unused. The step that
    removes them records them to delete; beat's sweep deletes the app password once
    Nextcloud answers."""
    from ncindex.nextcloud.client import NextcloudClient
    from ncindex.web.revocations import revocations

    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    poll_with_nextcloud_down(stack, client, csrf)
    assert len(sim.tree.user("bob").passwords) == 2
    ocs = NextcloudClient.ocs

    def killed_at_delete(self: NextcloudClient, method: str, *args: object, **kw: object) -> object:
        if method == "DELETE":  # the worker dies as it would delete the app password
            raise SystemExit(1)  # as in test_a_worker_killed_while_checking_the_flows_credentials
        return ocs(self, method, *args, **kw)

    with monkeypatch.context() as patched:
        if failure == "worker killed":
            patched.setattr(NextcloudClient, "ocs", killed_at_delete)
        else:  # Nextcloud's DELETE of the app password fails, its user check does not
            sim.faults.set("ocs", status=503, method="DELETE")
        with contextlib.suppress(SystemExit):
            if drop == "cancel":
                client.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
            elif drop == "new flow":
                client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
            else:
                client.post(
                    "/ui/login/password",
                    json={"login_name": "bob", "app_password": PASSWORDS["bob"]},
                    headers={CSRF_HEADER: csrf},
                )
        sim.faults.clear()
    assert len(sim.tree.user("bob").passwords) == 2  # not deleted yet
    sweep = revocations(stack.services)
    assert sweep.sweep() == 0  # the request's own delete is left its RETRY_SECONDS
    due_now(stack)
    assert sweep.sweep() == 1
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 0  # settled


def test_an_expired_session_s_flow_app_password_is_deleted_and_a_live_one_s_never(
    stack: Stack,
) -> None:
    """A page abandoned while its flow's credentials were held (their check failed) left
    their app password unused when its session expired (20 minutes), and so did a signed-in
    session nobody came back to. Beat's sweep deletes the app password of a credential whose
    session is gone, and never one a live session holds, however often it looks (here beat's
    task itself, as the workers run it)."""
    task = stack.celery.tasks[names.REVOKE_APP_PASSWORDS]

    def sweep() -> int:
        return int(task.apply().get())

    sim = stack.sim
    abandoned = stack.search.application.test_client()
    csrf = approved_flow(stack, abandoned, "bob")
    poll_with_nextcloud_down(stack, abandoned, csrf)
    signed_in = stack.search.application.test_client()
    signed_in_csrf = sign_in_with_flow(stack, signed_in, "alice")["csrf"]
    due_now(stack)
    assert sweep() == 0  # both sessions live: their credentials stay
    assert len(sim.tree.user("bob").passwords) == 2
    assert len(sim.tree.user("alice").passwords) == 2
    assert signed_in.get("/v1/folders").status_code == 200

    stack.services.redis.delete(session_key(stack, abandoned))  # expired, as Redis does
    due_now(stack)
    assert sweep() == 1
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert len(sim.tree.user("alice").passwords) == 2  # alice's session is live
    assert signed_in.get("/v1/folders").status_code == 200

    stack.services.redis.delete(session_key(stack, signed_in))
    due_now(stack)
    assert sweep() == 1
    assert sim.tree.user("alice").passwords == {PASSWORDS["alice"]}
    answer = signed_in.post("/ui/logout", headers={CSRF_HEADER: signed_in_csrf})
    assert answer.status_code == 401  # the session had ended


def test_a_poll_meeting_a_redis_outage_says_the_sessions_failed_not_nextcloud(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll answered 503 when Redis failed as when Nextcloud did, and the page said
    "Nextcloud is not answering" for both. The sessions' failure says so (``backend``)."""
    client = stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    failed = poll_with_redis_down(monkeypatch, client, csrf, "load")
    assert failed.status_code == 503
    body = failed.get_json()
    assert (body["code"], body["backend"]) == ("backend_unavailable", "sessions")
    nextcloud_down = poll_with_nextcloud_down(stack, client, csrf)
    assert "backend" not in nextcloud_down


def flow_password(stack: Stack, user: str) -> str:
    """The one app password of ``user`` a Login Flow made (the simulator's record)."""
    (made,) = stack.sim.tree.user(user).passwords - {PASSWORDS[user]}
    return made


@pytest.mark.parametrize("held", ["signed in with it", "its delete failed"])
def test_a_flow_s_app_password_typed_on_the_page_is_kept(stack: Stack, held: str) -> None:
    """Nextcloud's login page can finish a Login Flow with an app password the user already
    has (README), which they may then type on the page to keep it. Typed in the session that
    signed in with it, the sign-in deleted it at once (the old session's flow credential,
    dropped as the new session's origin was not ``flow``); typed after a cancel whose delete
    failed, the sweep deleted it later. Either way the typed session was signed out by the
    next request. The typed credential is the user's: not dropped, and the record forgets it."""
    from ncindex.web.revocations import revocations

    sim, client = stack.sim, stack.search.application.test_client()
    if held == "signed in with it":
        csrf = sign_in_with_flow(stack, client, "bob")["csrf"]
    else:
        csrf = approved_flow(stack, client, "bob")
        poll_with_nextcloud_down(stack, client, csrf)
        sim.faults.set("ocs", status=503, method="DELETE")
        try:
            client.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
        finally:
            sim.faults.clear()
    made = flow_password(stack, "bob")
    typed = client.post(
        "/ui/login/password",
        json={"login_name": "bob", "app_password": made},
        headers={CSRF_HEADER: csrf},
    )
    assert typed.status_code == 200 and typed.get_json()["user"] == "bob"
    assert made in sim.tree.user("bob").passwords
    due_now(stack)
    assert revocations(stack.services).sweep() == 0
    assert made in sim.tree.user("bob").passwords
    assert client.get("/v1/folders").status_code == 200
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 0


def test_a_delete_answered_404_is_settled_not_a_500_nor_a_failed_sweep(stack: Stack) -> None:
    """``deleteAppPassword``'s route answered 404 (a proxy in front of Nextcloud that does not
    pass ``/ocs/v2.php/core/…``): ``NotFound`` escaped the delete, so a cancel was a 500 and
    beat's sweep raised, ending before the rest of its batch. An answer is an answer: logged,
    the entry forgotten, the request answered, the sweep goes on."""
    from ncindex.web.revocations import revocations

    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    poll_with_nextcloud_down(stack, client, csrf)
    abandoned = stack.search.application.test_client()
    poll_with_nextcloud_down(stack, abandoned, approved_flow(stack, abandoned, "alice"))
    sim.faults.set("ocs", status=404, method="DELETE")
    try:
        cancelled = client.post("/ui/login/cancel", headers={CSRF_HEADER: csrf})
        assert cancelled.status_code == 200 and cancelled.get_json() == {"cancelled": True}
        assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 1  # alice's

        stack.services.redis.delete(session_key(stack, abandoned))  # expired
        due_now(stack)
        assert revocations(stack.services).sweep() == 0
    finally:
        sim.faults.clear()
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 0


def test_a_sweep_ends_at_the_first_delete_nextcloud_does_not_answer(stack: Stack) -> None:
    """A sweep went on through its whole batch (:data:`~ncindex.web.revocations.SWEEP_BATCH`)
    while Nextcloud did not answer: a timeout each, a worker held for the batch times
    ``NCINDEX_HTTP_TIMEOUT``. The first delete Nextcloud does not answer ends it; the rest
    of the batch is due a retry later, and deleted then."""
    from ncindex.web.revocations import revocations

    sim = stack.sim
    for user in ("alice", "bob"):
        abandoned = stack.search.application.test_client()
        poll_with_nextcloud_down(stack, abandoned, approved_flow(stack, abandoned, user))
        stack.services.redis.delete(session_key(stack, abandoned))  # expired
    due_now(stack)
    sim.faults.set("ocs", status=503, method="DELETE", times=1)  # the next delete only
    try:
        assert revocations(stack.services).sweep() == 0
    finally:
        sim.faults.clear()
    assert len(sim.tree.user("alice").passwords) == len(sim.tree.user("bob").passwords) == 2
    due_now(stack)
    assert revocations(stack.services).sweep() == 2
    assert sim.tree.user("alice").passwords == {PASSWORDS["alice"]}
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


def test_flow_credentials_whose_check_nextcloud_answered_404_are_deleted(stack: Stack) -> None:
    """A poll whose user check of the flow's credentials got any refusal — a 404 too (a proxy
    in front of Nextcloud), not only a 401 — forgot them and their record: their app password,
    alive in Nextcloud, was never deleted. Only a 401 says it is no more; otherwise it is
    deleted at once (and swept, should that fail)."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    sim.faults.set("ocs", status=404, method="GET")  # the check; the delete is answered
    try:
        refused = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    finally:
        sim.faults.clear()
    assert refused.status_code == 401 and refused.get_json()["code"] == "unauthenticated"
    assert session(client)["signing_in"] is False
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 0


def test_a_credential_nextcloud_never_answers_for_does_not_stop_the_others(
    stack: Stack,
) -> None:
    """A sweep ends at the first delete Nextcloud does not answer, and every entry of its
    batch is due again at the same time: ties sort by member, so the same credential came
    first again at every sweep. One Nextcloud never answers for (here alice's, which sorts
    before bob's; sent to an address nothing listens on) is made due after the rest of its
    batch: the next sweep deletes bob's. A guard of the sweep's early end (passes on the code
    before it, which went on after a failed delete)."""
    from ncindex.nextcloud.client import HeaderAuth, NextcloudClient
    from ncindex.web.revocations import Revocations

    sim, redis_client = stack.sim, stack.services.redis
    record = stack.settings.names.ui_revoke
    for user in ("alice", "bob"):
        abandoned = stack.search.application.test_client()
        poll_with_nextcloud_down(stack, abandoned, approved_flow(stack, abandoned, user))
        redis_client.delete(session_key(stack, abandoned))  # expired
    poison = min(redis_client.zrange(record, 0, -1)).decode()
    assert poison.startswith("Basic " + base64.b64encode(b"alice:").decode())
    nowhere = httpx.Client(base_url="http://127.0.0.1:9", timeout=2)

    def caller(authorization: str) -> NextcloudClient:
        if authorization == poison:
            return NextcloudClient(nowhere, HeaderAuth(authorization))
        return stack.services.caller(authorization)

    sweep = Revocations(stack.services.redis_breaker, stack.settings.names, caller).sweep
    for _ in range(2):  # two sweeps, each once every entry is due, in its order
        for auth, score in redis_client.zrange(record, 0, -1, withscores=True):
            redis_client.zadd(record, {auth: score - 3600_000})
        sweep()
    nowhere.close()
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert len(sim.tree.user("alice").passwords) == 2


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/v1/folders"])
def test_a_session_whose_app_password_nextcloud_revoked_reads_signed_out(
    stack: Stack, noticed_by: str
) -> None:
    """bob signed in with a Login Flow, then revoked that app password in Nextcloud (Settings
    › Security). ``GET /ui/session`` reported him signed in without asking Nextcloud, so the
    page showed him signed in until its first ``/v1/`` call was refused. It now asks OCS
    ``cloud/user`` (one request, within ``CONFIRM_SECONDS``; its answer stands when none
    comes) and, refused, signs the session out as a ``/v1/`` call's 401 does: the same
    session, not signed in — whichever of the two noticed first. Refused with 401, the app
    password is revoked or its stored login password expired (nothing tells them apart, and
    the latter revives at the user's next login: the next test): the step that signs the
    session out keeps its entry for one more delete a day later, not every minute — each is
    one more login Nextcloud refuses from ncindex's own address, counted by its brute-force
    protection against every login ncindex makes (nextcloud/server
    ``lib/private/User/Session.php`` ``logClientIn`` → ``handleLoginFailed`` →
    ``Throttler::registerAttempt``) — and that delete's 401 forgets it."""
    sim, client = stack.sim, stack.search.application.test_client()
    sign_in_with_flow(stack, client, "bob")
    asked = sim.request_count("ocs")
    signed_in = session(client)
    assert signed_in["user"] == "bob" and signed_in["sign_in_ended"] is False
    assert sim.request_count("ocs") == asked + 1  # confirmed: one cloud/user
    stalled = sim.faults.set("ocs", timeout=True, times=1)
    try:  # no answer within CONFIRM_SECONDS: still signed in
        assert session(client)["user"] == "bob"
    finally:
        sim.faults.clear()
    assert stalled.times == 0
    made = flow_password(stack, "bob")
    assert sim.app_state["login_flows"].delete_app_password("bob", made)  # revoked
    ended = session(client) if noticed_by == "/ui/session" else {}
    csrf = ended.get("csrf")
    if noticed_by == "/v1/folders":
        assert client.get("/v1/folders").status_code == 401
    asked = sim.request_count("ocs")
    after = session(client)
    assert after["user"] is None and after["signing_in"] is False
    if csrf is not None:
        assert after["csrf"] == csrf  # the same session, signed out
        assert ended["sign_in_ended"] is True  # the page says so
    assert after["sign_in_ended"] is False  # said once
    assert sim.request_count("ocs") == asked  # signed out: nothing to confirm
    assert client.get("/v1/folders").status_code == 401
    refused_once_then_forgotten(stack, stack.settings.names.ui_revoke_user)
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/v1/folders", "/ui/logout"])
def test_the_delete_a_day_later_is_charged_to_the_caller_s_address(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, noticed_by: str
) -> None:
    """bob, at 203.0.113.7, signs in with a Login Flow and revokes that app password in
    Nextcloud; the 401 that signs him out keeps it for one more delete a day later (7a655a2).
    That delete, sent by beat's sweep, carried no ``X-Forwarded-For``: Nextcloud charged its
    refused login to ncindex's own address, whose every login it then slows down (0.2 s,
    doubling per refusal of the last 12 hours; 429 past 10 within 30 minutes:
    ``Throttler::getDelay``, ``sleepDelayOrThrowOnMax``), so a user repeating this could
    throttle ncindex's own accounts (failed on main: ``None``). The address of the request
    that met the 401 is recorded with the mark and sent with that delete, as with every
    request made for a caller; a sign-out's own delete (``/ui/logout``) sends it too."""
    import ncindex.web.revocations as revocations_module
    from ncindex.web.revocations import revocations

    sent: list[str | None] = []
    real = revocations_module.delete_app_password

    def recorded(client: Any) -> None:
        sent.append(client.forwarded_for)
        real(client)

    monkeypatch.setattr(revocations_module, "delete_app_password", recorded)
    sim, client = stack.sim, stack.search.application.test_client()
    client.environ_base["REMOTE_ADDR"] = "203.0.113.7"
    csrf = sign_in_with_flow(stack, client, "bob")["csrf"]
    assert sim.app_state["login_flows"].delete_app_password("bob", flow_password(stack, "bob"))
    refused_by(client, noticed_by, csrf)
    due_now(stack)
    assert revocations(stack.services).sweep() == 0  # refused again, and forgotten
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 0
    deletes = 2 if noticed_by == "/ui/logout" else 1  # the sign-out's, then the sweep's
    assert sent == ["203.0.113.7"] * deletes, sent


def refused_by(client: FlaskClient, noticed_by: str, csrf: str) -> None:
    """Have the signed-in session of ``client`` meet Nextcloud's 401 of its app password
    through ``noticed_by``: ``/ui/session``'s question, a ``/v1/`` call, or a sign-out's
    delete (``/ui/logout``, ``csrf`` its token)."""
    if noticed_by == "/ui/session":
        assert session(client)["sign_in_ended"] is True
    elif noticed_by == "/ui/logout":
        out = client.post("/ui/logout", headers={CSRF_HEADER: csrf})
        assert out.get_json() == {"app_password_deleted": False}
    else:
        assert client.get("/v1/folders").status_code == 401


def refused_once_then_forgotten(stack: Stack, users: str) -> None:
    """The one entry of the record, whose credential Nextcloud answered 401, is kept ownerless
    and due :data:`~ncindex.web.revocations.REFUSED_RETRY_SECONDS` later (nothing sent before);
    then the sweep's delete, answered 401 again, forgets it: one DELETE."""
    from ncindex.web.revocations import REFUSED_RETRY_SECONDS, RETRY_SECONDS, revocations

    names, redis_ = stack.settings.names, stack.services.redis
    ((_, due),) = redis_.zrange(names.ui_revoke, 0, -1, withscores=True)
    now_ms = redis_.time()[0] * 1000
    assert due > now_ms + (REFUSED_RETRY_SECONDS - RETRY_SECONDS) * 1000  # a day later
    assert redis_.hlen(names.ui_revoke_owner) == 0
    deletes = stack.sim.request_count("ocs", "DELETE")
    assert revocations(stack.services).sweep() == 0  # not due: nothing sent
    due_now(stack)
    assert revocations(stack.services).sweep() == 0  # refused again
    assert stack.sim.request_count("ocs", "DELETE") == deletes + 1
    assert redis_.zcard(names.ui_revoke) == 0 and redis_.hlen(users) == 0  # forgotten


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/v1/folders", "/ui/logout"])
def test_an_app_password_whose_login_password_expired_is_deleted_once_revived(
    stack: Stack, noticed_by: str
) -> None:
    """bob signed in with a Login Flow, then his password changed outside Nextcloud (LDAP):
    Nextcloud marks that app password's stored login password invalid (nextcloud/server
    ``Session::checkTokenCredentials`` → ``PublicKeyTokenProvider::markPasswordInvalid``) and
    answers it 401 as a revoked one (``checkToken`` throws ``TokenPasswordExpiredException``,
    which ``logClientIn`` turns into a plain refusal: OCS 997). ncindex forgot its entry as a
    revoked one's, and his next Login Flow (``LoginFlowV2Service::flowDone`` →
    ``generateToken`` → ``updatePasswords``: ``setPasswordInvalid(false)``) revived it: an
    app password nobody holds, for good (failed on main: the entry was gone, the sweep
    deleted nothing). Nothing tells the two 401s apart, so the entry is kept for one more
    delete a day later, which now deletes it. So for a sign-out whose delete is answered
    401 (``/ui/logout``)."""
    from ncindex.web.revocations import revocations

    sim, client = stack.sim, stack.search.application.test_client()
    csrf = sign_in_with_flow(stack, client, "bob")["csrf"]
    made = flow_password(stack, "bob")
    sim.expire_app_password("bob", made)
    refused_by(client, noticed_by, csrf)
    assert session(client)["user"] is None  # signed out
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 1  # kept
    sign_in_with_flow(stack, client, "bob")  # revives it
    assert made in sim.tree.user("bob").passwords
    due_now(stack)
    assert revocations(stack.services).sweep() == 1
    assert made not in sim.tree.user("bob").passwords
    assert len(sim.tree.user("bob").passwords) == 2  # his own, and the new flow's


def test_a_session_signed_out_by_another_refusal_has_its_app_password_deleted(
    stack: Stack,
) -> None:
    """A ``/v1/`` call whose credential check Nextcloud answered otherwise than 401 — a 404
    (a proxy in front of Nextcloud that does not pass ``cloud/user``) — signs the session out
    too, but says nothing of the app password, which may stand: its entry stays in the record,
    no live session holds it, and beat's sweep deletes it (a guard of the 401 case's
    forgetting, which must not spread to other refusals)."""
    from ncindex.web.revocations import revocations

    sim, client = stack.sim, stack.search.application.test_client()
    sign_in_with_flow(stack, client, "bob")
    sim.faults.set("ocs", status=404, method="GET", times=1)  # the next check only
    try:
        assert client.get("/v1/folders").status_code == 401
    finally:
        sim.faults.clear()
    assert session(client)["user"] is None  # signed out
    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 1
    assert len(sim.tree.user("bob").passwords) == 2
    due_now(stack)
    assert revocations(stack.services).sweep() == 1
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


def test_a_disabled_account_s_session_keeps_its_app_password_to_delete(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    """bob signed in with a Login Flow, and an admin disables his account while the
    credential cache holds his credential (``user_cache_seconds``): his next ``/v1/folders``
    is refused by WebDAV's 503 (nextcloud/server ``apps/dav/lib/Connector/Sabre/Auth.php``
    ``check`` wraps ``Session::completeLogin``'s ``LoginException``), not a 401, and signs the
    session out. The credential is right, so its app password stands — enabled again, bob
    logs in with it — and its entry stays in the record: beat's sweep deletes it once it can
    (here after he is enabled again). Forgotten as a 401's is, it would stay unused in his
    account for good."""
    from ncindex.web.revocations import revocations

    redis.Redis.from_url(redis_url).flushdb()
    with build_stack(
        redis_url, embedder, model_dir, tmp_path, template=empty_store, user_cache_seconds=60
    ) as stack:
        sim, client = stack.sim, stack.search.application.test_client()
        sim.put_file("bob", "/Bobs/notes.md", b"Bob's lighthouse lens notes.")
        wait_until(lambda: stack.services.store.count() >= 1, 30)
        sign_in_with_flow(stack, client, "bob")
        assert client.get("/v1/folders").get_json()["folders"] == ["/Bobs"]
        sim.disable_user("bob")
        refused = client.get("/v1/folders")
        assert refused.status_code == 401, refused.get_json()
        assert session(client)["user"] is None  # signed out
        assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 1
        sim.disable_user("bob", enabled=True)
        due_now(stack)
        assert revocations(stack.services).sweep() == 1
        assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/v1/folders"])
def test_a_disabled_account_refused_by_ocs_keeps_its_app_password_until_it_is_deleted(
    stack: Stack, noticed_by: str
) -> None:
    """bob signed in with a Login Flow, then an admin disabled his account. OCS answers his
    app password 401 (nextcloud/server ``ocs/v1.php`` catches ``Session::completeLogin``'s
    ``LoginException`` "User disabled" as OCS 997), as it answers a revoked one, and ncindex
    forgot its entry as it forgets a revoked one's: enabled again, bob's account took that
    app password again and nothing ever deleted it. ncindex now asks the webhook admin
    (``GET /ocs/v2.php/cloud/users/bob``: ``enabled: false``) before forgetting: the session
    is signed out, the entry stays; the sweep's delete, answered 401 while he is disabled,
    keeps it due an hour later (no counted login: ``completeLogin`` throws before
    ``handleLoginFailed``); once he is enabled it is deleted."""
    from ncindex.web.revocations import DISABLED_RETRY_SECONDS, RETRY_SECONDS, revocations

    sim, client = stack.sim, stack.search.application.test_client()
    record = stack.settings.names.ui_revoke
    sign_in_with_flow(stack, client, "bob")
    sim.disable_user("bob")
    if noticed_by == "/ui/session":
        assert session(client)["sign_in_ended"] is True
    else:
        assert client.get("/v1/folders").status_code == 401
    assert session(client)["user"] is None  # signed out
    assert stack.services.redis.zcard(record) == 1  # kept: the app password stands
    due_now(stack)
    assert revocations(stack.services).sweep() == 0  # refused: bob is disabled
    assert len(sim.tree.user("bob").passwords) == 2
    ((_, due),) = stack.services.redis.zrange(record, 0, -1, withscores=True)
    now_ms = stack.services.redis.time()[0] * 1000
    assert due > now_ms + (DISABLED_RETRY_SECONDS - RETRY_SECONDS) * 1000  # not every minute
    assert revocations(stack.services).sweep() == 0  # not due: nothing sent
    sim.disable_user("bob", enabled=True)
    due_now(stack)
    assert revocations(stack.services).sweep() == 1
    assert sim.tree.user("bob").passwords == {PASSWORDS["bob"]}
    assert stack.services.redis.zcard(record) == 0


def kept_until_bob_is_enabled(stack: Stack) -> None:
    """bob's account is disabled: the one app password a Login Flow made him stays recorded
    and in Nextcloud; enabled again, the sweep deletes it."""
    from ncindex.web.revocations import revocations

    assert stack.services.redis.zcard(stack.settings.names.ui_revoke) == 1
    assert len(stack.sim.tree.user("bob").passwords) == 2
    stack.sim.disable_user("bob", enabled=True)
    due_now(stack)
    assert revocations(stack.services).sweep() == 1
    assert stack.sim.tree.user("bob").passwords == {PASSWORDS["bob"]}


def test_a_disabled_account_s_sign_out_keeps_its_app_password_to_delete(stack: Stack) -> None:
    """bob's account is disabled while he is signed in, and he signs out: the delete of his
    Login Flow's app password is answered 401 (OCS answers a disabled account's login so,
    nextcloud/server ``ocs/v1.php``, ``Session::completeLogin``), which settled the entry as
    a revoked app password's 401 does — forgotten, and the app password, working again once
    he is enabled, was never deleted. The webhook admin now says he is disabled: the entry
    stays, and the sweep deletes the app password once he is enabled."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = sign_in_with_flow(stack, client, "bob")["csrf"]
    sim.disable_user("bob")
    out = client.post("/ui/logout", headers={CSRF_HEADER: csrf})
    assert out.status_code == 200 and out.get_json() == {"app_password_deleted": False}
    kept_until_bob_is_enabled(stack)


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/ui/logout"])
def test_a_disabled_account_signed_in_with_another_login_name_keeps_its_app_password(
    stack: Stack, noticed_by: str
) -> None:
    """dora signs in with her e-mail address (her user id is ``dora``): the Login Flow's
    app password is made under that login name (nextcloud/server
    ``core/Service/LoginFlowV2Service.php`` ``flowDone``: the session token's login name), so
    the credential ncindex keeps is ``dora@example.test:…``. Her account is disabled: the
    page keeps the entry (it asks about the session's user id), but the sweep's delete,
    refused 401, asked the webhook admin about the login name — ``GET
    /ocs/v2.php/cloud/users/dora@example.test``, OCS 404 "User does not exist" — and forgot
    the entry: enabled again, her account kept an app password nobody would delete. The
    record now keeps the user id the credential signed in as, and the sweep asks about it."""
    from ncindex.web.revocations import revocations

    sim, client = stack.sim, stack.search.application.test_client()
    sim.add_user("dora", "dora-password", login_name="dora@example.test")
    csrf = session(client)["csrf"]
    started = client.post("/ui/login/flow", headers={CSRF_HEADER: csrf})
    flows = sim.app_state["login_flows"]
    assert flows.approve(started.get_json()["login_url"], "dora@example.test", "dora-password")
    done = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert done.status_code == 200 and done.get_json()["user"] == "dora"
    sim.disable_user("dora")
    if noticed_by == "/ui/session":
        assert session(client)["sign_in_ended"] is True
    else:
        out = client.post("/ui/logout", headers={CSRF_HEADER: done.get_json()["csrf"]})
        assert out.get_json() == {"app_password_deleted": False}
    record = stack.settings.names.ui_revoke
    assert stack.services.redis.zcard(record) == 1
    due_now(stack)
    assert revocations(stack.services).sweep() == 0  # refused: dora is disabled
    assert stack.services.redis.zcard(record) == 1  # kept: the app password stands
    sim.disable_user("dora", enabled=True)
    due_now(stack)
    assert revocations(stack.services).sweep() == 1
    assert sim.tree.user("dora").passwords == {"dora-password"}
    assert stack.services.redis.zcard(record) == 0
    assert stack.services.redis.hlen(stack.settings.names.ui_revoke_user) == 0


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/v1/folders"])
def test_a_typed_app_password_refused_asks_the_webhook_admin_nothing(
    stack: Stack, noticed_by: str
) -> None:
    """bob signed in typing an app password of his own, which he then revoked: the session is
    signed out. A typed app password is never in the record of app passwords to delete, so
    whether his account is disabled changes nothing ncindex does; yet every such refusal sent
    the webhook admin's ``GET /ocs/v2.php/cloud/users/bob`` (one more Nextcloud request per
    signed-out session, for any user who can sign in). Only a Login Flow's credential is
    asked about."""
    sim, client = stack.sim, stack.search.application.test_client()
    sim.add_app_password("bob", "bob-typed-pw")
    typed = client.post(
        "/ui/login/password",
        json={"login_name": "bob", "app_password": "bob-typed-pw"},
        headers={CSRF_HEADER: session(client)["csrf"]},
    )
    assert typed.status_code == 200 and typed.get_json()["user"] == "bob"
    assert sim.app_state["login_flows"].delete_app_password("bob", "bob-typed-pw")
    sim.reset_request_counts()
    if noticed_by == "/ui/session":
        assert session(client)["sign_in_ended"] is True
    else:
        assert client.get("/v1/folders").status_code == 401
    assert session(client)["user"] is None  # signed out
    asked = [path for _, path, _ in sim.request_log if path.startswith("/ocs/v2.php/cloud/users/")]
    assert asked == []


@pytest.mark.parametrize("noticed_by", ["/ui/session", "/v1/folders"])
def test_a_disabled_account_s_lookup_that_stalls_leaves_its_app_password_to_the_sweep(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, noticed_by: str
) -> None:
    """bob's account is disabled while he is signed in, and the webhook admin's lookup of
    him (``GET /ocs/v2.php/cloud/users/bob``) gets no answer: the page waited for it the
    HTTP client's whole timeout after ``cloud/user``'s 401 (a page load said to ask for at most
    2 seconds), then took "no answer" as "not disabled" and forgot the entry — enabled
    again, bob's account kept an app password nobody would delete. The page now asks within
    ``CONFIRM_SECONDS`` and, without an answer, keeps the entry: the sweep's delete asks
    again and settles it."""
    from ncindex.simulator.ocs import OcsApi

    sim, client = stack.sim, stack.search.application.test_client()
    sign_in_with_flow(stack, client, "bob")
    sim.disable_user("bob")
    released = threading.Event()
    answer = OcsApi.user_data

    def stalled(self: OcsApi, viewer: str, target: str) -> dict | None:
        released.wait(60)  # Nextcloud's user backend (LDAP, say) does not answer
        return answer(self, viewer, target)

    monkeypatch.setattr(OcsApi, "user_data", stalled)
    try:
        if noticed_by == "/ui/session":
            assert session(client)["sign_in_ended"] is True
        else:
            assert client.get("/v1/folders").status_code == 401
    finally:
        released.set()
        monkeypatch.undo()
    assert session(client)["user"] is None  # signed out
    kept_until_bob_is_enabled(stack)


@contextlib.contextmanager
def admin_lookup_failing(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Within: the webhook admin's ``GET /ocs/v2.php/cloud/users/{uid}`` is answered 500 (the
    simulator's user data fails, as a user backend that cannot be reached would); yields the
    list of the user ids so asked about."""
    from ncindex.simulator.ocs import OcsApi

    asked: list[str] = []

    def failing(self: OcsApi, viewer: str, target: str) -> dict | None:
        asked.append(target)
        raise RuntimeError("the user backend failed")

    with monkeypatch.context() as patched:
        patched.setattr(OcsApi, "user_data", failing)
        yield asked


def test_a_disabled_account_s_sweep_lookup_without_an_answer_keeps_its_app_password(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob's account is disabled while he is signed in, and he signs out: the delete is
    refused 401, and the webhook admin's lookup of him fails (Nextcloud answers it 500). The
    failure was taken as "not disabled" and the entry settled — enabled again, bob's account
    kept an app password nobody would delete. A lookup without an answer now keeps the
    entry, due as a disabled account's an hour later (at most one more refused login an hour,
    should the app password be revoked), and the sweep deletes it once he is enabled."""
    from ncindex.web.revocations import DISABLED_RETRY_SECONDS, RETRY_SECONDS

    sim, client = stack.sim, stack.search.application.test_client()
    csrf = sign_in_with_flow(stack, client, "bob")["csrf"]
    sim.disable_user("bob")
    with admin_lookup_failing(monkeypatch):
        out = client.post("/ui/logout", headers={CSRF_HEADER: csrf})
    assert out.status_code == 200 and out.get_json() == {"app_password_deleted": False}
    record = stack.settings.names.ui_revoke
    ((_, due),) = stack.services.redis.zrange(record, 0, -1, withscores=True)
    now_ms = stack.services.redis.time()[0] * 1000
    assert due > now_ms + (DISABLED_RETRY_SECONDS - RETRY_SECONDS) * 1000
    kept_until_bob_is_enabled(stack)


def test_a_flow_s_credentials_refused_while_the_lookup_fails_are_kept_to_delete(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the test below, but the webhook admin's lookup of bob fails (Nextcloud answers it
    500): the refused poll took that as "not disabled" and forgot the credentials. They now
    stay in the record for the sweep, which deletes their app password once he is enabled."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    poll_with_nextcloud_down(stack, client, csrf)
    sim.disable_user("bob")
    with admin_lookup_failing(monkeypatch):
        answer = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert answer.status_code == 401 and answer.get_json()["code"] == "unauthenticated"
    kept_until_bob_is_enabled(stack)


def test_a_sweep_whose_lookup_gets_no_answer_stops(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob signed in twice with Login Flows and signed out of both while his account was
    disabled: two entries. The sweep's deletes are refused 401 and the webhook admin's lookup
    of him gets no answer: the sweep went on to the next entry, and with the lookup stalled
    rather than failing it held a worker ``NCINDEX_HTTP_TIMEOUT`` per due entry of a disabled
    account. As for a delete Nextcloud does not answer, the first lookup without an answer
    now ends the sweep (both entries stay, to be asked again)."""
    sim = stack.sim
    for client in (stack.search.application.test_client() for _ in range(2)):
        csrf = sign_in_with_flow(stack, client, "bob")["csrf"]
        sim.disable_user("bob")
        assert client.post("/ui/logout", headers={CSRF_HEADER: csrf}).status_code == 200
        sim.disable_user("bob", enabled=True)
    sim.disable_user("bob")
    record = stack.settings.names.ui_revoke
    assert stack.services.redis.zcard(record) == 2
    due_now(stack)
    from ncindex.web.revocations import revocations

    with admin_lookup_failing(monkeypatch) as asked:
        assert revocations(stack.services).sweep() == 0
    assert asked == ["bob"]
    assert stack.services.redis.zcard(record) == 2


def test_a_flow_s_credentials_refused_for_a_disabled_account_are_kept_to_delete(
    stack: Stack,
) -> None:
    """bob approved a Login Flow, its check failed (Nextcloud down), and an admin disabled
    his account before the next poll checked the credentials again: OCS answers them 401
    (``ocs/v1.php``, ``Session::completeLogin``), and the poll forgot them as a revoked app
    password's — enabled again, bob's account kept an app password nobody would delete. The
    webhook admin now says he is disabled: the sign-in is refused, the credential stays in
    the record, and the sweep deletes it once he is enabled."""
    sim, client = stack.sim, stack.search.application.test_client()
    csrf = approved_flow(stack, client, "bob")
    poll_with_nextcloud_down(stack, client, csrf)
    sim.disable_user("bob")
    answer = client.post("/ui/login/poll", headers={CSRF_HEADER: csrf})
    assert answer.status_code == 401 and answer.get_json()["code"] == "unauthenticated"
    assert session(client)["signing_in"] is False
    kept_until_bob_is_enabled(stack)


def test_a_page_search_nextcloud_does_not_answer_leaves_the_next_one_its_own_client(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    """A signed-in page's ``/v1/search`` meets a Nextcloud that does not answer: its client
    stops at the first request without an answer (``stop_when_unanswered``, made by
    ``ncindex.web.auth._caller`` for that HTTP request), its results come back unconfirmed,
    and the session stays signed in (no answer is no refusal). The session keeps the
    credential, never a client: the next search, Nextcloud answering again, is asked and
    confirmed. A guard: a client kept with the session (or the credential cache) would stay
    stopped for good after one timeout."""
    redis.Redis.from_url(redis_url).flushdb()
    with build_stack(
        redis_url,
        embedder,
        model_dir,
        tmp_path,
        template=empty_store,
        user_cache_seconds=60,
        http_timeout=0.5,
    ) as stack:
        sim, client = stack.sim, stack.search.application.test_client()
        sim.put_file("bob", "/Bobs/notes.md", b"Bob's lighthouse lens notes.")
        wait_until(lambda: stack.services.store.count() >= 1, 30)
        csrf = {CSRF_HEADER: sign_in_with_flow(stack, client, "bob")["csrf"]}
        body = {"query": "lighthouse lens"}
        first = client.post("/v1/search", json=body, headers=csrf).get_json()
        assert first["results"] and first["verification"]["errors"] == 0, first
        for family in ("webdav", "dav-search", "notes", "ocs"):
            sim.faults.set(family, timeout=True, times=10)
        try:
            stalled = client.post("/v1/search", json=body, headers=csrf)
        finally:
            sim.faults.clear()
        assert stalled.status_code == 200, stalled.get_json()
        answer = stalled.get_json()
        assert answer["results"] and answer["verification"]["errors"] >= 1, answer
        assert session(client)["user"] == "bob"  # no answer signs nobody out
        again = client.post("/v1/search", json=body, headers=csrf).get_json()
        assert again["results"] and again["verification"]["errors"] == 0, again["verification"]


HELD_SECONDS = 120.0
"""How long the simulator holds a request the test lets go itself (and the client waits), s."""


def test_a_tab_s_call_refused_after_another_tab_signed_in_again_leaves_the_new_sign_in(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    """Two tabs of one session. Tab A's ``/v1/folders`` is under way with the Login Flow
    credential X (Nextcloud slow to answer its PROPFIND) when tab B signs in again with a new
    Login Flow: the new session (a new id) holds Y, and X's app password is deleted. Tab A's
    request then meets X refused (401) and its hook signs "its" session out, forgetting the
    refused credential in the record — but that session is the old id, gone: the new session
    stays signed in and Y stays recorded, held by it, to delete when it ends. A guard of
    3537aba's forgetting reading the credential to forget from the session at the end of the
    request (the session id changes at every sign-in, so it is never another credential).
    The PROPFIND is held until the test lets it go, under a client timeout longer than any
    sign-in: a hold of 5 s ran out before tab B's sign-in ended in a loaded CI run, and X,
    not yet deleted, answered 200."""
    redis.Redis.from_url(redis_url).flushdb()
    with build_stack(
        redis_url, embedder, model_dir, tmp_path, template=empty_store, http_timeout=HELD_SECONDS
    ) as stack:
        sim, client = stack.sim, stack.search.application.test_client()
        sim.put_file("bob", "/Bobs/notes.md", b"Bob's lighthouse lens notes.")
        wait_until(lambda: stack.services.store.count() >= 1, 30)
        first = sign_in_with_flow(stack, client, "bob")
        tab_a = stack.search.application.test_client()
        tab_a.set_cookie(COOKIE, client.get_cookie(COOKIE).value)
        assert tab_a.get("/v1/folders").status_code == 200  # X works, and is cached
        record = stack.settings.names.ui_revoke
        assert stack.services.redis.zcard(record) == 1  # X, held
        fault = sim.faults.set("webdav", delay=HELD_SECONDS, times=1, method="PROPFIND")
        answers: list[TestResponse] = []
        started = threading.Thread(target=lambda: answers.append(tab_a.get("/v1/folders")))
        started.start()
        try:
            wait_until(lambda: fault.times == 0, 10)  # tab A's PROPFIND is held by Nextcloud
            second = sign_in_with_flow(stack, client, "bob")  # tab B: Y; X deleted
            assert second["csrf"] != first["csrf"]
        finally:
            fault.release.set()
            started.join(30)
        assert answers and answers[0].status_code == 401, answers  # X refused
        assert session(client)["user"] == "bob"  # the new sign-in stands
        assert client.get("/v1/folders").status_code == 200
        assert stack.services.redis.zcard(record) == 1  # Y, held by the new session
        assert len(sim.tree.user("bob").passwords) == 2  # bob's own and Y
