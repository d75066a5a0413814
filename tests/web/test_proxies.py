"""The client address behind trusted proxies (:mod:`ncindex.web.proxies`)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from ncindex.web.proxies import TrustedProxies, forwarded_value


@pytest.mark.parametrize(
    ("header", "hops", "expected"),
    [
        ("198.51.100.7", 0, None),  # nothing trusted
        ("198.51.100.7", 1, "198.51.100.7"),
        ("forged, 198.51.100.7", 1, "198.51.100.7"),  # the client wrote the left part
        ("198.51.100.7, 10.0.0.5", 2, "198.51.100.7"),
        ("10.0.0.5", 2, None),  # did not pass through both proxies
        (None, 1, None),
        (" , ", 1, None),
    ],
)
def test_the_value_the_outermost_trusted_proxy_wrote(
    header: str | None, hops: int, expected: str | None
) -> None:
    assert forwarded_value(header, hops) == expected


def test_the_asgi_middleware_joins_repeated_headers_and_sets_client_and_scheme() -> None:
    async def echo(request: Request) -> JSONResponse:
        assert request.client is not None
        return JSONResponse([request.client.host, request.url.scheme])

    def seen(hops: int, headers: list[tuple[str, str]]) -> list[str]:
        app = TrustedProxies(Starlette(routes=[Route("/", echo)]), hops)
        return TestClient(app).get("/", headers=headers).json()

    forwarded = [
        ("X-Forwarded-For", "forged"),
        ("X-Forwarded-For", "198.51.100.7"),
        ("X-Forwarded-Proto", "https"),
    ]
    assert seen(1, forwarded) == ["198.51.100.7", "https"]
    assert seen(0, forwarded) == ["testclient", "http"]
    assert seen(3, forwarded) == ["testclient", "http"]  # fewer values than proxies
