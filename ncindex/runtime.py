"""The process's shared services, built lazily from one :class:`Settings`.

Each process (a gunicorn worker, a Celery worker, or the one process of ``ncindex up``) holds
one :class:`Services`: a Redis client, the pooled Nextcloud HTTP client, and the embedding
models with their collections (:class:`~ncindex.embedding.live_models.LiveModels`: the store's model
pointers say which model is live). They are created on first use, once, under a lock, so an
app factory can be cheap and a model loads off the request path.
"""

from __future__ import annotations

import threading
from functools import cached_property

import httpx
import redis

from ncindex.embedding.embedder import Embedder
from ncindex.embedding.live_models import LiveModels
from ncindex.nextcloud.client import HeaderAuth, NextcloudClient, make_http
from ncindex.redis_breaker import RedisBreaker
from ncindex.settings import Settings
from ncindex.store import VectorStore


class Services:
    """Lazily built clients for one process. ``http_transport`` replaces the network for the
    Nextcloud client (tests); ``store`` and ``embedder`` may be handed in to share them: they
    are those of ``Settings.dense_model`` (see
    :class:`~ncindex.embedding.live_models.LiveModels`)."""

    def __init__(
        self,
        settings: Settings,
        *,
        http_transport: httpx.BaseTransport | None = None,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self._http_transport = http_transport
        self._lock = threading.RLock()
        self._given_store = store
        self._given_embedder = embedder

    @cached_property
    def redis(self) -> redis.Redis:
        """Redis client for locks, debounce keys and caches (short socket timeouts)."""
        return redis.Redis.from_url(
            self.settings.redis_url, socket_timeout=5, socket_connect_timeout=2
        )

    @cached_property
    def redis_breaker(self) -> RedisBreaker:
        """Redis for the search API's calls (login cache, exemption, RCP sessions): short
        timeouts behind a circuit breaker, so a stalled Redis fails them fast."""
        return RedisBreaker(self.settings.redis_url)

    @cached_property
    def http(self) -> httpx.Client:
        """The pooled Nextcloud HTTP client."""
        with self._lock:
            return make_http(self.settings, self._http_transport)

    @cached_property
    def models(self) -> LiveModels:
        """The embedding models of this process and which one is live."""
        with self._lock:
            return LiveModels(self.settings, store=self._given_store, embedder=self._given_embedder)

    @property
    def embedder(self) -> Embedder:
        """The live model's embedder, loaded (the thread's pinned view inside
        :meth:`LiveModels.pinned`)."""
        return self.models.view().embedder

    @property
    def store(self) -> VectorStore:
        """The live model's collection, ensured; writes also go to the mirror model's while
        there is one (the thread's pinned view inside :meth:`LiveModels.pinned`)."""
        return self.models.view().store

    def account(self, user: str) -> NextcloudClient:
        """Client acting as configured account ``user`` (authenticating with its login name);
        raises ``KeyError`` if not configured."""
        return NextcloudClient.for_account(
            self.http, user, self.settings.password_for(user), login=self.settings.login_for(user)
        )

    def caller(self, authorization: str) -> NextcloudClient:
        """Client acting with a caller's own ``Authorization`` header (Basic or Bearer)."""
        return NextcloudClient(self.http, HeaderAuth(authorization))

    def close(self) -> None:
        """Close what was opened."""
        for name in ("models", "http", "redis", "redis_breaker"):
            if name in self.__dict__:
                self.__dict__[name].close()
