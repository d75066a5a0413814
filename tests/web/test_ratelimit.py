"""The rate limit's caller key (:func:`ncindex.web.ratelimit.caller_key_for`)."""

from __future__ import annotations

import base64

from ncindex.web.ratelimit import caller_key_for


def basic(login: str) -> str:
    return "Basic " + base64.b64encode(login.encode()).decode()


def test_a_login_counts_against_one_bucket_however_it_is_cased() -> None:
    # Nextcloud finds a login case-insensitively, so BOB's guesses are guesses at bob's password
    keys = {caller_key_for(basic(f"{name}:guess"), "10.0.0.1") for name in ("bob", "BOB", "Bob")}
    assert len(keys) == 1
    assert keys.pop().startswith("user:")


def test_other_users_addresses_and_tokens_count_apart() -> None:
    assert caller_key_for(basic("bob:x"), "10.0.0.1") == caller_key_for(basic("bob:y"), "10.0.0.2")
    assert caller_key_for(basic("bob:x"), "10.0.0.1") != caller_key_for(basic("rob:x"), "10.0.0.1")
    assert caller_key_for("Bearer AbC", None) != caller_key_for("Bearer abc", None)
    assert caller_key_for(None, "10.0.0.1") == "addr:10.0.0.1"
