"""Who may see an indexed document, and what happens when someone no longer may (DESIGN §5):
a user's access taken out of a document's ``acl`` and paths (the document deleted when nobody
is left or its owner lost it), the loss marked for the reconcile scans, and the lookups the
evictions and moves of :class:`ncindex.index.indexing.Indexer` need (what a user has under a
path, who else holds a file).

Everything here reads and writes the index and Redis only: deciding that access is lost —
Nextcloud's answer as the user — is the caller's.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import structlog
from qdrant_client import models

from ncindex.documents import DocRef, folder_ancestors, path_fields, principal
from ncindex.index.steps import Steps
from ncindex.runtime import Services
from ncindex.sources.registry import NODE_TYPES
from ncindex.store.queries import first_chunks

log = structlog.get_logger(__name__)

GONE = "gone"
"""How a user lost access (:meth:`Access.remove`): Nextcloud no longer shows the document to
them (deleted, moved out of view, unshared) — or,
:data:`ncindex.sources.eligibility.UNREADABLE`, it is shown without read permission (an access
rule)."""


class Access:
    """Access changes on one process's :class:`Services` (stored versions read through
    ``steps``, without vectors)."""

    def __init__(self, services: Services, steps: Steps) -> None:
        self.services = services
        self.steps = steps

    def remove_node(self, user: str, file_id: int, *, lost: str | None = GONE) -> None:
        """:meth:`remove` for file ``file_id`` under each doc type a file can be (a file, or a
        note when it is a Markdown file in the notes folder)."""
        for doc_type in NODE_TYPES:
            self.remove(user, DocRef(doc_type, str(file_id)), lost=lost)

    def remove(self, user: str, ref: DocRef, *, lost: str | None = GONE) -> bool:
        """Take ``user`` out of ``ref``'s ``acl`` and paths; delete the document when no
        principal is left or when ``user`` owns the file or note (the owner's deletion ends
        every share; a group folder's file has no owner,
        :attr:`~ncindex.nextcloud.webdav.DavEntry.mounted`, so a member who leaves takes
        only their own access). A Deck card's ``owner`` is who wrote it, not whose board
        holds it: one who lost the board (left it, was unshared) leaves the others their
        access.
        Returns whether anything changed.

        ``lost`` says why: :data:`GONE` or ``UNREADABLE`` (Nextcloud's answer; the loss is
        marked for the scans, :meth:`mark_lost`, even when the index held nothing of it for
        ``user``: a share given back or an access rule lifted may change no folder etag of
        ``user``'s), ``None`` for an index rule (globs, MIME types, tags: nothing marked)."""
        current = self.steps.read(ref, vectors=False).payload
        if lost is not None:
            path = (current or {}).get("paths", {}).get(user)
            owner = current is not None and current.get("owner") == user
            # an owner's file gone is deleted or moved (new etags up its folders): no walk
            self.mark_lost(user, ref, None if owner and lost == GONE else path)
        if current is None or principal(user) not in current["acl"]:
            return False
        acl = set(current["acl"]) - {principal(user)}
        if not acl or (current.get("owner") == user and ref.doc_type in NODE_TYPES):
            self.services.store.delete_document(ref.key)
            log.info("evicted", doc_key=ref.key, user=user)
            return True
        paths = {u: p for u, p in current["paths"].items() if u != user}
        self.services.store.set_payload(ref.key, {"acl": sorted(acl)} | path_fields(paths))
        log.info("access_removed", doc_key=ref.key, user=user)
        return True

    def mark_lost(self, user: str, ref: DocRef, path: str | None) -> None:
        """Note in Redis (:meth:`ncindex.names.Names.lost_access`, kept
        ``reconcile_full_walk_seconds``, after which the full walk finds everything) that
        ``user`` lost access to ``ref``, last at ``path`` in ``user``'s view (``None``: not
        known). Until the document is back in ``user``'s index, each scan walks the folders
        above ``path`` whatever their etags say, and never holds it back as unindexable
        (:mod:`ncindex.sync.reconcile`)."""
        settings = self.services.settings
        key = settings.names.lost_access(ref.doc_type.value, user)
        pipe = self.services.redis.pipeline()
        pipe.hset(key, ref.doc_id, path or "")
        pipe.expire(key, settings.reconcile_full_walk_seconds)
        pipe.execute()

    def holders(self, file_id: int, *, besides: str) -> list[tuple[str, int]]:
        """``(account, file id)`` for every configured account but ``besides`` that file
        ``file_id`` is indexed for (its ``acl``, under either node doc type)."""
        out: set[tuple[str, int]] = set()
        for doc_type in NODE_TYPES:
            current = self.steps.read(DocRef(doc_type, str(file_id)), vectors=False).payload
            for entry in (current or {}).get("acl", []):
                uid = entry.removeprefix("user:")
                accounts = self.services.settings.accounts
                if entry.startswith("user:") and uid != besides and uid in accounts:
                    out.add((uid, file_id))
        return sorted(out)

    def co_viewers(self, user: str, path: str, *, besides: Collection[str]) -> tuple[str, ...]:
        """The configured accounts but ``user`` that may see the document at ``path`` in
        ``user``'s view too, in configuration order: those in the ``acl`` of the documents
        (but the doc keys ``besides``: the new ones) under the nearest folder above ``path``
        that holds any. A folder shared with them shares what is written into it, and
        Nextcloud tells no one else: a node event is dispatched once, for the node in the
        writer's view (nextcloud/server ``lib/private/Files/Node/HookConnector.php``
        ``postCreate``, ``postWrite``, ``postCopy``: the node of ``Filesystem::getView()``).
        Candidates only, to be asked (``ncindex.resolve_node``); nothing is read when no
        other account is configured. Per folder tried, a facet of the others' documents there
        and, when it is empty, one point scrolled to see whether the folder holds any (a
        facet of every document under a folder of 10,000 cost 0.96 ms, the two 0.42 ms,
        Qdrant Edge, 2026-12-06). Raises ``StoreUnavailable``."""
        others = [u for u in self.services.settings.accounts if u != user]
        if not others:
            return ()
        store = self.services.store
        theirs = models.FieldCondition(
            key="acl", match=models.MatchAny(any=[principal(u) for u in others])
        )
        new = models.FieldCondition(key="doc_key", match=models.MatchAny(any=sorted(besides)))
        for key in reversed(folder_ancestors(user, path)):
            folder = models.FieldCondition(
                key="folder_ancestors", match=models.MatchValue(value=key)
            )
            here, seen = first_chunks(folder), first_chunks(folder, theirs)
            here.must_not = seen.must_not = [new] if besides else None
            principals = store.facet_values("acl", seen)
            if principals:
                return tuple(u for u in others if principal(u) in principals)
            if next(iter(store.scroll(here, ["doc_key"], page_size=1)), None) is not None:
                return ()  # the nearest folder holding documents: none of theirs
        return ()

    def under(self, user: str, path: str) -> list[dict[str, Any]]:
        """Payloads (one per document: ``doc_key``, ``paths``, ``chunk_index``) of what
        ``user`` has at ``path`` or below it."""
        key = f"{user}:{path}"
        flt = models.Filter(
            should=[
                models.FieldCondition(key="file_path", match=models.MatchValue(value=key)),
                models.FieldCondition(key="folder_ancestors", match=models.MatchValue(value=key)),
            ]
        )
        seen: dict[str, dict[str, Any]] = {}
        for payload in self.services.store.scroll(flt, ["doc_key", "paths", "chunk_index"]):
            if payload.get("chunk_index") == 0:
                seen.setdefault(payload["doc_key"], payload)
        return list(seen.values())
