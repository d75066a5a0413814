"""What werkzeug's server (the embedded run's, ``make run``) answers to requests it cannot
parse itself: problem+json through :class:`ProblemRequestHandler`, not ``http.server``'s HTML.
(gunicorn's own answers are tested under gunicorn in ``test_receiver.py``.)"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, request
from werkzeug.serving import BaseWSGIServer, make_server

from ncindex.web.problems import install_error_handlers, read_body
from ncindex.web.server_errors import ProblemRequestHandler


def _app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def serving(
    app: Any, handler: type[ProblemRequestHandler] = ProblemRequestHandler
) -> Iterator[BaseWSGIServer]:
    """werkzeug's threaded server for ``app`` on a free port, as ``allinone.embedded.start``
    makes it (``handler``: :class:`ProblemRequestHandler` or a subclass observing it), until
    the generator is closed."""
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[BaseWSGIServer]:
    """The server in front of a WSGI app that answers ``ok``."""
    yield from serving(_app)


def send(server: BaseWSGIServer, data: bytes) -> bytes:
    """Send ``data`` on a new connection, without closing it, and read until the server
    closes; raises ``TimeoutError`` when a read waits 10 s (the server's read timeout is 60 s
    here, as in the product)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(data)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    ("request_bytes", "status", "code", "field"),
    [
        (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "headers_too_large",
         "headers"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "uri_too_long", "url"),
        (b"GET / HTTP/1.1 extra\r\n\r\n", 400, "invalid_http", None),
        (b"GET / HTTP/3.0\r\n\r\n", 505, "http_version_not_supported", None),
        # answered by the app, without a status line or headers, before ProblemRequestHandler
        (b"GET /nope HTTP/0.9\r\n\r\n", 505, "http_version_not_supported", None),
        (b"GET /nope\r\n\r\n", 505, "http_version_not_supported", None),
        # a real HTTP/0.9 request has no headers: http.server waited for a blank line
        (b"GET /nope\r\n", 505, "http_version_not_supported", None),
        (b"GET http://[::1/\r\n", 505, "http_version_not_supported", None),
        # not HTTP/0.9, which has GET alone (http.server answered 400 before 5bb9396) and a
        # target: a request line that lost a word, answered 505 "HTTP/0.9 is not supported"
        (b"POST /nope\r\n\r\n", 400, "invalid_http", None),
        (b"GET HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_http", None),
        # werkzeug's make_environ raised ValueError: the connection closed unanswered
        (b"GET http://[::1/livez HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_http", None),
        # werkzeug read the last Content-Length; a proxy may read the first (smuggling)
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 1\r\n\r\nab",
         400, "invalid_http", None),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n", 400, "invalid_http", None),
    ],
    ids=["long-header", "long-url", "request-line", "version", "http-0.9", "http-0.9-bare",
         "http-0.9-alone", "http-0.9-ipv6-target", "http-0.9-post", "no-target",
         "ipv6-target", "two-lengths", "length-and-chunked"],
)  # fmt: skip
def test_unparsable_requests_get_problem_json(
    server: BaseWSGIServer, request_bytes: bytes, status: int, code: str, field: str | None
) -> None:
    answer = send(server, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert int(head.split(b" ", 2)[1]) == status, answer[:300]
    assert b"\r\ncontent-type: application/problem+json" in head.lower()  # was: text/html
    problem = json.loads(body)
    assert (problem["status"], problem["code"], problem.get("field")) == (status, code, field)
    assert problem["detail"]


def test_a_parsable_request_still_reaches_the_app(server: BaseWSGIServer) -> None:
    answer = send(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200") and b"\r\n\r\n2\r\nok\r\n" in answer


@pytest.fixture(scope="module")
def body_server() -> Iterator[BaseWSGIServer]:
    """The same server in front of a Flask app that reads its bodies as the apps do
    (:func:`read_body`, errors answered by :func:`install_error_handlers`)."""
    app = Flask(__name__)
    install_error_handlers(app)

    @app.post("/")
    def read() -> str:
        return str(len(read_body(request, 1000)))

    yield from serving(app)


@pytest.mark.parametrize(
    ("head", "body", "field"),
    [
        # werkzeug reads such a header as absent: the body was then taken as empty
        (b"Content-Length: abc", b"{}", "Content-Length"),
        (b"Transfer-Encoding: chunked", b"zz\r\n{}\r\n0\r\n\r\n", "body"),
    ],
    ids=["content-length", "chunked-framing"],
)
def test_a_body_the_server_cannot_read_is_named(
    body_server: BaseWSGIServer, head: bytes, body: bytes, field: str
) -> None:
    request_bytes = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + head + b"\r\n\r\n"
    answer = send(body_server, request_bytes + body)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"400", answer[:300]
    problem = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert (problem["code"], problem["field"]) == ("invalid_value", field)


def test_a_static_file_is_answered_with_one_date() -> None:
    """werkzeug's ``send_file`` dates its answer and ``http.server`` dates every answer."""
    app = Flask(__name__, static_folder=str(Path(__file__).parent), static_url_path="/s")
    for srv in serving(app):
        answer = send(
            srv, b"GET /s/test_server_errors.py HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        head = answer.partition(b"\r\n\r\n")[0].lower()
        assert head.startswith(b"http/1.1 200") and head.count(b"\r\ndate: ") == 1, head


def test_expect_100_continue_is_answered_once(body_server: BaseWSGIServer) -> None:
    head = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\n"
    answer = send(body_server, head + b"Content-Length: 2\r\n\r\n{}")
    assert answer.count(b"100 Continue") == 1, answer[:300]
    assert b"HTTP/1.1 200" in answer


def test_a_stalled_body_is_answered_after_the_read_timeout(
    body_server: BaseWSGIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fewer bytes than ``Content-Length`` on a connection left open: 400 ``body`` once a read
    has waited ``timeout`` seconds (1 here; 60 in the product), not a thread held forever."""
    monkeypatch.setattr(ProblemRequestHandler, "timeout", 1.0)
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
    with socket.create_connection(("127.0.0.1", body_server.port), timeout=20) as conn:
        conn.sendall(head + b'{"query": "x"')  # and nothing more, without closing
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"400", answer[:300]
    problem = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert (problem["code"], problem["field"]) == ("invalid_value", "body")


def test_a_malformed_request_is_logged_as_a_warning_not_an_error(
    server: BaseWSGIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The client's mistake: werkzeug's handler logged it at error level."""
    with caplog.at_level("DEBUG", logger="werkzeug"):
        send(server, b"GET / HTTP/3.0\r\n\r\n")
        send(server, b"GET / HTTP/1.1 extra\r\n\r\n")
    refusals = [r for r in caplog.records if "] code " in r.getMessage()]
    assert [r.levelname for r in refusals] == ["WARNING", "WARNING"], caplog.text


class _Observed(ProblemRequestHandler):
    """The handler, telling the test when a connection's handling (and its logging) is over."""

    done = threading.Event()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            type(self).done.set()


@pytest.fixture
def observed_server() -> Iterator[BaseWSGIServer]:
    """:func:`body_server`'s app behind :class:`_Observed`, whose event is cleared."""
    app = Flask(__name__)
    install_error_handlers(app)

    @app.post("/")
    def read() -> str:
        return str(len(read_body(request, 1000)))

    _Observed.done.clear()
    yield from serving(app, _Observed)


def test_a_too_large_body_is_answered_and_the_connection_closed_at_once(
    body_server: BaseWSGIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 413 came at once but werkzeug then read the rest for up to the read timeout, so a
    client that reads until the close (``send``: 10 s) waited 60 s for it."""
    monkeypatch.setattr(ProblemRequestHandler, "timeout", 60.0)
    for size in (100_000, 2_000_000):
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size
        answer = send(body_server, head + b"a" * size)
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line.split(b" ")[1] == b"413", answer[:300]
        assert json.loads(rest.partition(b"\r\n\r\n")[2])["code"] == "payload_too_large"


def test_a_too_large_body_sent_whole_before_the_answer_is_read_gets_its_413(
    body_server: BaseWSGIServer,
) -> None:
    """A client that sends its whole body before reading (``http.client``'s ``request``): the
    server closed after discarding 64 KiB within 2 s (``gunicorn.util.close_graceful``'s
    bounds), so a body past that and the sockets' buffers (32 MB here; 10 MB already through
    ``http.client``) met a closed connection: ``BrokenPipeError`` or a reset, the 413 lost,
    where werkzeug's own drain had let it through."""
    size = 32_000_000
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size
    answer = send(body_server, head + b"a" * size)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"413", answer[:300]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["code"] == "payload_too_large"


def test_a_stalled_body_logs_no_error(
    observed_server: BaseWSGIServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that closes on the 400 of its stalled body: werkzeug read on from the timed-out
    connection and logged "Error on request" with an ``OSError`` traceback."""
    monkeypatch.setattr(ProblemRequestHandler, "timeout", 1.0)
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
    with caplog.at_level("DEBUG"):
        with socket.create_connection(("127.0.0.1", observed_server.port), timeout=20) as conn:
            conn.sendall(head + b'{"query": "x"')
            answer = conn.recv(65536)  # and close on the answer
        assert _Observed.done.wait(20)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, caplog.text


def test_a_request_that_times_out_is_logged_at_info(
    observed_server: BaseWSGIServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request line never finished: http.server's "Request timed out" was at error level."""
    monkeypatch.setattr(ProblemRequestHandler, "timeout", 1.0)
    with caplog.at_level("DEBUG", logger="werkzeug"):
        with socket.create_connection(("127.0.0.1", observed_server.port), timeout=20) as conn:
            conn.sendall(b"GET / HT")
            assert conn.recv(65536) == b""  # closed unanswered
        assert _Observed.done.wait(20)
    timeouts = [r for r in caplog.records if "Request timed out" in r.getMessage()]
    assert [r.levelname for r in timeouts] == ["INFO"], caplog.text
