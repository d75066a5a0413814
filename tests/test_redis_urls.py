"""Every Redis URL form Settings accept carries a task to a real Celery worker, on a
``redis-server`` of the test's own (a unix socket, a password, TLS), or is refused by Settings
in one line naming ``NCINDEX_REDIS_URL``.

The URL serves redis-py and Celery's kombu, which read it differently
(:mod:`ncindex.celery_broker`): before, ``unix://`` failed every worker with
``KeyError: 'No such transport: unix'``, ``?password=`` with ``TypeError: multiple values for
keyword argument 'password'``, ``?db=``/``?socket_timeout=`` with ``unexpected keyword
argument``, and ``rediss://`` reached the broker without checking its certificate."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from flask import Flask, Response

from ncindex import names
from ncindex.ingest.queueing import celery_app
from ncindex.names import Names
from ncindex.redis_server import free_port, reachable
from ncindex.settings import Settings, SettingsError, load_settings
from ncindex.web.ratelimit import CallerLimit, create_limiter
from support import wait_until
from workers.heartbeat import connect_task_hooks

PASSWORD = "s3cret;/@"  # characters a URL must quote


@contextlib.contextmanager
def redis_server(url: str, *args: str) -> Iterator[None]:
    """A ``redis-server`` started with ``args`` (no persistence), until it answers at ``url``."""
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is not installed"
    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: reachable(url) or process.poll() is not None, timeout=10)
        assert process.poll() is None, "redis-server did not start"
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


def round_trip(url: str) -> Settings:
    """Send a task through ``url`` to a real worker (Celery's, in this process, solo pool)
    and wait until it ran; returns the settings."""
    settings = Settings(redis_url=url, namespace="urls")
    app = celery_app(settings)
    ran: list[int] = []

    @app.task(name="probe.note_run", shared=False)
    def note_run(number: int) -> None:
        ran.append(number)

    connect_task_hooks()  # the "last task finished" stamp goes to the same Redis
    with start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10, loglevel="WARNING"
    ):
        app.send_task("probe.note_run", args=[1], queue=names.INGEST)
        wait_until(lambda: ran, timeout=30)
        stamp = Names(settings.namespace).last_task_done
        wait_until(lambda: redis.Redis.from_url(url).exists(stamp), timeout=30)
    assert ran == [1]
    return settings


def test_a_unix_socket_url_carries_a_task_to_a_worker() -> None:
    with tempfile.TemporaryDirectory(prefix="nci-") as folder:  # sun_path: 107 bytes at most
        socket = f"{folder}/redis.sock"
        url = f"unix://{socket}?db=1"
        with redis_server(url, "--port", "0", "--unixsocket", socket):
            round_trip(url)
            # the broker's keys went to the database the URL names, as redis-py's did
            assert redis.Redis(unix_socket_path=socket, db=1).keys("*_kombu.binding.*")
            assert redis.Redis(unix_socket_path=socket, db=0).dbsize() == 0


@pytest.mark.parametrize(
    "query",
    [
        "/2?password={password}",
        "/0?username=default&password={password}&db=3&socket_timeout=5&client_name=nci",
    ],
)
def test_a_password_in_the_query_carries_a_task_to_a_worker(query: str) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}" + query.format(password=quote(PASSWORD, safe=""))
    with redis_server(url, "--port", str(port), "--requirepass", PASSWORD):
        round_trip(url)
        db = redis.Redis.from_url(url).connection_pool.connection_kwargs["db"]
        assert redis.Redis.from_url(url).keys("*_kombu.binding.*"), db
        assert redis.Redis(port=port, password=PASSWORD, db=0).dbsize() == (db == 0)


@pytest.fixture(scope="module")
def tls_redis() -> Iterator[tuple[int, Path]]:
    """A ``redis-server`` speaking only TLS (no client certificate asked) on a free port,
    its certificate for 127.0.0.1 signed by a CA of the test's own: the port and the CA's
    PEM file."""
    with tempfile.TemporaryDirectory(prefix="nci-") as name:
        folder = Path(name)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        server_key = ec.generate_private_key(ec.SECP256R1())
        ca = _certificate("ncindex test CA", ca_key, ca_key, authority=True)
        server = _certificate("127.0.0.1", server_key, ca_key, authority=False)
        (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        (folder / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
        (folder / "server.key").write_bytes(
            server_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        port = free_port()
        url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={folder / 'ca.pem'}"
        args = ["--port", "0", "--tls-port", str(port), "--tls-auth-clients", "no"]
        args += ["--tls-cert-file", str(folder / "server.pem")]
        args += ["--tls-key-file", str(folder / "server.key")]
        args += ["--tls-ca-cert-file", str(folder / "ca.pem")]
        with redis_server(url, *args):
            yield port, folder / "ca.pem"


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey, *,
    authority: bool,
) -> x509.Certificate:  # fmt: skip
    """A certificate of ``key`` for ``subject`` (127.0.0.1 unless ``authority``), valid for
    an hour, signed by ``signer`` as the test CA."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ncindex test CA")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=authority, path_length=None), critical=True)
    )
    if not authority:
        address = x509.IPAddress(ipaddress.ip_address(subject))
        builder = builder.add_extension(x509.SubjectAlternativeName([address]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def test_a_rediss_url_carries_a_task_to_a_worker(tls_redis: tuple[int, Path]) -> None:
    port, ca = tls_redis
    round_trip(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}&ssl_cert_reqs=required")


def test_the_broker_checks_the_certificate_as_redis_py_does(tls_redis: tuple[int, Path]) -> None:
    """``rediss://`` without ``ssl_*``: redis-py requires a certificate the system trusts
    (``SSLConnection``: ``ssl_cert_reqs="required"``); kombu connected without any check
    (``Connection._init_params``: ``CERT_NONE``), to whoever answered at the address."""
    url = f"rediss://127.0.0.1:{tls_redis[0]}/0"
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        redis.Redis.from_url(url).ping()
    with (
        celery_app(Settings(redis_url=url)).connection() as connection,
        pytest.raises(redis.ConnectionError, match="certificate verify failed"),
    ):
        connection.connect()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # redis-py takes these; kombu has no equivalent (RESP3, its read buffer)
        ("redis://127.0.0.1:6379/0?protocol=3", "has no equivalent of protocol="),
        ("unix:///run/redis.sock?socket_read_size=4096", "has no equivalent of socket_read_size="),
        # redis-py's UnixDomainSocketConnection took an empty path, and failed at connect
        ("unix://", "a unix:// URL needs the socket's path"),
    ],
)
def test_a_url_kombu_cannot_read_is_one_line_naming_the_variable(
    url: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCINDEX_REDIS_URL", url)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith("setting NCINDEX_REDIS_URL: ") and said in message, message
    assert "\n" not in message


def test_a_unix_socket_url_holds_the_rate_limit_counts() -> None:
    """The search API's and the MCP server's rate limits count in the Redis of a ``unix://``
    URL: the ``limits`` library knows that scheme only as ``redis+unix://``
    (``RedisStorage.STORAGE_SCHEME``), so before, building either limiter raised
    ``ConfigurationError: unknown storage scheme`` and the app did not start."""
    with tempfile.TemporaryDirectory(prefix="nci-") as folder:  # sun_path: 107 bytes at most
        socket = f"{folder}/redis.sock"
        url = f"unix://{socket}?db=2"
        with redis_server(url, "--port", "0", "--unixsocket", socket):
            settings = Settings(redis_url=url, namespace="urls", search_rate_limit="2/minute")
            limit = CallerLimit(settings)
            assert limit.hit("Basic YWxpY2U6cHc=", "192.0.2.1") is None
            assert limit.hit("Basic YWxpY2U6cHc=", "192.0.2.1") is None
            assert limit.hit("Basic YWxpY2U6cHc=", "192.0.2.1") is not None  # the third
            app = Flask(__name__)
            limiter = create_limiter(app, settings, lambda _limit: Response(status=429))
            assert limiter is not None
            counted = redis.Redis(unix_socket_path=socket, db=2)
            assert counted.keys(f"{settings.names.limits_prefix}*")
            app.add_url_rule("/probe", "probe", limiter.limit("1/minute")(lambda: "ok"))
            with app.test_client() as http:
                assert http.get("/probe").status_code == 200
                assert http.get("/probe").status_code == 429
