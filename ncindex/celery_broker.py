"""Celery's broker connection from ncindex's Redis URL (``NCINDEX_REDIS_URL``).

The one URL serves redis-py (ncindex's own keys, read by ``redis.Redis.from_url``) and Celery's
Redis transport (kombu 5.x), which reads a URL differently:

- kombu has no ``unix://`` transport (``KeyError: 'No such transport: unix'``): a unix socket is
  ``redis+socket:///path`` (``kombu/transport/redis.py``, ``Channel._connparams``: scheme
  ``socket``), its database the query's ``virtual_host``, which that method pops as ``db``;
- kombu's ``parse_url`` (``kombu/utils/url.py``) hands every query parameter but ``ssl_*`` to
  ``Connection._init_params`` (``kombu/connection.py``), which takes none of redis-py's:
  ``?password=`` raised ``TypeError: multiple values for keyword argument 'password'``,
  ``?db=1`` or ``?socket_timeout=5`` ``unexpected keyword argument``. The ones kombu's channel
  reads are its transport options (``Channel.from_transport_options``) instead;
- ``rediss://`` without ``ssl_*`` options made kombu skip certificate checks
  (``Connection._init_params``: ``ssl_cert_reqs=CERT_NONE``), where redis-py requires them
  (``SSLConnection``: ``ssl_cert_reqs="required"``).

:func:`celery_broker` reads the URL as redis-py does (``redis.connection.parse_url``) and says
the same connection in kombu's terms, or raises ``ValueError`` for what kombu cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import redis
from redis.connection import parse_url

TRANSPORT_OPTIONS = frozenset(
    {
        "socket_timeout",
        "socket_connect_timeout",
        "socket_keepalive",
        "max_connections",
        "health_check_interval",
        "retry_on_timeout",
        "client_name",
    }
)
"""Query parameters of a redis-py URL that kombu's Redis channel takes as transport options of
the same name and meaning (``kombu/transport/redis.py``, ``Channel.from_transport_options``,
passed on to redis-py's connection pool by ``Channel._connparams``)."""


@dataclass(frozen=True)
class CeleryBroker:
    """Celery's settings for one Redis: ``url`` (``broker_url``: ``redis://``, ``rediss://``
    or ``redis+socket://``, no query), ``transport_options`` (for ``broker_transport_options``,
    from the URL's query) and ``use_ssl`` (``broker_use_ssl``: redis-py's ``ssl_*`` keyword
    arguments for ``rediss://``, else ``None``)."""

    url: str
    transport_options: dict[str, Any]
    use_ssl: dict[str, Any] | None


def celery_broker(redis_url: str) -> CeleryBroker:
    """The broker settings with which Celery's kombu reaches the Redis that redis-py reaches at
    ``redis_url`` (``redis://``, ``rediss://`` or ``unix://``): the same socket, database,
    user, password, TLS options and :data:`TRANSPORT_OPTIONS`.

    Raises ``ValueError`` (one line, no value) for a URL redis-py's ``parse_url`` refuses, a
    ``unix://`` URL without a path, ``ssl_*`` on a URL other than ``rediss://``, or a query
    parameter kombu has no equivalent for (``protocol``, ``socket_read_size``, …)."""
    kwargs: dict[str, Any] = parse_url(redis_url)  # type: ignore[no-untyped-call]
    connection_class = kwargs.pop("connection_class", redis.Connection)
    username = kwargs.pop("username", None)
    password = kwargs.pop("password", None)
    db = int(kwargs.pop("db", 0))
    path = kwargs.pop("path", None)
    host = kwargs.pop("host", "localhost")
    port = kwargs.pop("port", 6379)
    ssl = {name: kwargs.pop(name) for name in list(kwargs) if name.startswith("ssl_")}
    options = {name: kwargs.pop(name) for name in list(kwargs) if name in TRANSPORT_OPTIONS}
    if ssl and connection_class is not redis.SSLConnection:
        raise ValueError(f"{', '.join(sorted(ssl))} need a rediss:// URL")
    if kwargs:
        raise ValueError(
            "Celery's Redis transport (kombu) has no equivalent of "
            + ", ".join(f"{name}=" for name in sorted(kwargs))
            + ": leave it out of the URL"
        )
    userinfo = ""
    if username or password:
        userinfo = quote(username or "", safe="") + (
            ":" + quote(password, safe="") if password else ""
        )
        userinfo += "@"
    if connection_class is redis.UnixDomainSocketConnection:
        if not path:
            raise ValueError("a unix:// URL needs the socket's path: unix:///run/redis.sock")
        query = f"?virtual_host={db}" if db else ""
        return CeleryBroker(f"redis+socket://{userinfo}{quote(path)}{query}", options, None)
    scheme = "rediss" if connection_class is redis.SSLConnection else "redis"
    netloc = f"[{host}]" if ":" in host else quote(host, safe="")
    use_ssl = {"ssl_cert_reqs": "required"} | ssl if scheme == "rediss" else None
    return CeleryBroker(f"{scheme}://{userinfo}{netloc}:{port}/{db}", options, use_ssl)
