"""``ncindex up`` starts when the webhook admin's credential is held back after a refusal
(:func:`ncindex.accounts.held_until`) and works again: starting is the operator's request to
try it, so the registration is sent, and its success clears the refusal. Before, the start
failed with ``AccountHeld`` for up to six hours after one refusal of an unchanged app password
(an account disabled, then enabled again).

It runs in a child process, like ``test_up_with_refused_classes``."""

from __future__ import annotations

from pathlib import Path

from support import UP_BESIDE_A_SIMULATOR, run_scenario

SCENARIO = (
    UP_BESIDE_A_SIMULATOR
    + r"""
import redis
from ncindex.accounts import credential_fingerprint, held_until, record_refused

client = redis.Redis.from_url(redis_server.url)
names = settings.names
credential = credential_fingerprint("admin", "admin-pw")
record_refused(client, names, "admin", "GET /ocs: HTTP 401", credential=credential)
held = held_until(client.hget(names.refused_accounts, "admin"), credential) is not None
# a user of the real Nextcloud its admin was told does not exist: the start must keep that
sim.add_user("carol", "carol-pw", "Carol")
accounts = settings.accounts | {"carol": SecretStr("carol-pw")}
settings = settings.model_copy(update={"accounts": accounts})
record_refused(client, names, "carol", "PROPFIND: HTTP 401",
               credential=credential_fingerprint("carol", "carol-pw"))
client.set(names.missing_user("carol"), int(time.time()))
try:
    running = start(settings, load_sample=False)
    try:
        out = {
            "held": held,
            "registered": len(sim.registry.list()),
            "refusal_left": client.hget(names.refused_accounts, "admin") is not None,
            "carol_kept": [client.hget(names.refused_accounts, "carol") is not None,
                           client.exists(names.missing_user("carol")) == 1],
        }
    finally:
        running.close()
finally:
    server.close(close_simulator=True)
    redis_server.stop()
print("\nRESULT " + json.dumps(out), flush=True)
"""
)


def test_up_starts_with_a_held_admin_whose_credential_works_again(tmp_path: Path) -> None:
    result = run_scenario(SCENARIO, tmp_path)
    assert result["held"] is True
    assert result["registered"] > 0
    assert result["refusal_left"] is False
    # guard (passes before and after): with NCINDEX_NEXTCLOUD_URL set, the start clears no
    # other account's refusal or "user missing" mark — only the embedded simulator's, whose
    # accounts it just made
    assert result["carol_kept"] == [True, True]
