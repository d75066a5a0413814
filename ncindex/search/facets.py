"""What the search page offers as filters: the caller's folders and tags (``GET /v1/folders``,
``GET /v1/tags``).

Both are read from the index, restricted to the documents whose ``acl`` names the caller, so
a caller never learns another user's folder or tag: folders come from the caller's own
``folder_ancestors`` keys (``"{caller}:{folder}"``, the caller's view, a shared folder under
the name it has in the caller's files), tags from the documents the caller can read. Both are
the engine's facets of one point per document (``chunk_index`` 0), so a listing costs the
engine a pass over the caller's documents, not a read of their payloads into Python. Like
search candidates before verify-on-read, they reflect the index, which may trail Nextcloud by
the sync delay — except that the folders are held to the caller's files root as it is now
(:func:`visible_folders`: one request), so a folder share revoked since the caller's last
scan, which fires no event, leaves the listing at once. The tags are not checked (a tag found
only on such a share's documents stays listed until the scan: checking would cost a
``REPORT`` per tag).
"""

from __future__ import annotations

import structlog
from qdrant_client import models

from ncindex.documents import principal
from ncindex.errors import (
    Forbidden,
    NextcloudAuthError,
    NextcloudProtocolError,
    NotFound,
    TransientError,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.store.port import VectorStore

log = structlog.get_logger(__name__)


def _caller_documents(user: str) -> models.Filter:
    return models.Filter(
        must=[
            models.FieldCondition(key="acl", match=models.MatchValue(value=principal(user))),
            models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0)),
        ]
    )


def caller_folders(store: VectorStore, user: str) -> list[str]:
    """Every folder holding an indexed document ``user`` can read, in ``user``'s view
    (``"/Documents/Oncology"``; the root ``"/"`` left out), sorted: the ``folder_ancestors``
    values of those documents (a facet, counted in the engine) that are ``user``'s keys.
    Raises ``StoreUnavailable``."""
    prefix = f"{user}:"
    keys = store.facet_values("folder_ancestors", _caller_documents(user))
    return sorted(k[len(prefix) :] for k in keys if k.startswith(prefix) and k != prefix + "/")


ROOT_LISTING_SECONDS = 2.0
"""How long :func:`visible_folders` waits for the root's listing, seconds: the folder list
read only the index before it asked Nextcloud, and a slow Nextcloud should not hold the page's
pickers for the whole ``NCINDEX_HTTP_TIMEOUT``."""


def visible_folders(client: NextcloudClient, folders: list[str]) -> list[str]:
    """``folders`` (the caller's, :func:`caller_folders`) less those under a top-level folder
    that the caller's files root no longer holds, by one ``PROPFIND Depth: 1`` of the root as
    ``client.user``. A share is mounted at the top of the sharee's files by default
    (nextcloud/server ``config/config.sample.php`` ``share_folder``, ``'/'``), and revoking
    it fires no webhook, so its folder would stay listed until the sharee's scan; a folder
    deleted or moved away whose event is still on its way leaves as well. A share mounted
    deeper (``share_folder`` set, or its folder moved into another) is not seen (its parent is
    still there) and waits for the scan. When the root cannot be listed (Nextcloud
    unavailable or slower than :data:`ROOT_LISTING_SECONDS`, an answer of the wrong shape,
    the credential refused, the listing refused: 403, an admin's access-control rule)
    ``folders`` is returned unchanged: the listing is a hint, and every search result is
    verified. Whether the caller is signed in is the caller resolution's to say (a credential
    revoked since it was resolved ends the session at the next search, which says so), not
    this hint's."""
    if not folders:
        return folders
    try:
        listing = client.propfind("/", 1, timeout=ROOT_LISTING_SECONDS)
        top = {e.path for e in listing[1:] if e.is_folder}
    except (TransientError, NextcloudProtocolError, NextcloudAuthError, NotFound, Forbidden) as exc:
        log.warning("root_not_listed", user=client.user, error=str(exc))
        return folders
    return [f for f in folders if "/" + f.split("/")[1] in top]


def caller_tags(store: VectorStore, user: str) -> list[str]:
    """Every system tag on an indexed document ``user`` can read, sorted. Raises
    ``StoreUnavailable``."""
    return sorted(store.facet_values("tags", _caller_documents(user)))
