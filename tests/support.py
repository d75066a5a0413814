"""Helpers shared by the tests (fixtures live in ``conftest.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask.testing import FlaskClient

from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.testing import NextcloudSimulator

PASSWORDS = {"alice": "alice-app-pw", "bob": "bob-app-pw", "carol": "carol-app-pw"}


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


@dataclass
class Stack:
    """The whole pipeline on real parts, for one test."""

    settings: Settings
    sim: NextcloudSimulator
    services: Services
    search: FlaskClient
    receiver_url: str

    def search_as(self, user: str, query: str, **extra: Any) -> dict[str, Any]:
        """``POST /v1/search`` with ``user``'s app password; asserts 200, returns the body."""
        response = self.search.post(
            "/v1/search",
            json={"query": query, **extra},
            auth=(user, PASSWORDS[user]),
        )
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    def found(self, user: str, query: str, doc_key: str, **extra: Any) -> dict[str, Any] | None:
        """The result for ``doc_key`` in ``user``'s search, or ``None``."""
        for result in self.search_as(user, query, **extra)["results"]:
            if f"{result['doc_type']}:{result['doc_id']}" == doc_key:
                return result
        return None

    def points(self, doc_key: str) -> list[Any]:
        """The store's points of ``doc_key``."""
        return self.services.store.document_points(doc_key)
