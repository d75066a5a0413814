"""Index what a folder event brings into view: the subtree of a folder created, copied,
restored from the trash or moved into an eligible place.

Nextcloud fires one event for such a folder, none for what is inside it (reference
nextcloud-api.md §2: "Folder operations produce one event for the folder only";
files_trashbin's ``Trashbin::restore`` dispatches one ``NodeRestoredEvent`` for the restored
node), so the task of that event walks the folder as a scan walks one
(:mod:`ncindex.sync.reconcile`): ``PROPFIND Depth: 1`` per folder, breadth first, at most
:data:`FOLDERS_PER_TASK` folders per run; what is left is handed on to the next run (paged),
so a large tree never makes one long task. Each file is classified like a walked entry and
gets an ``ncindex.index_node`` task unless the index already holds that version for the user
at that path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ncindex.errors import Forbidden, NotFound, StorageUnavailable
from ncindex.index.indexing import Indexer
from ncindex.ingest.events import Action, index_node
from ncindex.nextcloud.webdav import DavEntry

FOLDERS_PER_TASK = 25
"""Folders listed per task run (one ``PROPFIND`` each); a guess that keeps a run to seconds."""


@dataclass(slots=True)
class SubtreeStep:
    """One run's work: ``actions`` to send, ``remaining`` folders for the next run,
    ``listed`` folders listed, ``files`` seen."""

    actions: list[Action] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    listed: int = 0
    files: int = 0


def walk_subtree(
    indexer: Indexer, user: str, folders: list[str], limit: int | None = None
) -> SubtreeStep:
    """List up to ``limit`` (default :data:`FOLDERS_PER_TASK`) of ``folders`` (and the folders
    found below them, breadth first) as ``user``; returns the ``index_node`` actions for the
    files the index does not hold at their listed version and path, and the folders left.
    A path in ``folders`` that names a file stands for that file.
    A folder gone (404) or unreadable (403) meanwhile, or on a storage that cannot be
    reached now (``StorageUnavailable``: a scan's walk lists it again), is skipped. Raises
    what the Nextcloud client raises otherwise (``TransientError``: the task retries)."""
    client = indexer.services.account(user)
    step = SubtreeStep()
    limit = FOLDERS_PER_TASK if limit is None else limit
    queue = deque(folders)
    seen: set[str] = set()
    while queue and step.listed < limit:
        folder = queue.popleft()
        if folder in seen:
            continue
        seen.add(folder)
        try:
            entries = client.propfind(folder, depth=1)
        except (NotFound, Forbidden, StorageUnavailable):
            continue
        finally:
            step.listed += 1
        # a folder's first entry is itself; a file path (a restored file whose event named
        # no node) answers the file alone, which is what is to be indexed
        for entry in entries[1:] if entries and entries[0].is_folder else entries:
            if entry.is_folder:
                queue.append(entry.path)
            elif entry.file_id is not None:
                step.files += 1
                if not _indexed(indexer, user, entry):
                    step.actions.append(index_node(user, entry.file_id))
    step.remaining = list(queue)
    return step


def _indexed(indexer: Indexer, user: str, entry: DavEntry) -> bool:
    """Whether the index holds ``entry`` (or it is not indexed at all: ``True`` for an
    ineligible one) at its listed etag and path for ``user``."""
    ref = indexer.classify(indexer.services.account(user), entry)
    if ref is None:
        return True
    points = indexer.services.store.document_points(ref.key)
    if not points:
        return False
    payload = points[0].payload
    paths = payload.get("paths") or {}
    return payload.get("etag") == entry.etag and paths.get(user) == entry.path
