"""The share poll: what was shared with an account, or unshared, is acted on within
``share_poll_seconds`` instead of at the next file scan.

Nextcloud sends no webhook for a share. webhook_listeners registers only event classes that
implement ``IWebhookCompatibleEvent`` (nextcloud/server
``apps/webhook_listeners/lib/Db/WebhookListenerMapper.php`` ``addWebhookListener``: "… is not
an event class compatible with webhooks"), and none of ``lib/public/Share/Events/``
(``ShareCreatedEvent``, ``ShareUpdatedEvent``, ``ShareDeletedEvent``,
``BeforeShareDeletedEvent``, ``ShareAcceptedEvent``, ``UserAddedToShareEvent`` …) nor
``lib/public/Group/Events/UserAddedEvent.php`` (a user joining a group that a folder is shared
with) does. Deck's board sharing does (nextcloud/deck ``lib/Event/AAclEvent.php``, Deck ≥
1.18) and is subscribed (:mod:`ncindex.sources.deck_card`).

So each configured account's shares are listed — one ``GET`` of the OCS sharing API with
``shared_with_me=true`` (:meth:`ncindex.nextcloud.client.NextcloudClient.shares_with_me`;
the user, group, team, Talk room, Deck and ScienceMesh shares whose recipient the account is,
a group's included, so a user added to that group sees it too; those pending acceptance are
not mounted, so Nextcloud finds no node for them in the account's view and leaves them out;
a federated share received is not in it — files_sharing lists those apart, ``remote_shares``
— and is the file scans'; every walk and re-read is made as the account, over WebDAV) — and
compared with what the last poll saw (Redis,
:meth:`ncindex.names.Names.shares_seen`, share id → ``(file id, path, folder?, attributes)``,
and the paths it was moved from since):

* a share new or changed (a new mount, one renamed or moved by its recipient whose move
  event the index has not had, one made view-only or downloadable again — its
  ``attributes``): a folder's subtree is walked as the account (``ncindex.index_folder``,
  :mod:`ncindex.sync.subtree`: what the index lacks at its version and path is indexed,
  which adds the account to the ``acl`` of what others hold); a file is re-read by id
  (``ncindex.index_node``);
* a share gone or changed: every document the index has for the account at or below the
  share's path then — and at or below each path its recipient moved it from since, which
  the move's task notes before it re-paths the documents (:func:`note_move`) — is re-read
  by id as the account (``ncindex.index_node``: Nextcloud's 404, or a node listed that the
  account may not read — a view-only share's —, takes the account's access away,
  :meth:`ncindex.index.access.Access.remove`; one still seen another way — another share,
  a group's — keeps it), and a file share's own file too.

Removals are found by the same poll as additions, so they are never slower; until their
re-checks have run, search's verify-on-read already drops what the account can no longer
read. The first poll of an account (nothing seen yet, or Redis emptied) only notes what it
sees: what was shared before is the scans' (:mod:`ncindex.sync.reconcile`), as is whatever a
poll misses. The state is written only once the poll's tasks were sent: a poll that fails
leaves it, and the next one finds the same differences. One poll of an account runs at a
time (:func:`poll_user`'s lock), so a state is never overwritten by an older listing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis
import structlog

from ncindex.documents import DocRef
from ncindex.errors import LockBusy, NextcloudProtocolError
from ncindex.index.indexing import Indexer
from ncindex.index.locks import hold
from ncindex.ingest.events import Action, index_folder, index_node
from ncindex.names import Names

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class SeenShare:
    """One share made with an account as ``formatShare`` gives it: ``file_id`` (its
    ``item_source``), ``path`` (the shared node in the account's view), ``folder``
    (``item_type`` is ``folder``) and ``attributes`` (its ``attributes``, the JSON string of
    ``IAttributes::toArray``, ``None`` for none: nextcloud/server ``ShareAPIController::
    formatShare``). The attributes say whether the share is view-only (``permissions``/
    ``download`` false: WebDAV refuses the bytes, ``apps/dav/lib/DAV/ViewOnlyPlugin.php``
    ``checkViewOnly``, and the index holds its text for no one who reads it only so,
    :attr:`ncindex.nextcloud.webdav.DavEntry.readable`); changing them (``updateShare``)
    fires no event and changes no etag, so only the poll sees it."""

    file_id: int
    path: str
    folder: bool
    attributes: str | None = None
    moved_from: tuple[str, ...] = field(default=(), compare=False)
    """The paths the share was mounted at in the account's view since the poll that kept it,
    before its recipient moved it (:func:`note_move`); not compared: the listing has none."""


def seen_shares(listed: list[dict[str, Any]]) -> dict[str, SeenShare]:
    """Share id → :class:`SeenShare` of ``listed`` (the shares API's ``data``). Raises
    ``NextcloudProtocolError`` for a share without a usable ``id``, ``item_source``,
    ``path`` or ``item_type``, or with ``attributes`` neither a string nor null."""
    out = {}
    for share in listed:
        file_id, path = share.get("item_source"), share.get("path")
        if (
            not isinstance(share.get("id"), str | int)
            or not isinstance(file_id, int)
            or isinstance(file_id, bool)
            or not isinstance(path, str)
            or not path.startswith("/")
            or share.get("item_type") not in ("file", "folder")
            or not isinstance(share.get("attributes"), str | None)
        ):
            raise NextcloudProtocolError(f"share not understood: {share!r}")
        folder = share["item_type"] == "folder"
        out[str(share["id"])] = SeenShare(file_id, path, folder, share.get("attributes"))
    return out


def _load(raw: bytes | str | None) -> dict[str, SeenShare] | None:
    """The stored state (``None``: none stored). A share kept before its attributes were
    (three fields) has none: a view-only one is taken for changed once. A fifth field, when
    there is one, lists its :attr:`SeenShare.moved_from`."""
    if raw is None:
        return None
    out = {}
    for share_id, (file_id, path, folder, *rest) in json.loads(raw).items():
        attributes = rest[0] if rest else None
        moved_from = tuple(rest[1]) if len(rest) > 1 else ()
        out[share_id] = SeenShare(file_id, path, folder, attributes, moved_from)
    return out


def _dump(shares: dict[str, SeenShare]) -> str:
    out = {}
    for k, s in sorted(shares.items()):
        row: list[object] = [s.file_id, s.path, s.folder, s.attributes]
        if s.moved_from:
            row.append(list(s.moved_from))
        out[k] = row
    return json.dumps(out)


def share_actions(
    indexer: Indexer, user: str, before: dict[str, SeenShare], now: dict[str, SeenShare]
) -> list[Action]:
    """The tasks that bring ``user``'s index in line with the shares ``now`` after
    ``before`` (see the module's docstring); no duplicates, gains first."""
    actions: list[Action] = []
    for share_id, share in sorted(now.items()):
        if before.get(share_id) != share and share.folder:
            actions.append(index_folder(user, [share.path]))
        elif before.get(share_id) != share:
            actions.append(index_node(user, share.file_id))
    lost: set[int] = set()
    for share_id, share in sorted(before.items()):
        if now.get(share_id) == share:
            continue
        if not share.folder:
            lost.add(share.file_id)
        for path in (share.path, *share.moved_from):
            for payload in indexer.access.under(user, path):
                lost.add(int(DocRef.parse(payload["doc_key"]).doc_id))
    actions += [index_node(user, file_id) for file_id in sorted(lost)]
    return list({a.debounce_key or id(a): a for a in actions}.values())


#: How long a move's task waits for a poll of the same account to finish before it retries
#: (seconds): a poll holds its lock for one listing (at most ``http_timeout``), one scroll of
#: the store per share gone and one send.
MOVE_WAIT_SECONDS = 10.0


def _moved(seen: dict[str, SeenShare], source: str, target: str) -> dict[str, SeenShare]:
    """The shares of ``seen`` mounted at or below ``source``, at their paths once ``source``
    is moved to ``target``, each with its path before added to its ``moved_from``."""
    out = {}
    for share_id, share in seen.items():
        if share.path == source or share.path.startswith(source + "/"):
            path = target + share.path[len(source) :]
            out[share_id] = replace(share, path=path, moved_from=(*share.moved_from, share.path))
    return out


def note_move(indexer: Indexer, user: str, source: str, target: str) -> None:
    """``user`` moved ``source`` to ``target`` in their view (``NodeRenamedEvent``, before
    its documents are re-pathed): each share kept for ``user`` mounted at or below it is kept
    at its new path, and the path before is added to its :attr:`SeenShare.moved_from`, so
    that a share moved and then removed before the next poll is re-checked wherever the
    index holds its documents — at its path the last poll saw, where they were, or at the
    new one, where the move's task puts them. Without it the re-check looked at the old path
    only, and the account kept what the move's task had re-pathed.

    A recipient moves a share's mount like any node (nextcloud/server
    ``lib/private/Files/View.php`` ``rename``: a ``MoveableMount`` at the source's root is
    moved: ``apps/files_sharing/lib/SharedMount.php`` ``moveMount``, ``updateFileTarget``,
    ``lib/private/Share20/Manager.php`` ``moveShare`` keep the new target; the
    ``post_rename`` hook is emitted as for any rename); renaming a folder above it moves the
    mount too (``apps/files_sharing/lib/Updater.php`` ``renameChildren``). The shares API
    then lists it at the new ``path`` (``ShareAPIController::formatShare``: the node in the
    recipient's folder). Nothing is stored when no share kept for ``user`` is moved (the
    state is read once). Raises ``LockBusy`` (retryable) when a poll of ``user`` held its
    lock for :data:`MOVE_WAIT_SECONDS`, and ``redis.RedisError``."""
    services = indexer.services
    names = services.settings.names
    key = names.shares_seen(user)
    if not _moved(_load(services.redis.get(key)) or {}, source, target):
        return
    lock = names.lock("poll-shares", user)
    with hold(services.redis, lock, ttl=POLL_LOCK_SECONDS, wait=MOVE_WAIT_SECONDS) as held:
        if not held:
            raise LockBusy(f"a share poll of {user} holds its state")
        seen = _load(services.redis.get(key)) or {}
        moved = _moved(seen, source, target)
        if moved:
            services.redis.set(key, _dump(seen | moved))
            log.info("shares_moved", user=user, shares=len(moved), source=source, target=target)


#: Expiry of an account's poll lock (seconds): far longer than one poll of it (one request of
#: at most ``http_timeout``, a scroll of the store, one send); released at the poll's end, it
#: expires only after a worker died holding it.
POLL_LOCK_SECONDS = 300


#: How often a deployment whose sharing API answers 404 says so, seconds: the poll runs every
#: ``share_poll_seconds`` (120 by default) for each account, and a warning per account on
#: each was noise that hid the rest of the log.
SHARING_OFF_WARN_SECONDS = 3600


def sharing_off_warning_due(client: redis.Redis, keys: Names) -> bool:
    """Whether a poll that found the sharing API off (404: the files_sharing app disabled,
    or ``shareapi_enabled`` no) should warn: ``True`` once per
    :data:`SHARING_OFF_WARN_SECONDS` per deployment, and again as soon as a poll succeeded in
    between (:func:`sharing_answered`). Raises ``redis.RedisError``."""
    key = keys.key("share-poll", "sharing-off")
    return bool(client.set(key, "1", nx=True, ex=SHARING_OFF_WARN_SECONDS))


def sharing_answered(client: redis.Redis, keys: Names) -> None:
    """A listing of shares succeeded: the next one that finds the sharing API off warns at
    once. Raises ``redis.RedisError``."""
    client.delete(keys.key("share-poll", "sharing-off"))


def poll_user(indexer: Indexer, user: str, send: Callable[[list[Action]], object]) -> int:
    """Poll ``user``'s shares: list them (one request), ``send`` (a callable taking the
    list of actions) the tasks :func:`share_actions` gives, then keep what was seen.
    Returns how many actions were sent (0 at a first poll, which only keeps what it saw,
    and when another poll of ``user`` holds its lock: that one is left to finish).

    One poll of an account at a time (a Redis lock, :data:`POLL_LOCK_SECONDS`): two that
    overlapped (a beat tick while a slow poll ran past its task lock) could each read the
    state before the other wrote it, and the one that listed last write first — a share
    seen, indexed, then gone was then stored as never seen, and its re-check never sent.

    Raises what the Nextcloud client raises (``NotFound``: the sharing API is off,
    ``NextcloudAuthError``, ``TransientError`` …) and ``redis.RedisError``; the state is
    then left as it was."""
    services = indexer.services
    names = services.settings.names
    with hold(
        services.redis, names.lock("poll-shares", user), ttl=POLL_LOCK_SECONDS, wait=0
    ) as held:
        if not held:
            log.info("share_poll_busy", user=user)
            return 0
        key = names.shares_seen(user)
        now = seen_shares(services.account(user).shares_with_me())
        before = _load(services.redis.get(key))
        actions = [] if before is None else share_actions(indexer, user, before, now)
        if actions:
            send(actions)
            log.info("shares_changed", user=user, actions=len(actions), shares=len(now))
        services.redis.set(key, _dump(now))
        sharing_answered(services.redis, names)
        return len(actions)
