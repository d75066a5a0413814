"""Verify-on-read of nodes — files and notes, both files in the user's view — by WebDAV.

Both doc types are checked the same way: a WebDAV ``SEARCH`` by file id as the searching user
(:meth:`~ncindex.nextcloud.client.NextcloudClient.find_by_id`, reference §3.4). Nextcloud
answers only what the caller can see (nextcloud/server
``apps/dav/lib/Files/FileSearchBackend.php`` ``search``), so an empty answer means gone, and
an entry listed without read permission (``oc:permissions`` lacking ``G``: an admin's
access-control rule) is dropped too. The answer gives the node's current path, which the
index rules (globs) are judged on. A page's files and notes go together in one request
(:func:`verify_nodes`).

A note was checked by the Notes API (``GET /notes/{id}``) before: nextcloud/notes
``lib/Service/NotesService.php`` ``get`` → ``getFileById`` answers 404 unless the id is a
file under the notes folder with a note extension, and ``get`` also writes the note's meta
row (``MetaService::update``) — one request and a database write per note on every page. The
WebDAV check asks the question that keeps results safe (can this user still read the file?)
for the whole page at once; a note moved out of the notes folder stays readable, so it stays
found (with its new path) until its move event indexes it as a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.sources.base import Checked, Verdict


def _verdict(entry: DavEntry | None) -> Checked:
    if entry is None or not entry.readable:
        return Checked(Verdict.DROPPED)
    return Checked(Verdict.KEPT, entry.path, entry.content_type)


def verify_node(client: NextcloudClient, payload: dict[str, Any]) -> Checked:
    """One node (``payload["doc_id"]``, its file id) checked alone: ``KEPT`` with its current
    path and MIME type, ``DROPPED`` when listed without read permission. Raises ``NotFound``
    when the user cannot see it, ``KeyError``/``ValueError`` for a payload without a numeric
    ``doc_id``, and what the client raises."""
    return _verdict(client.find_by_id(int(payload["doc_id"])))


def verify_nodes(client: NextcloudClient, payloads: Sequence[dict[str, Any]]) -> list[Checked]:
    """Nodes of any node doc type checked together, one verdict per payload in order: one
    ``SEARCH`` for up to :data:`~ncindex.nextcloud.webdav.MAX_FILEIDS_PER_SEARCH` file ids
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.find_by_ids`); a node absent from the
    answer, or listed without read permission, is ``DROPPED``. Raises what the client raises
    (the whole batch failed) and ``KeyError``/``ValueError`` for a payload it cannot read."""
    ids = [int(p["doc_id"]) for p in payloads]
    entries = client.find_by_ids(ids)
    return [_verdict(entries.get(file_id)) for file_id in ids]


class VerifiedByWebDav:
    """The verification of a node source (put before ``Source`` in its bases): one node by
    :func:`verify_node`, a page's files and notes together by :func:`verify_nodes`."""

    #: the request the node sources' candidates share (``Source.verified_with``)
    verified_with: ClassVar[str | None] = "webdav"

    def verify(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        """:func:`verify_node` (``Source.verify``): gives the node's current path."""
        return verify_node(client, payload)

    def verify_many(
        self, client: NextcloudClient, payloads: Sequence[dict[str, Any]]
    ) -> list[Checked]:
        """:func:`verify_nodes` (``Source.verify_many``): files and notes in one SEARCH."""
        return verify_nodes(client, payloads)
