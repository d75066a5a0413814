"""What the search page offers as filters: the caller's folders and tags (``GET /v1/folders``,
``GET /v1/tags``).

Both are read from the index, restricted to the documents whose ``acl`` names the caller, so
a caller never learns another user's folder or tag: folders come from the caller's own
``folder_ancestors`` keys (``"{caller}:{folder}"``, the caller's view, a shared folder under
the name it has in the caller's files), tags from the documents the caller can read. Both are
the engine's facets of one point per document (``chunk_index`` 0), so a listing costs the
engine a pass over the caller's documents, not a read of their payloads into Python. Like
search candidates before verify-on-read, they reflect the index, which may trail Nextcloud by
the sync delay; then each is held to Nextcloud as it is now, as the caller, within
:data:`CHECK_SECONDS`: the folders to the caller's files (:func:`visible_folders`: two
requests), so a folder share revoked since the caller's last scan, which fires no event,
leaves the listing at once, wherever it was mounted; the tags to the tags the caller can see
(:func:`visible_tags`: one request), so a tag deleted, renamed or made invisible since, or one
only another user may see, is not offered. A tag found only on such a revoked share's
documents stays listed until the scan: telling it would cost a ``REPORT`` per tag.

:func:`listed_folders` and :func:`listed_tags` are the two lists as served, and
:func:`facet_page` one page of either, with :data:`DEFAULT_PAGE`, :data:`MAX_PAGE` and
:data:`MAX_OFFSET`: the REST endpoints (``search_api.facets``) and the MCP tools
``list_folders`` and ``list_tags`` (``mcp_server.tools``) answer the same.
:func:`counted_values` lists the doc types, MIME types, note categories and tags of the
caller's documents with their counts (the MCP ``list_values`` tool), filtered the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, get_args

import structlog
from pydantic import BaseModel, Field

from ncindex.errors import (
    Forbidden,
    NextcloudProtocolError,
    NotFound,
    TransientError,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.sources.base import ancestors
from ncindex.store.port import VectorStore
from ncindex.store.queries import acl_condition, document_counts, first_chunks

log = structlog.get_logger(__name__)

#: What a check of a list gives up on (the index's list is answered): Nextcloud unavailable or
#: slower than :data:`CHECK_SECONDS`, an answer of the wrong shape, the request refused (403:
#: an admin's access-control rule). Not the credential refused (``NextcloudAuthError``: an app
#: password revoked since the caller was resolved, within ``user_cache_seconds``): that
#: propagates, and the endpoint answers 401 and drops the cached credential, as a search does
#: — the index's list unchecked would give a revoked credential more than its owner is shown
#: (the folders of shares revoked since the last scan).
_UNCHECKED = (TransientError, NextcloudProtocolError, NotFound, Forbidden)


def caller_folders(store: VectorStore, user: str) -> list[str]:
    """Every folder holding an indexed document ``user`` can read, in ``user``'s view
    (``"/Documents/Oncology"``; the root ``"/"`` left out), sorted: the ``folder_ancestors``
    values of those documents (a facet, counted in the engine) that are ``user``'s keys.
    Raises ``StoreUnavailable``."""
    prefix = f"{user}:"
    keys = store.facet_values("folder_ancestors", first_chunks(acl_condition(user)))
    return sorted(k[len(prefix) :] for k in keys if k.startswith(prefix) and k != prefix + "/")


CHECK_SECONDS = 2.0
"""The timeout of each list's check, seconds (the HTTP client's, in place of
``NCINDEX_HTTP_TIMEOUT``), shared by its requests: :func:`visible_folders`' SEARCH gets what
the root's listing left of it. The lists read only the index before they asked Nextcloud, and
a slow Nextcloud should not hold the page's pickers for the whole ``NCINDEX_HTTP_TIMEOUT``."""

FOLDER_SEARCH_LIMIT = 2000
"""Most folders :func:`visible_folders` asks Nextcloud's SEARCH for. An answer that long may
have been cut short, so it proves no folder absent, and the folders below the top stay as the
index has them. Guessed, not measured: one folder is about 200 bytes of the answer (some
400 KB in all) and one node Nextcloud builds."""


def visible_folders(client: NextcloudClient, folders: list[str]) -> list[str]:
    """``folders`` (the caller's, :func:`caller_folders`) less those the caller's files no
    longer hold, asked as ``client.user``:

    1. one ``PROPFIND Depth: 1`` of the files root: a folder under a top-level folder that is
       not there goes. A share is mounted at the top of the sharee's files by default
       (nextcloud/server ``config/config.sample.php`` ``share_folder``, ``'/'``), and revoking
       it fires no webhook, so its folder would stay listed until the sharee's scan; a folder
       deleted or moved away whose event is still on its way leaves as well.
    2. when folders below the top remain, one WebDAV SEARCH for every folder of the caller's
       files (:meth:`~ncindex.nextcloud.client.NextcloudClient.folders`, at most
       :data:`FOLDER_SEARCH_LIMIT`): one below the top that is neither in the answer nor above
       a folder in it goes — a share mounted deeper (``share_folder`` set, or its folder moved
       into another) and revoked since. Not a request per folder, and not a SEARCH by the
       folders' names: a share's folder may be named otherwise in the sharee's files than in
       its owner's (renamed, or `` (2)`` added on a clash), and Nextcloud matches names in
       the file cache, where it has its owner's name (``FileSearchBackend::
       transformSearchOperation`` as read, at commit 01ef559, also compares
       ``mount_point_name``; since which version was not established); the answer's paths
       are the caller's.

    Both share :data:`CHECK_SECONDS`. When a step cannot be made (see ``_UNCHECKED``; no time
    left for the SEARCH, or its answer may have been cut short) the folders it would judge
    are returned as the step before left them: the listing is a hint, and every search result
    is verified."""
    if not folders:
        return folders
    deadline = time.monotonic() + CHECK_SECONDS
    try:
        listing = client.propfind("/", 1, timeout=CHECK_SECONDS)
        top = {e.path for e in listing[1:] if e.is_folder}
    except _UNCHECKED as exc:
        log.warning("root_not_listed", user=client.user, error=str(exc))
        return folders
    kept = [f for f in folders if "/" + f.split("/")[1] in top]
    left = deadline - time.monotonic()
    if left <= 0 or all(f.count("/") == 1 for f in kept):
        return kept
    try:
        found = client.folders(FOLDER_SEARCH_LIMIT, timeout=left)
    except _UNCHECKED as exc:
        log.warning("folders_not_searched", user=client.user, error=str(exc))
        return kept
    if len(found) >= FOLDER_SEARCH_LIMIT:
        log.info("folders_not_all_searched", user=client.user, limit=FOLDER_SEARCH_LIMIT)
        return kept
    present = {folder for path in found for folder in ancestors(path)}
    return [f for f in kept if f.count("/") == 1 or f in present]


def caller_values(store: VectorStore, user: str, field: str) -> list[str]:
    """Every value of the keyword-indexed payload ``field`` (``tags``, ``category``,
    ``owner``) on an indexed document ``user`` can read, sorted: a facet of the first chunks
    whose ``acl`` names ``user``, counted in the engine. Raises ``StoreUnavailable``."""
    return sorted(store.facet_values(field, first_chunks(acl_condition(user))))


def caller_tags(store: VectorStore, user: str) -> list[str]:
    """Every system tag on an indexed document ``user`` can read, sorted. Raises
    ``StoreUnavailable``."""
    return caller_values(store, user, "tags")


def visible_tags(client: NextcloudClient, tags: list[str]) -> list[str]:
    """``tags`` (the caller's, :func:`caller_tags`) less those that are not the name of a
    system tag the caller can see now: one ``PROPFIND /remote.php/dav/systemtags/`` as
    ``client.user`` (:meth:`~ncindex.nextcloud.client.NextcloudClient.system_tags`: the
    user-visible tags, every tag for an admin), within :data:`CHECK_SECONDS`. A tag deleted
    or renamed since its documents were indexed goes, and so does one the caller may not see
    (made invisible since, or on a document as an admin read it: a document's tags are the
    ones its last reader saw, ``nc:system-tags`` listing only the tags that reader may see).
    Names are compared as Nextcloud spells them, as the index holds them. When the tags cannot
    be read (see ``_UNCHECKED``) ``tags`` is returned unchanged."""
    if not tags:
        return tags
    try:
        names = set(client.system_tags(timeout=CHECK_SECONDS).values())
    except _UNCHECKED as exc:
        log.warning("tags_not_listed", user=client.user, error=str(exc))
        return tags
    return [t for t in tags if t in names]


DEFAULT_PAGE = 200
"""Values in one page of a list when the caller names no ``limit``."""
MAX_PAGE = 1000
"""Largest ``limit``: most values in one page."""
MAX_OFFSET = 100_000_000
"""Largest ``offset``."""


def _user(client: NextcloudClient) -> str:
    if client.user is None:  # a resolved caller always has one
        raise ValueError("the client has no user")
    return client.user


def listed_folders(store: VectorStore, client: NextcloudClient) -> list[str]:
    """The caller's folder list as served: :func:`caller_folders` of ``client.user`` held to
    the caller's files by :func:`visible_folders`. Raises ``StoreUnavailable``; ``ValueError``
    for a client without a user."""
    return visible_folders(client, caller_folders(store, _user(client)))


def listed_tags(store: VectorStore, client: NextcloudClient) -> list[str]:
    """The caller's tag list as served: :func:`caller_tags` of ``client.user`` held to the
    tags the caller can see by :func:`visible_tags`. Raises ``StoreUnavailable``;
    ``ValueError`` for a client without a user."""
    return visible_tags(client, caller_tags(store, _user(client)))


def listed_categories(store: VectorStore, client: NextcloudClient) -> list[str]:
    """The caller's note categories as served (``GET /v1/categories``): each ``category`` on
    an indexed note ``client.user`` can read (:func:`caller_values`), sorted; ``""`` among
    them when such a note has none (it lies in the notes folder itself: nextcloud/notes
    lib/Service/Note.php ``getCategory``), the value that selects those notes. The index's
    alone: a category is a folder below the caller's notes folder, renamed by a file move the
    sync follows as it follows the note's. Raises ``StoreUnavailable``; ``ValueError`` for a
    client without a user."""
    return caller_values(store, _user(client), "category")


def listed_owners(store: VectorStore, client: NextcloudClient) -> list[str]:
    """The owners of the caller's documents as served (``GET /v1/owners``): the user id of the
    owner of each indexed document ``client.user`` can read (:func:`caller_values`), sorted, the
    caller among them for their own. Only the readable documents' owners, whom Nextcloud already
    names to the caller on each of those documents (a file's or note's ``oc:owner-id`` in the
    caller's PROPFIND: nextcloud/server apps/dav/lib/Connector/Sabre/FilesPlugin.php
    ``handleGetProperties``; a Deck card's ``owner`` in nextcloud/deck's card answers to the
    board's members: lib/Db/Card.php, ``addResolvable('owner')``), so the list tells of no other
    user. As the index has them: a share revoked since the caller's last scan still counts until
    then, as :func:`counted_values`' counts do. Raises ``StoreUnavailable``; ``ValueError`` for
    a client without a user."""
    return caller_values(store, _user(client), "owner")


ValueField = Literal["doc_type", "mime_type", "category", "tags", "owner"]
"""The keyword fields :func:`counted_values` lists (each keyword-indexed:
:mod:`ncindex.store.schema`): the values ``search``'s ``doc_types``, ``mime_types``,
``category`` and ``tags`` take, and an ``owner`` filter's."""
VALUE_FIELDS: tuple[str, ...] = get_args(ValueField)


def counted_values(
    store: VectorStore, client: NextcloudClient, field: str
) -> list[dict[str, str | int]]:
    """``[{"value", "count"}]``: each value of ``field`` (one of :data:`VALUE_FIELDS`) on an
    indexed document ``client.user`` can read, with how many such documents hold it, most
    first (then by value). Restricted in the engine to the points whose ``acl`` names the
    caller, as every search is (:func:`~ncindex.store.queries.acl_condition`), one per
    document (``chunk_index`` 0), so no value or count comes from a document the caller
    cannot read in the index; a document the index holds in two versions for a while is
    counted once, by its newest
    (:func:`~ncindex.store.queries.document_counts`). The counts are the index's: not
    re-checked with Nextcloud per document, so until the next scan they may include a
    document unshared since (a share's revocation fires no event). Tags are then held to the
    tags the caller can see now (:func:`visible_tags`), as :func:`listed_tags` holds them.
    Raises ``StoreUnavailable``; ``ValueError`` for a client without a user or another
    ``field``."""
    if field not in VALUE_FIELDS:
        raise ValueError(f"not a listed field: {field}")
    counts = document_counts(store, field, first_chunks(acl_condition(_user(client))))
    if field == "tags":
        counts = {t: counts[t] for t in visible_tags(client, sorted(counts))}
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"value": value, "count": count} for value, count in ordered]


class CountedValue(BaseModel):
    """A value and the caller's indexed documents holding it."""

    value: str = Field(description="As `search` takes it (a MIME type whole, a tag's name).")
    count: int = Field(
        description="Indexed documents the caller can read holding it, as the index has them "
        "(not re-checked with Nextcloud: may include one unshared since the last scan)."
    )


class ValuesPage(BaseModel):
    """A page of one field's values on the caller's documents (the MCP `list_values` tool)."""

    field: str = Field(description="The field listed.")
    values: list[CountedValue] = Field(description="Most documents first, then by value.")
    total: int = Field(description="How many values there are in all, on every page.")
    next_offset: int | None = Field(
        description="The `offset` of the next page; null when this page is the last."
    )


class FoldersPage(BaseModel):
    """A page of the caller's folders (`GET /v1/folders`, the MCP `list_folders` tool)."""

    folders: list[str] = Field(
        description="Folders holding indexed documents the caller can read, as paths in the "
        "caller's own files (`/Projects/Lighthouse`; the root left out), sorted; each one is "
        "a value for `search`'s `path_prefixes` (or a `path_prefix` filter)."
    )
    total: int = Field(description="How many folders there are in all, on every page.")
    next_offset: int | None = Field(
        description="The `offset` of the next page; null when this page is the last."
    )


class TagsPage(BaseModel):
    """A page of the caller's system tags (`GET /v1/tags`, the MCP `list_tags` tool)."""

    tags: list[str] = Field(
        description="Names of the system tags the caller can see on indexed documents the "
        "caller can read, sorted, spelt as Nextcloud spells them; each one is a value for "
        "`search`'s `tags` (or a `tags` filter)."
    )
    total: int = Field(description="How many tags there are in all, on every page.")
    next_offset: int | None = Field(
        description="The `offset` of the next page; null when this page is the last."
    )


def facet_page(name: str, values: Sequence[Any], offset: int, limit: int) -> dict[str, Any]:
    """``{name: values[offset:offset + limit], "total": len(values), "next_offset": n | None}``
    (``next_offset`` is ``offset + limit`` while values remain past it), the body of a
    :class:`FoldersPage` (``name`` ``"folders"``), :class:`TagsPage` (``"tags"``) or, with
    ``"field"`` added, :class:`ValuesPage` (``"values"``).
    ``offset`` and ``limit`` are taken as given: the caller has held them to 0–
    :data:`MAX_OFFSET` and 1–:data:`MAX_PAGE`."""
    end = offset + limit
    return {
        name: list(values[offset:end]),
        "total": len(values),
        "next_offset": end if end < len(values) else None,
    }
