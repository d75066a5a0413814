"""Login Flow v2 and app-password deletion in the simulator, over HTTP, as nextcloud/server's
``ClientFlowLoginV2Controller`` and ``AppPasswordController`` answer them."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
from sim_support import PASSWORDS

from ncindex.simulator import NextcloudSimulator, SimulatorServer

OCS = {"OCS-APIRequest": "true", "Accept": "application/json"}


def test_login_flow_v2_gives_a_new_app_password_once(
    sim: NextcloudSimulator,
    server: SimulatorServer,
    client: Callable[[str | None], httpx.Client],
) -> None:
    anon = client(None)
    started = anon.post("/index.php/login/v2", headers={"User-Agent": "test client"})
    assert started.status_code == 200
    body = started.json()
    token = body["poll"]["token"]
    assert len(token) == 128 and token.isalnum()
    assert body["poll"]["endpoint"] == f"{server.url}/index.php/login/v2/poll"
    assert body["login"].startswith(f"{server.url}/index.php/login/v2/flow/")

    pending = anon.post("/index.php/login/v2/poll", data={"token": token})
    assert (pending.status_code, pending.json()) == (404, [])

    landing = anon.get(body["login"])
    assert landing.status_code == 200 and "test client" in landing.text
    login_token = re.search(r'name="loginToken" value="([^"]+)"', landing.text)[1]
    wrong = anon.post(
        "/index.php/login/v2/grant",
        data={"loginToken": login_token, "user": "alice", "password": "nope"},
    )
    assert wrong.status_code == 403
    granted = anon.post(
        "/index.php/login/v2/grant",
        data={"loginToken": login_token, "user": "alice", "password": PASSWORDS["alice"]},
    )
    assert granted.status_code == 200

    done = anon.post("/index.php/login/v2/poll", data={"token": token})
    assert done.status_code == 200
    creds = done.json()
    assert creds["loginName"] == "alice" and creds["server"] == server.url
    assert len(creds["appPassword"]) == 72 and creds["appPassword"] != PASSWORDS["alice"]
    # the flow is deleted as it answers
    assert anon.post("/index.php/login/v2/poll", data={"token": token}).status_code == 404

    with httpx.Client(base_url=server.url, auth=("alice", creds["appPassword"])) as alice:
        user = alice.get("/ocs/v2.php/cloud/user", headers=OCS)
        assert user.json()["ocs"]["data"]["id"] == "alice"
        deleted = alice.delete("/ocs/v2.php/core/apppassword", headers=OCS)
        assert deleted.status_code == 200
        assert alice.get("/ocs/v2.php/cloud/user", headers=OCS).status_code == 401
    # the user's other app password still works
    assert client("alice").get("/ocs/v2.php/cloud/user", headers=OCS).status_code == 200


def test_an_unknown_login_token_is_refused(client: Callable[[str | None], httpx.Client]) -> None:
    anon = client(None)
    assert anon.get("/index.php/login/v2/flow/" + "x" * 128).status_code == 403
    assert anon.post("/index.php/login/v2/poll", data={"token": "y" * 128}).status_code == 404


def test_an_app_password_signed_in_as_a_bearer_token_deletes_itself(
    sim: NextcloudSimulator, server: SimulatorServer
) -> None:
    """Nextcloud's ``deleteAppPassword`` deletes the app password the session signed in with,
    Bearer tokens included (nextcloud/server ``lib/private/User/Session.php``
    ``tryTokenLogin`` sets ``app_password`` for a permanent token); the simulator answered
    OCS 403 "no app password in use" to a Bearer request."""
    sim.add_app_password("alice", "alice-bearer-token")
    bearer = {**OCS, "Authorization": "Bearer alice-bearer-token"}
    with httpx.Client(base_url=server.url) as anon:
        assert anon.get("/ocs/v2.php/cloud/user", headers=bearer).status_code == 200
        deleted = anon.delete("/ocs/v2.php/core/apppassword", headers=bearer)
        assert deleted.status_code == 200, deleted.text
        assert anon.get("/ocs/v2.php/cloud/user", headers=bearer).status_code == 401
    assert not sim.check_password("alice", "alice-bearer-token")
    assert sim.check_password("alice", PASSWORDS["alice"])


def test_an_app_password_whose_login_password_expired_is_refused_until_a_login_flow(
    sim: NextcloudSimulator, server: SimulatorServer
) -> None:
    """An app password whose stored login password no longer checks (nextcloud/server
    ``Session::checkTokenCredentials`` → ``PublicKeyTokenProvider::markPasswordInvalid``)
    stays, but OCS answers it 401 997 as a revoked one's, WebDAV 401, and its delete 401;
    the user's next Login Flow (``LoginFlowV2Service::flowDone`` → ``generateToken`` →
    ``updatePasswords``) revives it, and it deletes itself."""
    sim.add_app_password("alice", "alice-expiring-app-pw")
    sim.expire_app_password("alice", "alice-expiring-app-pw")
    auth = ("alice", "alice-expiring-app-pw")
    with httpx.Client(base_url=server.url, auth=auth) as expired:
        refused = expired.get("/ocs/v2.php/cloud/user", headers=OCS)
        assert refused.status_code == 401
        assert refused.json()["ocs"]["meta"]["statuscode"] == 997
        assert expired.request("PROPFIND", "/remote.php/dav/files/alice/").status_code == 401
        assert expired.delete("/ocs/v2.php/core/apppassword", headers=OCS).status_code == 401
        assert "alice-expiring-app-pw" in sim.tree.user("alice").passwords  # kept
        login = expired.post("/index.php/login/v2", auth=None).json()["login"]
        assert sim.app_state["login_flows"].approve(login, "alice", PASSWORDS["alice"])
        assert expired.get("/ocs/v2.php/cloud/user", headers=OCS).status_code == 200
        assert expired.delete("/ocs/v2.php/core/apppassword", headers=OCS).status_code == 200
    assert "alice-expiring-app-pw" not in sim.tree.user("alice").passwords
