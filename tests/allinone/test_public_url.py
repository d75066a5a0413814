"""The webhook target ``ncindex up`` registers when ``NCINDEX_PUBLIC_URL`` is left at its
default: the address it listens on, as this machine reaches it."""

from __future__ import annotations

import pytest

from allinone.embedded import local_url


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8080"),
        ("0.0.0.0", "http://127.0.0.1:8080"),  # was http://0.0.0.0:8080, no address to send to
        ("::", "http://[::1]:8080"),  # was http://:::8080, no URL at all
        ("::1", "http://[::1]:8080"),
        ("search.example.org", "http://search.example.org:8080"),
    ],
)
def test_a_wildcard_or_ipv6_address_becomes_a_url_to_send_to(host: str, url: str) -> None:
    assert local_url(host, 8080) == url
