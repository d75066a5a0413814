"""Grants written and not yet confirmed, kept in Redis until a look-up confirms or a roll-back
takes them back.

A metadata-only update that gives a user access the stored version did not (a file newly
shared with them) is written from a look-up made before the write, so it is looked up once
more after it (:meth:`ncindex.index.indexing.Indexer._regranted`), and taken back when that
look-up fails (:meth:`ncindex.index.indexing.Indexer._ungranted`). Either step can fail to
finish: the roll-back's store write fails, or the worker is killed between the write and the
look-up. The grant then stays written, and a later run for the same user finds them in the
``acl`` already — nothing new to grant, so nothing looked up after its write. The mark,
written *before* the grant, tells that run the grant is still unconfirmed: it treats it as
new (looks up after its write, takes it back when that fails) and clears the mark once the
look-up or the roll-back is done. A Deck card's write that grants a board participant the
stored ``acl`` lacks is marked alike (path ``null``), and its board read again after the write
(:meth:`ncindex.index.indexing.Indexer._readers_marked`, ``_readers_rechecked``).

One Redis hash per user, :meth:`ncindex.names.Names.unconfirmed_grants` (field ``doc_key`` →
JSON ``{"path": <the user's path in the stored version before the grant, or null>}``). A
mark left after the grant is gone (its clearing failed) costs one look-up more, never an
access: it is only ever read together with the ``acl``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis
import structlog

from ncindex.names import Names

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """A grant marked unconfirmed: ``path_before`` is the user's path in the stored version
    before it (``None``: none), what a roll-back puts back."""

    path_before: str | None


class UnconfirmedGrants:
    """The unconfirmed grants of ``user`` in ``client`` (Redis), under ``names``."""

    def __init__(self, client: redis.Redis, names: Names, user: str) -> None:
        self.client = client
        self.key = names.unconfirmed_grants(user)
        self.user = user

    def mark(self, doc_key: str, path_before: str | None) -> None:
        """Mark the grant of ``doc_key`` about to be written unconfirmed, ``path_before``
        being the user's path before it. Called before the write: a failure here stops it.
        Raises ``redis.RedisError``."""
        self.client.hset(self.key, doc_key, json.dumps({"path": path_before}))

    def get(self, doc_key: str) -> Unconfirmed | None:
        """The mark of ``doc_key``, ``None`` when there is none. Raises ``redis.RedisError``."""
        raw = self.client.hget(self.key, doc_key)
        if raw is None:
            return None
        return Unconfirmed(json.loads(raw)["path"])

    def clear(self, doc_key: str) -> None:
        """Drop the mark of ``doc_key``: its grant was confirmed or taken back. A Redis error
        is logged, not raised: the mark left costs the next run one look-up more."""
        try:
            self.client.hdel(self.key, doc_key)
        except redis.RedisError as exc:
            log.warning("grant_mark_not_cleared", doc_key=doc_key, user=self.user, error=str(exc))
