"""The HTTP servers' own error answers as problem+json, like the apps'
(:mod:`ncindex.web.problems`).

A request the server cannot parse never reaches Flask: gunicorn (``Worker.handle_error``) and
werkzeug's development server (``http.server``'s ``send_error``, under ``make run``) answer it
themselves, with an HTML page. Here both answer with a problem document instead, same status,
``code`` from :data:`SERVER_CODES` and the server's own message as ``detail``:

* gunicorn: :func:`write_problem` replaces ``gunicorn.util.write_error`` (gunicorn 27.0, the
  version installed here, calls it as ``util.write_error(sock, status_int, reason, mesg)``
  from ``Worker.handle_error``; there is no setting for the error format).
  ``deploy/gunicorn.conf.py`` installs it.
* werkzeug: :class:`ProblemRequestHandler` is the embedded server's request handler.

Not covered: the MCP server run on its own under uvicorn (also as gunicorn's
``uvicorn_worker.UvicornWorker``). uvicorn's protocol class answers a request h11 cannot parse
with 400 ``text/plain`` "Invalid HTTP request received." (``H11Protocol.handle_events`` →
``send_400_response``, uvicorn 0.55) before any ASGI app is called, and offers no setting for
it; changing it would mean subclassing that protocol class and the worker, outside the app.
"""

from __future__ import annotations

import io
import json
import socket
import time
from http import HTTPStatus
from urllib.parse import quote, urlsplit

from gunicorn import util as gunicorn_util
from werkzeug.serving import WSGIRequestHandler

from ncindex.web.problems import PROBLEM_JSON, problem_body

#: ``code`` by status for what a server refuses before the app sees it; other 4xx are
#: ``invalid_http``, other 5xx ``internal_error``.
SERVER_CODES = {
    400: "invalid_http",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "headers_too_large",
    501: "not_implemented",
    505: "http_version_not_supported",
}
#: ``field`` by status, where the status alone names the offending part of the request.
_FIELDS = {414: "url", 417: "Expect", 431: "headers"}


def server_problem(status: int, detail: str) -> bytes:
    """The problem document for a server's own ``status`` answer, as UTF-8 JSON bytes."""
    code = SERVER_CODES.get(status, "internal_error" if status >= 500 else "invalid_http")
    return json.dumps(problem_body(status, code, detail, field=_FIELDS.get(status))).encode()


def write_problem(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """Drop-in for ``gunicorn.util.write_error``: write a whole ``status_int reason`` answer
    with a :func:`server_problem` body and ``Connection: close`` on ``sock`` without blocking
    (``gunicorn.util.write_nonblock``, as gunicorn's own), which gunicorn closes afterwards.
    Raises ``OSError`` when the client is gone or not reading (gunicorn logs it)."""
    body = server_problem(status_int, mesg or reason)
    head = (
        f"HTTP/1.1 {status_int} {_phrase(status_int, reason)}\r\nConnection: close\r\n"
        f"Content-Type: {PROBLEM_JSON}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    gunicorn_util.write_nonblock(sock, head.encode("latin-1") + body)


def _phrase(status: int, fallback: str) -> str:
    """The standard reason phrase of ``status`` (gunicorn passes "Bad Request" with its 501),
    else ``fallback``."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return fallback


def _loggable(target: str) -> str:
    """``target``, percent-encoded when ``urlsplit`` cannot read it (``http://[::1/``):
    werkzeug's access log splits the path, and raised."""
    try:
        urlsplit(target)
    except ValueError:
        return quote(target, safe="/")
    return target


def install_in_gunicorn() -> None:
    """Make gunicorn's workers answer unparsable requests with :func:`write_problem`."""
    gunicorn_util.write_error = write_problem


class ProblemRequestHandler(WSGIRequestHandler):
    """werkzeug's request handler, with ``send_error`` answering problem+json and three more
    requests refused before the app: HTTP/0.9 (505 once its request line is read;
    ``http.server`` waited for headers such a request has none of; a two-word request line
    that is no HTTP/0.9, another method than ``GET`` or no target, is 400), a request target
    ``urlsplit`` cannot read, such as ``http://[::1/`` (400; werkzeug's ``make_environ`` would
    raise and drop the connection unanswered), and a body whose length is ambiguous (400,
    :meth:`_ambiguous_framing`).

    A connection that sends nothing for :attr:`timeout` seconds is closed, and a body that
    stalls that long is unreadable (400, field ``body``): without it a client that sent fewer
    bytes than its ``Content-Length`` held a thread forever. Either is the client's doing,
    logged at info level (:meth:`log_error`).

    Every answer closes the connection (werkzeug's ``run_wsgi`` sends ``Connection: close``),
    and :meth:`finish` ends the answer at once, what the client still sends discarded while it
    keeps coming (:attr:`drain_pause`), not read by werkzeug for up to :attr:`timeout`
    (:meth:`make_environ`)."""

    #: Seconds a read of the connection may wait (``socketserver.StreamRequestHandler``);
    #: gunicorn's own request timeout is ``GUNICORN_TIMEOUT`` (60 s in deploy/).
    timeout = 60.0
    #: Seconds the client may pause in what it still sends after the answer before the
    #: connection is closed (:meth:`finish`), gunicorn's ``close_graceful`` linger.
    drain_pause = 2.0
    #: The connection's reader, which ``wsgi.input`` reads (:meth:`make_environ`).
    _reader: io.BufferedIOBase | None = None

    def parse_request(self) -> bool:
        """``http.server``'s parsing plus the refusals above; ``False`` once answered."""
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if len(words) == 2:
            # HTTP/0.9: a request line without a version, and no headers after it (RFC 1945
            # §4.1 "Simple-Request"); http.server read headers up to a blank line first
            self.requestline, self.request_version = requestline, "HTTP/0.9"
            self.command, self.path = words[0], _loggable(words[1])
            self.close_connection = True
            if words[0] != "GET" or words[1].upper().startswith("HTTP/"):
                # not HTTP/0.9 either, whose one method is GET (http.server's "Bad HTTP/0.9
                # request type"), but a request line short of a word, such as its target
                self.send_error(400, "request line of two words, not method, target, version")
                return False
            self.send_error(505, "HTTP/0.9 is not supported")
            return False
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":
            self.send_error(505, "HTTP/0.9 is not supported")
            return False
        try:
            urlsplit(self.path)
        except ValueError as exc:
            self.path = _loggable(self.path)
            self.send_error(400, f"unreadable request target: {exc}")
            return False
        framing = self._ambiguous_framing()
        if framing:
            self.send_error(400, framing)
            return False
        return True

    def _ambiguous_framing(self) -> str | None:
        """Why the body's length cannot be read one way only, else ``None``: ``Content-Length``
        given more than once, or beside ``Transfer-Encoding`` — a proxy in front may read the
        other length (request smuggling; RFC 9112 §6.3). werkzeug took the last
        ``Content-Length``; gunicorn refuses both, as here (``gunicorn/http/message.py``,
        ``Request.set_body_reader``)."""
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            return "Content-Length is given more than once"
        if lengths and "Transfer-Encoding" in self.headers:
            return "Content-Length and Transfer-Encoding are both given"
        return None

    def send_response(self, code: int, message: str | None = None) -> None:
        """``http.server``'s, which sends a ``Date``; :meth:`send_header` drops a second one."""
        self._dated = False
        super().send_response(code, message)

    def send_header(self, keyword: str, value: str) -> None:
        """Send one header, but ``Date`` once a response: a static file's answer carries its
        own beside the server's, and RFC 9110 §5.3 allows a single-value field once."""
        if keyword.lower() == "date":
            if getattr(self, "_dated", False):
                return
            self._dated = True
        super().send_header(keyword, value)

    def handle_expect_100(self) -> bool:
        """Send nothing here: werkzeug's ``run_wsgi`` sends the ``100 Continue`` itself, so
        ``http.server``'s would be a second one."""
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Send ``code`` with a :func:`server_problem` body (``message`` or the status's
        phrase as its detail; ``explain``, http.server's long text, is not sent), always with
        a status line and headers, and close the connection; log it as ``http.server`` does,
        at warning level for the refusals of :data:`SERVER_CODES` and any other 4xx (the
        client's malformed request, not an error of the server), else at error level."""
        message = message or _phrase(code, "error")
        level = "warning" if code in SERVER_CODES or code < 500 else "error"
        self.log(level, "code %d, message %s", code, message)
        body = server_problem(code, message)
        # A request line whose version could not be read leaves http.server's default,
        # HTTP/0.9, which would drop the status line and headers: answer with both.
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self.send_response(code, _phrase(code, message))  # the detail goes in the body
        self.send_header("Connection", "close")
        self.send_header("Content-Type", PROBLEM_JSON)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def make_environ(self) -> dict[str, object]:
        """werkzeug's environ, whose ``wsgi.input`` reads the connection, while ``self.rfile``
        reads nothing more: after the app, werkzeug's ``run_wsgi`` read on from it what the
        client still sent (the unread body of a 413), each read waiting up to :attr:`timeout`
        for 10 MB or the client's close — 60 s after a 413 to a client that waits for the
        close — and raising ``OSError`` at error level once a read of the body had timed
        out. :meth:`finish` discards that rest instead."""
        environ = super().make_environ()
        self._reader = self.rfile
        self.rfile = io.BytesIO()
        return environ

    def finish(self) -> None:
        """Close the connection once answered: shut the sending side, so the client reads the
        end of the answer at once, then discard what it still sends until it closes, pauses
        :attr:`drain_pause` seconds, or :attr:`timeout` seconds have passed, then close.

        Closing with unread bytes resets the connection, and a client still sending (a body
        past the limit, sent whole before the answer is read, as ``http.client`` does) then
        loses the 413. gunicorn's ``close_graceful`` stops after 64 KiB or 2 s: a 10 MB body
        met a closed connection (``BrokenPipeError``) where werkzeug's own drain had let the
        413 through; so the bound here is the client's pause and :attr:`timeout`, as long as
        a request may take to arrive, not the bytes."""
        super().finish()
        if self._reader is not None:
            self._reader.close()
        sock = self.connection
        try:
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + self.timeout
            while (left := deadline - time.monotonic()) > 0:
                sock.settimeout(min(self.drain_pause, left))
                if not sock.recv(65536):
                    break
        except OSError:  # the client gone, or its pause (TimeoutError is one)
            pass
        finally:
            sock.close()

    def log_error(self, format: str, *args: object) -> None:
        """Log at info level what ``http.server`` reports here: a request that did not arrive
        whole within :attr:`timeout` ("Request timed out"), the client's doing, not an error
        of the server (:meth:`send_error`, the other caller, logs its own level)."""
        self.log("info", format, *args)
