"""The ``/mcp`` relay of the embedded run (:func:`forward_to` behind werkzeug's server, as
``allinone.embedded.start`` serves it): a body is read as the search API reads its own — a
Content-Length that is not a number of bytes is a 400 problem+json, a chunked body is relayed
whole, one over ``MAX_BODY_BYTES`` is a 413 — and the MCP server (here a stand-in that echoes
what it received) sees the bytes the client sent; header values are relayed without the
whitespace around them, and a header that cannot be sent on is a 400 naming it."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from werkzeug.serving import BaseWSGIServer, make_server

from ncindex.web.dispatch import MCP_PATH, forward_to
from ncindex.web.problems import MAX_BODY_BYTES
from ncindex.web.server_errors import ProblemRequestHandler


def _echo(request: httpx.Request) -> httpx.Response:
    """The MCP server's stand-in: the body and Content-Length it received."""
    return httpx.Response(
        200,
        json={"body": request.content.decode(), "length": request.headers.get("Content-Length")},
    )


@pytest.fixture(scope="module")
def relay() -> Iterator[BaseWSGIServer]:
    client = httpx.Client(transport=httpx.MockTransport(_echo))
    app = forward_to("http://mcp.invalid", client=client)
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=ProblemRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def post(relay: BaseWSGIServer, head: bytes, body: bytes) -> tuple[int, str, dict]:
    """POST ``body`` to ``/mcp`` with the header lines ``head``: the status, the Content-Type
    and the JSON answer."""
    request = (
        b"POST " + MCP_PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\n" + head + b"\r\n\r\n" + body
    )
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    content_type = next(
        line.split(b":", 1)[1].strip().decode()
        for line in headers.split(b"\r\n")
        if line.lower().startswith(b"content-type:")
    )
    return int(status_line.split(b" ")[1]), content_type, json.loads(content)


@pytest.mark.parametrize("declared", [b"abc", b"1e3", b"-1"])
def test_a_content_length_that_is_not_a_number_of_bytes_is_a_400(
    relay: BaseWSGIServer, declared: bytes
) -> None:
    """It raised ValueError (a 500 text/html), or, for -1, read until the client gave up."""
    status, content_type, problem = post(relay, b"Content-Length: " + declared, b"{}")
    assert (status, content_type) == (400, "application/problem+json"), problem
    assert (problem["code"], problem["field"]) == ("invalid_value", "Content-Length")


def test_a_content_length_over_the_bound_is_a_413(relay: BaseWSGIServer) -> None:
    status, content_type, problem = post(relay, b"Content-Length: 99999999999999999999", b"{}")
    assert (status, content_type) == (413, "application/problem+json"), problem
    assert (problem["code"], problem["field"]) == ("payload_too_large", "body")


def test_a_body_over_the_bound_is_a_413_on_a_connection_closed_at_once(
    relay: BaseWSGIServer,
) -> None:
    """The 413 came at once, but the connection stayed open until the server's 60 s read
    timeout: ``post`` reads until the close and gave up after 10 s (a body that fits the
    server's first read, as above, was not held)."""
    size = MAX_BODY_BYTES + 40_000
    status, _, problem = post(relay, b"Content-Length: %d" % size, b"a" * size)
    assert (status, problem["code"], problem["field"]) == (413, "payload_too_large", "body")


def test_a_chunked_body_is_relayed_whole(relay: BaseWSGIServer) -> None:
    """It was relayed empty (no Content-Length): the MCP server answered -32700."""
    message = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    chunks = b"10\r\n" + message[:16].encode() + b"\r\n"
    chunks += b"%x\r\n" % len(message[16:]) + message[16:].encode() + b"\r\n0\r\n\r\n"
    status, _, echoed = post(relay, b"Transfer-Encoding: chunked", chunks)
    assert status == 200
    assert echoed == {"body": message, "length": str(len(message))}
    status, _, echoed = post(relay, b"Content-Length: %d" % len(message), message.encode())
    assert (status, echoed["body"]) == (200, message)


def test_a_chunked_body_over_the_bound_is_a_413(relay: BaseWSGIServer) -> None:
    size = MAX_BODY_BYTES + 1
    status, _, problem = post(
        relay, b"Transfer-Encoding: chunked", b"%x\r\n" % size + b"a" * size + b"\r\n0\r\n\r\n"
    )
    assert (status, problem["code"], problem["field"]) == (413, "payload_too_large", "body")
    assert problem["limit"] == MAX_BODY_BYTES and str(MAX_BODY_BYTES) in problem["detail"]


def _echo_headers(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A stand-in MCP server over real HTTP: the ``X-Probe`` and ``Authorization`` headers it
    received, as latin-1 text."""
    seen = {
        k: environ.get(f"HTTP_{k.upper().replace('-', '_')}") for k in ("X-Probe", "Authorization")
    }
    body = json.dumps(seen).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


@pytest.fixture(scope="module")
def real_relay() -> Iterator[BaseWSGIServer]:
    """The relay with its own HTTP client (h11, which checks what it sends) to a stand-in
    MCP server on a socket."""
    backend = make_server("127.0.0.1", 0, _echo_headers, threaded=True)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    app = forward_to(f"http://127.0.0.1:{backend.port}")
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=ProblemRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    for server in (srv, backend):
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("line", "seen"),
    [
        (b"Authorization: Basic ", {"Authorization": "Basic"}),
        (b"Authorization: Bearer \t", {"Authorization": "Bearer"}),
        (b"X-Probe: a b ", {"X-Probe": "a b"}),
        (b"X-Probe: \xe9t\xe9", {"X-Probe": "\xe9t\xe9"}),
    ],
)
def test_a_header_value_is_relayed_without_the_whitespace_around_it(
    real_relay: BaseWSGIServer, line: bytes, seen: dict[str, str]
) -> None:
    """``Authorization: Basic `` (an empty credential) was a 502 "the MCP server did not
    answer": the relay's HTTP client refuses a value ending in a space; a non-ASCII value
    (obs-text) was a 500 text/html. Stripped, the MCP server judges it (a 401 there)."""
    status, _, echoed = post(real_relay, line + b"\r\nContent-Length: 2", b"{}")
    assert status == 200, echoed
    assert seen.items() <= echoed.items()


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b"X-Probe: a\x00b", "X-Probe"),
        (b"X-Probe: a\x0bb", "X-Probe"),
        (b"X(Probe): x", "X(Probe)"),
    ],
)
def test_a_header_that_cannot_be_relayed_is_a_400_naming_it(
    real_relay: BaseWSGIServer, line: bytes, field: str
) -> None:
    """A NUL or VT in a value, or a name that is no token, was a 502."""
    status, content_type, problem = post(real_relay, line + b"\r\nContent-Length: 2", b"{}")
    assert (status, content_type) == (400, "application/problem+json"), problem
    assert (problem["code"], problem["field"]) == ("invalid_http", field)


def _server_headers(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A stand-in MCP server answering with the headers a real one sends besides its body
    (uvicorn's ``server``, ``date``), a field named in ``Connection``, and the request's
    ``X-Probe``."""
    body = json.dumps({"X-Probe": environ.get("HTTP_X_PROBE")}).encode()
    start_response(
        "200 OK",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Server", "uvicorn"),
            ("Date", "Thu, 01 Jan 2026 00:00:00 GMT"),
            ("Connection", "X-Private"),
            ("X-Private", "for the relay only"),
        ],
    )
    return [body]


def test_an_answer_carries_one_server_and_date_and_no_connection_fields() -> None:
    """Every ``/mcp`` answer carried two ``Server`` headers (the MCP server's uvicorn and
    werkzeug, which writes its own ``Server`` and ``Date`` whatever the app gives) and two
    ``Date`` headers; a field named in ``Connection`` (RFC 9110 §7.6.1) was relayed, in both
    directions."""
    backend = make_server("127.0.0.1", 0, _server_headers, threaded=True)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    srv = make_server(
        "127.0.0.1",
        0,
        forward_to(f"http://127.0.0.1:{backend.port}"),
        threaded=True,
        request_handler=ProblemRequestHandler,
    )
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        request = (
            b"POST " + MCP_PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Connection: close, X-Probe\r\nX-Probe: for the relay only\r\n"
            b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        )
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as conn:
            conn.sendall(request)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
    finally:
        for server in (srv, backend):
            server.shutdown()
            server.server_close()
    head, _, content = answer.partition(b"\r\n\r\n")
    names = [line.split(b":", 1)[0].strip().lower() for line in head.split(b"\r\n")[1:]]
    assert names.count(b"server") == 1 and names.count(b"date") == 1, head
    assert b"x-private" not in names, head
    assert b"uvicorn" not in head
    assert json.loads(content) == {"X-Probe": None}
