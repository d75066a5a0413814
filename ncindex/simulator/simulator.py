"""The Nextcloud simulator: state, Python helpers for tests, and the WSGI entry point.

One :class:`NextcloudSimulator` holds everything (users, files, shares, trash, notes metadata,
webhook registrations, Deck, News) behind one re-entrant lock, and is itself a WSGI app that
answers in Nextcloud's real formats. Serve it over HTTP with
:func:`ncindex.simulator.server.serve_simulator`.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from ncindex.simulator.deck import DeckState
from ncindex.simulator.events import build_envelope, compatible_events, version_tuple
from ncindex.simulator.faults import FaultInjector
from ncindex.simulator.news import NewsState
from ncindex.simulator.state import FileTree, Node, NotFoundError, norm_path
from ncindex.simulator.systemtags import SystemTagStore
from ncindex.simulator.versions import restore_version, revisions
from ncindex.simulator.webhooks import Delivery, DeliveryEngine, WebhookRegistry

__all__ = ["DECK_RELEASES", "NextcloudSimulator", "default_apps", "user_agent"]

#: The Deck release of each Nextcloud major (nextcloud/deck ``stableNN`` branches,
#: ``appinfo/info.xml`` ``<version>`` and ``<nextcloud min-version max-version>``).
DECK_RELEASES = {30: "1.14.10", 31: "1.15.9", 32: "1.16.7", 33: "1.17.4", 34: "1.18.3"}
#: The Notes release for each major: 5.0.2 supports 30–32, 6.0.2 supports 33–35
#: (nextcloud/notes tags, ``appinfo/info.xml``).
NOTES_RELEASES = {30: "5.0.2", 31: "5.0.2", 32: "5.0.2", 33: "6.0.2", 34: "6.0.2"}
#: News 28.x supports 32–34 (nextcloud/news tags); older majors get an older News with the
#: same v1-3 API (a version number chosen for the simulator, not read from a release).
NEWS_RELEASES = {30: "27.0.0", 31: "27.0.0", 32: "28.7.0", 33: "28.7.0", 34: "28.7.0"}


def default_apps(version: str) -> dict[str, str]:
    """The apps enabled by default in the simulator of Nextcloud ``version``, with versions:
    files_sharing, files_trashbin, files_versions, user_status and webhook_listeners (shipped
    with the server; the simulator gives them the server's version), Notes, Deck and News."""
    major = max(30, min(34, version_tuple(version)[0]))
    return {
        "files_sharing": version,
        "files_trashbin": version,
        "files_versions": version,
        "user_status": version,
        "webhook_listeners": version,
        "notes": NOTES_RELEASES[major],
        "deck": DECK_RELEASES[major],
        "news": NEWS_RELEASES[major],
    }


def user_agent(version: str) -> str:
    """The User-Agent of Nextcloud's outgoing requests (``lib/private/Http/Client/Client.php``
    ``buildRequestOptions``): ``Nextcloud Server Crawler`` up to 32, and from 33
    ``Nextcloud-Server-Crawler/X.Y.Z`` (nextcloud/documentation
    ``developer_manual/release_notes/previous/upgrade_to_33.rst``)."""
    if version_tuple(version)[:1] >= (33,):
        return f"Nextcloud-Server-Crawler/{version}"
    return "Nextcloud Server Crawler"


class NextcloudSimulator:
    """An in-memory Nextcloud with webhooks, served as a WSGI app.

    ``delivery_delay`` is a ``(min, max)`` range in seconds for webhook deliveries; ``drop_rate``
    (0–1) silently drops that share of deliveries; ``reorder`` shuffles deliveries due together;
    ``seed`` makes ids, etags, delays and drops reproducible. ``version`` is the Nextcloud
    version served (30–34; it decides which event classes exist, :func:`compatible_events`,
    the webhook User-Agent and ``tokenNeeded``); ``apps`` maps the enabled apps to their
    versions (default: :func:`default_apps` of that version — the Deck, Notes and News
    releases that support it); ``deck_webhooks`` makes Deck 1.18 (card events are
    webhook-compatible from it). ``web_root`` serves the simulator under a sub-path such as
    ``/nextcloud`` (every route and href starts with it). ``clock`` returns Unix seconds.
    ``allow_local_remote_servers`` mirrors the ``config.php`` switch (default on, so webhooks to
    127.0.0.1 work in tests); ``allow_resharing`` the ``shareapi_allow_resharing`` setting.

    Events are delivered only for the classes webhook_listeners listens to in the request they
    happen in (:meth:`~ncindex.simulator.webhooks.WebhookRegistry.listened`, cached per user
    for five minutes): a change made through the simulator's HTTP API (Basic auth) is in a
    request booted without a user, one made by calling the simulator directly stands for the
    web interface, booted as the acting user (``sim.registry.listener_cache_seconds = 0``
    turns the cache off).
    """

    def __init__(
        self,
        delivery_delay: tuple[float, float] = (0.0, 0.0),
        drop_rate: float = 0.0,
        reorder: bool = False,
        seed: int = 0,
        *,
        deck_webhooks: bool = False,
        clock: Callable[[], float] = time.time,
        version: str = "33.0.2",
        allow_local_remote_servers: bool = True,
        delivery_timeout: float = 30.0,
        delivery_workers: int = 4,
        instance_id: str = "ocsim0a1b2c3",
        apps: dict[str, str] | None = None,
        web_root: str = "",
        allow_resharing: bool = True,
    ) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.version = version
        self.instance_id = instance_id
        self.apps: dict[str, str] = dict(apps) if apps is not None else default_apps(version)
        if deck_webhooks:
            self.deck_webhooks = True
        self.web_root = "/" + web_root.strip("/") if web_root.strip("/") else ""
        self.allow_resharing = allow_resharing
        #: ``shareapi_enabled``: the sharing API and its capability (on by default).
        self.sharing_enabled = True
        #: ``occ maintenance:mode``: reported by ``/status.php``; every other route answers
        #: 503 with ``X-Nextcloud-Maintenance-Mode: 1`` and ``Retry-After`` (seconds: 120 in
        #: Nextcloud, ``OC::checkMaintenanceMode``; tests shorten it)
        self.maintenance = False
        self.maintenance_retry_after = 120
        self.tree = FileTree(self._dispatch, clock=clock, seed=seed)
        # files_trashbin's restore events name the restored node from 31 on (#53752,
        # backported to stable31; Nextcloud 30 has the old Trashbin::getNodeForPath)
        self.tree.restored_node_has_id = version_tuple(version)[:1] >= (31,)
        #: classes this server refuses although its version has them (a fault for tests:
        #: a build or configuration without them)
        self.refused_event_classes: set[str] = set()
        self.registry = WebhookRegistry(
            lambda: compatible_events(self.version, self.apps) - self.refused_event_classes,
            seed=seed,
            token_needed=version_tuple(version)[:1] >= (33,),
        )
        self.engine = DeliveryEngine(
            self.registry,
            delay=delivery_delay,
            drop_rate=drop_rate,
            reorder=reorder,
            seed=seed,
            timeout=delivery_timeout,
            workers=delivery_workers,
            user_agent=user_agent(version),
            allow_local=allow_local_remote_servers,
        )
        self.faults = FaultInjector()
        self.tags = SystemTagStore(self)
        self.deck = DeckState(self)
        self.news = NewsState(self)
        self.events: list[dict[str, Any]] = []
        self._requests: Counter[tuple[str, str]] = Counter()
        self.request_log: deque[tuple[str, str, int]] = deque(maxlen=20000)
        # per-app state, filled by the API modules
        self.notes_settings: dict[str, dict[str, str]] = {}
        self.notes_meta: dict[str, dict[int, dict[str, Any]]] = {}
        self.app_state: dict[str, Any] = {}
        self._app: Callable[..., Iterable[bytes]] | None = None
        self._serving = threading.local()

    # ------------------------------------------------------------------ apps

    @property
    def deck_webhooks(self) -> bool:
        """True when the enabled Deck is 1.18 or later (card events are webhook-compatible);
        setting it installs Deck 1.18.3 (True) or the release of this server (False)."""
        deck = self.apps.get("deck")
        return deck is not None and version_tuple(deck)[:2] >= (1, 18)

    @deck_webhooks.setter
    def deck_webhooks(self, value: bool) -> None:
        default = default_apps(self.version).get("deck", DECK_RELEASES[33])
        self.apps["deck"] = "1.18.3" if value else default

    #: The :attr:`~ncindex.simulator.state.Share.kind`\ s each app mounts: files_sharing
    #: registers the mount providers of user shares (``MountProvider``) and of federated
    #: shares received (``External\MountProvider``) — nextcloud/server
    #: ``apps/files_sharing/lib/AppInfo/Application.php`` ``registerMountProviders``.
    APP_SHARE_KINDS: ClassVar[dict[str, frozenset[str]]] = {
        "files_sharing": frozenset({"user", "federated"})
    }

    def app_enabled(self, app_id: str) -> bool:
        """True when ``app_id`` is installed and enabled."""
        return app_id in self.apps

    def disable_app(self, app_id: str) -> None:
        """Disable an app (``occ app:disable``): its routes are no longer registered (each
        entry point's answer to an unknown route:
        :meth:`~ncindex.simulator.app.SimulatorApp.unregistered`), its capability and its
        event classes disappear, and the shares it mounts (:data:`APP_SHARE_KINDS`) are
        mounted for no recipient — gone from their WebDAV listings and searches, the etags
        of the folders above them changed (:meth:`~ncindex.simulator.state.FileTree.
        set_mounted`) — until it is enabled again. What else the app does to the file tree
        (the trash bin, versions) is not taken away."""
        with self.lock:
            self.apps.pop(app_id, None)
            self.tree.set_mounted(self.APP_SHARE_KINDS.get(app_id, frozenset()), False)

    def enable_app(self, app_id: str, version: str | None = None) -> None:
        """Enable ``app_id`` at ``version`` (default: the release for this server); the shares
        it mounts are mounted again."""
        with self.lock:
            self.apps[app_id] = version or default_apps(self.version).get(app_id, "1.0.0")
            self.tree.set_mounted(self.APP_SHARE_KINDS.get(app_id, frozenset()), True)

    # ------------------------------------------------------------------ events

    @contextmanager
    def basic_auth_request(self) -> Iterator[None]:
        """Mark this thread as serving an HTTP request authenticated by Basic auth: the apps
        (webhook_listeners among them) boot before such a request logs in — nextcloud/server
        ``remote.php`` loads the ``filesystem`` apps before Sabre authenticates, ``ocs/v1.php``
        loads every app before ``OC::handleLogin``, ``lib/base.php`` ``handleRequest`` loads
        the ``filesystem`` apps of a guest before ``handleLogin`` — so the classes listened to
        are those cached for no user."""
        self._serving.basic = True
        try:
            yield
        finally:
            self._serving.basic = False

    def _dispatch(self, event_class: str, payload: dict[str, Any], actor: str | None) -> None:
        """Build the envelope snapshot of one event and queue it for matching registrations,
        when webhook_listeners listens to its class in this request
        (:meth:`~ncindex.simulator.webhooks.WebhookRegistry.listened`; nextcloud/server
        ``apps/webhook_listeners/lib/AppInfo/Application.php`` ``registerRuleListeners``).
        A filter PHPMongoQuery throws on raises :class:`~ncindex.simulator.eventfilter.
        FilterError`, an envelope too long for a background job's argument
        :class:`~ncindex.simulator.webhooks.JobArgumentError`, out of the change that
        dispatched the event, as nothing in Nextcloud catches them
        (``OC\\EventDispatcher\\ServiceEventListener::__invoke``)."""
        if event_class not in compatible_events(self.version, self.apps):
            return  # that class does not exist on this server (or its app is disabled)
        user = None
        if actor is not None and actor in self.tree.users:
            user = {"uid": actor, "displayName": self.tree.users[actor].display_name}
        envelope = build_envelope(event_class, copy.deepcopy(payload), user, self.tree.now())
        self.events.append(envelope)
        booted_as = None if getattr(self._serving, "basic", False) else actor
        if event_class not in self.registry.listened(booted_as, self.clock()):
            return
        for reg in self.registry.matching(envelope):
            self.engine.enqueue(reg.id, copy.deepcopy(envelope))

    def dispatch_event(self, event_class: str, payload: dict[str, Any], actor: str | None) -> None:
        """Dispatch a non-file event (tags, Deck); ``actor`` uid or None (no session)."""
        with self.lock:
            self._dispatch(event_class, payload, actor)

    # ------------------------------------------------------------------ users

    def add_user(
        self,
        uid: str,
        password: str,
        display_name: str | None = None,
        admin: bool = False,
        email: str | None = None,
        *,
        login_name: str | None = None,
    ) -> None:
        """Create a user whose app password is ``password`` (Basic auth everywhere).

        ``login_name`` is the name the user signs in with when it is not the uid (an LDAP or
        e-mail login): the app password then only works with that name."""
        with self.lock:
            self.tree.add_user(uid, password, display_name, admin, email, login_name)

    def delegate_setting(self, uid: str, setting_class: str) -> None:
        """Make ``uid`` a delegated admin of the admin setting ``setting_class`` (Administration
        privileges: a group of the user is authorized for it), e.g.
        ``OCA\\WebhookListeners\\Settings\\Admin`` for webhook_listeners' API: nextcloud/server
        ``lib/private/AppFramework/Middleware/Security/SecurityMiddleware.php``
        ``beforeController`` lets a method marked ``#[AuthorizedAdminSetting(settings: …)]`` be
        called by an admin or by a user ``findAllClassesForUser`` authorizes for one of its
        settings."""
        with self.lock:
            self.tree.user(uid).delegated.add(setting_class)

    def disable_user(self, uid: str, *, enabled: bool = False) -> None:
        """``occ user:disable`` (``enabled=True``: ``occ user:enable``): the account keeps its
        files, shares and app passwords, but every login with them is refused
        (nextcloud/server ``lib/private/User/Session.php`` ``completeLogin`` throws
        ``LoginException`` for a user not enabled; each entry point answers that in its own
        way: :meth:`~ncindex.simulator.app.SimulatorApp.login_refused`). Raises
        ``NotFoundError`` for an unknown ``uid``."""
        with self.lock:
            self.tree.user(uid).enabled = enabled

    def delete_user(self, uid: str) -> None:
        """``occ user:delete``: the user, their files, trash, shares and app passwords are gone
        without any file event
        (:meth:`ncindex.simulator.state.FileTree.delete_user`); their logins are then refused
        (401) and ``GET /ocs/v2.php/cloud/users/{uid}`` answers an admin OCS 404 "User does
        not exist" (nextcloud/server ``AUserDataOCSController::getUserData``). Nothing is
        sent to webhook listeners: ``OCP\\User\\Events\\UserDeletedEvent`` does not
        implement ``IWebhookCompatibleEvent``, so webhook_listeners refuses to register it.
        Deck deletes the boards they own and their ACL entries on the others
        (:meth:`ncindex.simulator.deck.DeckState.user_deleted`). Raises ``NotFoundError`` for
        an unknown ``uid``."""
        with self.lock:
            self.tree.delete_user(uid)
            self.deck.user_deleted(uid)

    def add_app_password(self, uid: str, password: str, *, login_name: str | None = None) -> None:
        """Give an existing user one more app password, created under ``login_name`` (default:
        the user's login name)."""
        with self.lock:
            user = self.tree.user(uid)
            user.passwords.add(password)
            user.token_logins[password] = login_name or user.login_name

    def expire_app_password(self, uid: str, password: str) -> None:
        """The login password stored with app password ``password`` of ``uid`` no longer
        checks (changed outside Nextcloud: LDAP): nextcloud/server
        ``lib/private/User/Session.php`` ``checkTokenCredentials`` →
        ``PublicKeyTokenProvider::markPasswordInvalid``. The app password stays, but every
        login with it is refused (``PublicKeyTokenProvider::checkToken`` throws
        ``TokenPasswordExpiredException``, an ``ExpiredTokenException``, which
        ``Session::logClientIn`` answers ``false`` without counting a failed login: a plain
        401, OCS 997, as a revoked one's) until a Login Flow of the user revives it
        (:meth:`revive_app_passwords`)."""
        with self.lock:
            self.tree.user(uid).expired.add(password)

    def revive_app_passwords(self, uid: str) -> None:
        """A login of ``uid`` with their password stores it in every app password of theirs
        again: nextcloud/server ``core/Service/LoginFlowV2Service.php`` ``flowDone`` →
        ``PublicKeyTokenProvider::generateToken`` → ``updatePasswords``, which
        ``setPasswordInvalid(false)`` each token whose hash does not verify the password."""
        with self.lock:
            self.tree.user(uid).expired.clear()

    def login(self, login_name: str, password: str) -> str | None:
        """The uid a Basic ``login_name:password`` authenticates, or None.

        An app password is accepted only with the login name it was created under, compared
        case-insensitively (nextcloud/server ``lib/private/User/Session.php``,
        ``validateTokenLoginName``: ``mb_strtolower($token->getLoginName()) !==
        mb_strtolower($loginName)`` ⇒ refused; an e-mail login is such a login name)."""
        with self.lock:
            for user in self.tree.users.values():
                token_login = user.token_logins.get(password)
                if password in user.expired:
                    continue  # TokenPasswordExpiredException: refused (expire_app_password)
                if token_login is not None and token_login.lower() == login_name.lower():
                    return user.uid
            return None

    def token_user(self, token: str) -> str | None:
        """The uid whose app password ``token`` is, or None: ``Authorization: Bearer <token>``
        (nextcloud/server ``lib/private/User/Session.php`` ``tryTokenLogin`` →
        ``loginWithToken``: the token alone, no login name to match)."""
        with self.lock:
            for user in self.tree.users.values():
                if token in user.token_logins and token not in user.expired:
                    return user.uid
            return None

    def check_password(self, uid: str, password: str) -> bool:
        """True when ``password`` is an app password of ``uid`` (whatever its login name)."""
        with self.lock:
            user = self.tree.users.get(uid)
            return user is not None and password in user.passwords

    # ------------------------------------------------------------------ files

    def put_file(
        self,
        user: str,
        path: str,
        data: bytes | str,
        mtime: int | None = None,
        *,
        session: bool = True,
    ) -> int:
        """Create or overwrite a file (parents created); returns the file id.

        ``mtime`` Unix seconds (default now). New file ⇒ NodeCreated + NodeWritten (plus the
        Before* events); overwrite ⇒ NodeWritten. ``session=False`` sends ``"user": null`` like
        a cron/scan change.
        """
        raw = data.encode() if isinstance(data, str) else bytes(data)
        with self.lock:
            node, _ = self.tree.put_file(user, path, raw, mtime=mtime, session=session)
            return node.id

    def mkdir(self, user: str, path: str, *, session: bool = True) -> int:
        """Create a folder and missing parents (NodeCreated each); returns the folder id."""
        with self.lock:
            node, _ = self.tree.mkdir(user, path, parents=True, session=session)
            return node.id

    def delete(self, user: str, path: str, *, session: bool = True) -> None:
        """Delete a file or folder to the trash: BeforeNodeDeleted + NodeDeleted, once."""
        with self.lock:
            self.tree.delete(user, path, session=session)

    def move(self, user: str, src: str, dst: str, *, session: bool = True) -> int:
        """Rename/move a file or folder (ids kept, parents created); one NodeRenamed; id."""
        with self.lock:
            node, _ = self.tree.move(user, src, dst, session=session)
            return node.id

    def copy(self, user: str, src: str, dst: str, *, session: bool = True) -> int:
        """Copy a file or folder (new ids); one NodeCopied; returns the new id."""
        with self.lock:
            node, _ = self.tree.copy(user, src, dst, session=session)
            return node.id

    def touch(self, user: str, path: str, mtime: int, *, event: bool = False) -> None:
        """Set the mtime (Unix seconds) of a node as ``View::touch`` does it
        (:meth:`~ncindex.simulator.state.FileTree.touch`: a new etag unless the mtime is
        unchanged). ``event``: with BeforeNodeTouchedEvent + NodeTouchedEvent (a client setting
        a file's mtime, Notes saving ``modified``); without, silently (as a scan finds it)."""
        with self.lock:
            self.tree.touch(user, path, mtime, event=event)

    def versions(self, user: str, path: str) -> list[int]:
        """The revisions (Unix seconds) of the file at ``path`` in ``user``'s view, newest
        first, the current one included (:func:`~ncindex.simulator.versions.revisions`)."""
        with self.lock:
            node = self.tree.resolve(user, path)
            if node is None or node.is_dir:
                raise NotFoundError(f"File with name {norm_path(path)} could not be located")
            return revisions(node)

    def restore_version(self, user: str, path: str, revision: int) -> int:
        """Restore version ``revision`` of a file as ``user`` does in the versions tab
        (:func:`~ncindex.simulator.versions.restore_version`: NodeTouchedEvent only, and only
        for the owner); returns the file id."""
        with self.lock:
            return restore_version(self.tree, user, path, revision).id

    def share(
        self,
        owner: str,
        path: str,
        sharee: str,
        mount_path: str | None = None,
        *,
        readonly: bool = False,
        permissions: int | None = None,
        attributes: list[dict[str, Any]] | None = None,
    ) -> str:
        """Share a file or folder with ``sharee`` (same ids); no event. Returns the mount path.
        Sharing it again with the same user updates the share.

        ``permissions`` are ``OCP\\Constants::PERMISSION_*`` bits (default all; read + share
        when ``readonly``); ``attributes`` the share's attributes as
        ``IAttributes::toArray`` lists them (``[{"scope": "permissions", "key": "download",
        "value": False}]``: a view-only share, whose bytes WebDAV refuses to the sharee)."""
        with self.lock:
            share = self.tree.share(
                owner,
                path,
                sharee,
                mount_path,
                readonly=readonly,
                permissions=permissions,
                attributes=attributes,
            )
            return share.mount_path

    def group_folder(self, name: str, members: list[str]) -> None:
        """Create the group folder ``name`` or set its members: mounted at ``/{name}`` for
        each of them, the others lose it; no event
        (:meth:`~ncindex.simulator.state.FileTree.group_folder`)."""
        with self.lock:
            self.tree.group_folder(name, members)

    def external_storage(self, name: str, members: list[str]) -> None:
        """Create the external storage ``name`` or set who has it: mounted at ``/{name}``
        for each of ``members``; no event (:meth:`~ncindex.simulator.state.FileTree.
        external_storage`)."""
        with self.lock:
            self.tree.external_storage(name, members)

    def federated_share(self, name: str, sharee: str) -> None:
        """Mount a federated share ``name`` (a folder another server holds) at ``/{name}``
        for ``sharee``; no event (:meth:`~ncindex.simulator.state.FileTree.
        federated_share`)."""
        with self.lock:
            self.tree.federated_share(name, sharee)

    def remove_federated_share(self, name: str) -> None:
        """Unmount the federated share ``name``, as Nextcloud does once the remote server
        says the share is gone or refuses it; no event (:meth:`~ncindex.simulator.state.
        FileTree.remove_federated_share`)."""
        with self.lock:
            self.tree.remove_federated_share(name)

    def add_unnoticed(self, user: str, path: str, data: bytes | str) -> int:
        """Write a file straight to an external storage, not through Nextcloud: listed in
        its folder, no etag changes, no event
        (:meth:`~ncindex.simulator.state.FileTree.add_unnoticed`); returns its file id."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        with self.lock:
            return self.tree.add_unnoticed(user, path, raw).id

    def unshare(self, owner: str, path: str, sharee: str) -> bool:
        """Remove a share; no event. True when a share was removed."""
        with self.lock:
            return self.tree.unshare(owner, path, sharee)

    def block_access(self, user: str, path: str, blocked: bool = True) -> None:
        """Add (or, with ``blocked`` false, lift) an admin's files_accesscontrol rule that
        blocks the node at ``path`` in ``user``'s view, and all below it, for everyone: it is
        still listed, with ``oc:permissions`` lacking ``G`` (read) and the write letters; a GET
        answers 404 (Sabre ``File::get``), a ``PROPFIND Depth: 1`` of a blocked folder 403
        (``Directory::getChildren``), and the Notes app answers its notes with ``error: true``
        (``Note::getData``). No event fires, and etags do not change."""
        with self.lock:
            node = self.tree.resolve(user, path)
            if node is None:
                raise NotFoundError(f"File with name {norm_path(path)} could not be located")
            if blocked:
                self.tree.blocked.add(node.id)
            else:
                self.tree.blocked.discard(node.id)

    def make_storage_unavailable(
        self, user: str, path: str, unavailable: bool = True, *, failed: bool = False
    ) -> None:
        """Make the storage of the folder at ``path`` in ``user``'s view (and all below it)
        unavailable (or, with ``unavailable`` false, available again), as an external storage
        whose server is away: its folders are still listed in their parent from the file
        cache, and a ``PROPFIND`` of one answers 503 ``Sabre\\DAV\\Exception\\ServiceUnavailable``
        "Storage is temporarily not available" (nextcloud/server
        ``apps/dav/lib/Connector/Sabre/ObjectTree.php`` ``getNodeForPath``, for a
        ``StorageNotAvailableException`` or a ``FailedStorage``). A ``FailedStorage`` mount's
        own listing in its parent (``FailedCache::get``: file id -1, no etag, so the etags
        above change: ``FileInfo::addSubEntry`` adds no sub-mount etag) is not modelled. SEARCH
        still finds its files from the file cache (the ``Availability`` wrapper does not wrap
        ``getCache``); with ``failed``, as an external storage files_external has marked
        unavailable and mounts as a ``FailedStorage`` until its next recheck
        (``ConfigAdapter::getAvailableStorages``), it does not (``FailedCache::searchQuery``:
        ``[]``). No event fires, and etags do not change."""
        with self.lock:
            node = self.tree.resolve(user, path)
            if node is None or not node.is_dir:
                raise NotFoundError(f"File with name {norm_path(path)} could not be located")
            if unavailable:
                self.tree.unavailable.add(node.id)
                if failed:
                    self.tree.failed.add(node.id)
            else:
                self.tree.unavailable.discard(node.id)
                self.tree.failed.discard(node.id)

    def make_unopenable(self, user: str, path: str, status: int | None = 503) -> None:
        """Make the GET of the file at ``path`` in ``user``'s view answer ``status`` while it
        is still listed (``None`` lifts it), as nextcloud/server
        ``apps/dav/lib/Connector/Sabre/File.php`` ``get`` does: 423 ``FileLocked`` for a
        ``LockedException`` (a lock held by a write in progress, or one a crashed request
        left behind until its TTL), 503 ``ServiceUnavailable`` when ``fopen`` fails ("Could
        not open file", the file cache naming a file the storage lacks), the encryption is
        not ready or the storage is away. No event fires, and etags do not change."""
        with self.lock:
            node = self.tree.resolve(user, path)
            if node is None or node.is_dir:
                raise NotFoundError(f"File with name {norm_path(path)} could not be located")
            if status is None:
                self.tree.unopenable.pop(node.id, None)
            elif status in (423, 503):
                self.tree.unopenable[node.id] = status
            else:
                raise ValueError(f"File::get answers 423 or 503, not {status}")

    def file_id(self, user: str, path: str) -> int | None:
        """File id of the node at ``path`` in ``user``'s view, or None."""
        with self.lock:
            node = self.tree.resolve(user, path)
            return None if node is None else node.id

    def path_of(self, user: str, file_id: int) -> str | None:
        """Path of ``file_id`` in ``user``'s view (``/Notes/x.md``), or None if not visible."""
        with self.lock:
            node = self.tree.nodes.get(int(file_id))
            return None if node is None else self.tree.view_path(user, node)

    def read(self, user: str, path: str) -> bytes:
        """Content of a file in ``user``'s view; ``NotFoundError`` if missing or a folder."""
        with self.lock:
            node = self.tree.resolve(user, path)
            if node is None or node.is_dir:
                raise NotFoundError(f"File with name {norm_path(path)} could not be located")
            return node.content

    def node(self, user: str, path: str) -> Node | None:
        """The live node at ``path`` in ``user``'s view (for white-box tests), or None."""
        with self.lock:
            return self.tree.resolve(user, path)

    def visible_files(self, user: str) -> dict[int, str]:
        """Ground truth: file id → path of every file (not folder) ``user`` can see."""
        with self.lock:
            return self.tree.visible_files(user)

    def set_favorite(self, user: str, path: str, favorite: bool = True) -> None:
        """Mark a node as favorite of ``user`` (``oc:favorite``, note ``favorite``); no event."""
        with self.lock:
            node = self.tree.resolve(user, path)
            if node is None:
                raise NotFoundError(f"File with name {norm_path(path)} could not be located")
            if favorite:
                node.favorite_of.add(user)
            else:
                node.favorite_of.discard(user)

    # ------------------------------------------------------------------ system tags

    def create_tag(
        self,
        name: str,
        *,
        user_visible: bool = True,
        user_assignable: bool = True,
        color: str = "",
    ) -> int:
        """Create a collaborative tag; returns its id (``ValueError`` if it exists)."""
        with self.lock:
            return self.tags.create(
                name, user_visible=user_visible, user_assignable=user_assignable, color=color
            ).id

    def assign_tag(self, user: str, path: str, tag_id: int, *, session: bool = True) -> bool:
        """Tag the node at ``path`` (TagAssignedEvent); True when newly assigned."""
        with self.lock:
            node = self._node(user, path)
            return self.tags.assign(user, node, tag_id, session=session)

    def unassign_tag(self, user: str, path: str, tag_id: int, *, session: bool = True) -> bool:
        """Untag the node at ``path`` (TagUnassignedEvent); True when it was tagged."""
        with self.lock:
            node = self._node(user, path)
            return self.tags.unassign(user, node, tag_id, session=session)

    def tags_of(self, user: str, path: str) -> list[str]:
        """Names of the tags on ``path`` that ``user`` can see, natural-sorted."""
        with self.lock:
            return [t.name for t in self.tags.tags_of(user, self._node(user, path))]

    def _node(self, user: str, path: str) -> Node:
        node = self.tree.resolve(user, path)
        if node is None:
            raise NotFoundError(
                f"File with name {norm_path(path).lstrip('/')} could not be located"
            )
        return node

    # ------------------------------------------------------------------ Deck

    def deck_create_board(self, owner: str, title: str, color: str = "0082c9") -> int:
        """Create a Deck board owned by ``owner``; returns the board id."""
        with self.lock:
            return self.deck.create_board(owner, title, color).id

    def deck_create_stack(self, user: str, board_id: int, title: str, order: int = 0) -> int:
        """Create a stack on a board; returns the stack id."""
        with self.lock:
            return self.deck.create_stack(user, board_id, title, order).id

    def deck_create_card(
        self,
        user: str,
        stack_id: int,
        title: str,
        description: str = "",
        *,
        order: int = 0,
        duedate: int | None = None,
    ) -> int:
        """Create a card (CardCreatedEvent when ``deck_webhooks``); ``duedate`` Unix s; id."""
        with self.lock:
            return self.deck.create_card(
                user, stack_id, title, description=description, order=order, duedate=duedate
            ).id

    def deck_update_card(self, user: str, card_id: int, **fields: Any) -> None:
        """Update card fields (``title description order duedate archived done stack_id``);
        CardUpdatedEvent when ``deck_webhooks``."""
        with self.lock:
            self.deck.update_card(user, card_id, **fields)

    def deck_archive_card(self, user: str, card_id: int, archived: bool = True) -> None:
        """Archive or unarchive a card (CardUpdatedEvent when ``deck_webhooks``)."""
        with self.lock:
            self.deck.update_card(user, card_id, archived=archived)

    def deck_delete_card(self, user: str, card_id: int) -> None:
        """Soft-delete a card (CardDeletedEvent when ``deck_webhooks``)."""
        with self.lock:
            self.deck.delete_card(user, card_id)

    def deck_delete_stack(self, user: str, stack_id: int) -> None:
        """Soft-delete a stack: it leaves its board, its cards stay readable by id
        (:meth:`~ncindex.simulator.deck.DeckState.delete_stack`)."""
        with self.lock:
            self.deck.delete_stack(user, stack_id)

    def deck_move_stack(self, user: str, stack_id: int, board_id: int) -> None:
        """Move a stack to another board
        (:meth:`~ncindex.simulator.deck.DeckState.move_stack`)."""
        with self.lock:
            self.deck.move_stack(user, stack_id, board_id)

    def deck_share_board(
        self,
        owner: str,
        board_id: int,
        user: str,
        *,
        edit: bool = True,
        share: bool = False,
        manage: bool = False,
        group: bool = False,
    ) -> None:
        """Share a board with ``user`` (ACL entry), or with the group ``user`` names when
        ``group`` (see :meth:`deck_set_group`)."""
        with self.lock:
            self.deck.share_board(
                owner, board_id, user, edit=edit, share=share, manage=manage, group=group
            )

    def deck_set_group(self, gid: str, members: set[str] | list[str]) -> None:
        """Create or replace group ``gid`` with ``members`` (for Deck's group ACL entries)."""
        with self.lock:
            self.deck.groups[gid] = set(members)

    def deck_unshare_board(self, owner: str, board_id: int, user: str) -> bool:
        """Remove ``user``'s access to a board; True if they had it."""
        with self.lock:
            return self.deck.unshare_board(owner, board_id, user)

    def deck_leave_board(self, user: str, board_id: int) -> None:
        """``user`` leaves a board shared with them (``BoardService::leave``)."""
        with self.lock:
            self.deck.leave_board(user, board_id)

    def deck_delete_board(self, user: str, board_id: int) -> None:
        """Soft-delete a board."""
        with self.lock:
            self.deck.delete_board(user, board_id)

    # ------------------------------------------------------------------ News

    def news_add_folder(self, user: str, name: str) -> int:
        """Create a News folder; returns its id."""
        with self.lock:
            return self.news.add_folder(user, name).id

    def news_add_feed(self, user: str, url: str, title: str, folder_id: int | None = None) -> int:
        """Subscribe ``user`` to a feed; returns the feed id."""
        with self.lock:
            return self.news.add_feed(user, url, title, folder_id).id

    def news_add_item(
        self,
        user: str,
        feed_id: int,
        title: str,
        body: str,
        *,
        url: str | None = None,
        guid: str | None = None,
        author: str = "",
        pub_date: int | None = None,
    ) -> int:
        """Add an item (HTML ``body``, ``pub_date`` Unix s) to a feed; returns the item id."""
        with self.lock:
            return self.news.add_item(
                user, feed_id, title, body, url=url, guid=guid, author=author, pub_date=pub_date
            ).id

    def news_mark_read(self, user: str, item_id: int, read: bool = True) -> None:
        """Mark an item read/unread (bumps its ``lastModified``)."""
        with self.lock:
            self.news.set_flag(user, item_id, unread=not read)

    def news_star(self, user: str, item_id: int, starred: bool = True) -> None:
        """Star/unstar an item (bumps its ``lastModified``)."""
        with self.lock:
            self.news.set_flag(user, item_id, starred=starred)

    def news_delete_feed(self, user: str, feed_id: int) -> None:
        """Soft-delete a feed: it and its items disappear from the API."""
        with self.lock:
            feed = self.news.feeds[feed_id]
            if feed.user != user:
                raise KeyError(feed_id)
            feed.deleted_at = self.tree.now()

    def news_purge_item(self, user: str, item_id: int) -> None:
        """Remove an item silently (like News' auto-purge)."""
        with self.lock:
            item = self.news.items.get(item_id)
            if item is None or item.user != user:
                raise KeyError(item_id)
            del self.news.items[item_id]

    # ------------------------------------------------------------------ trash

    def trash(self, user: str) -> list[dict[str, Any]]:
        """Trash of ``user``: dicts ``id``, ``name`` (``x.d<ts>``), ``original_path``,
        ``deleted_at`` (Unix seconds)."""
        with self.lock:
            return [
                {
                    "id": item.node.id,
                    "name": item.trash_name,
                    "original_path": item.original_path,
                    "deleted_at": item.deleted_at,
                }
                for item in self.tree.trash_items(user)
            ]

    def restore(self, user: str, ref: int | str, *, session: bool = True) -> int:
        """Restore a trashed node by id or trash name (NodeRestoredEvent); returns its id."""
        with self.lock:
            return self.tree.restore(user, ref, session=session).id

    def empty_trash(self, user: str) -> int:
        """Purge ``user``'s trash without events; returns the number of items purged."""
        with self.lock:
            return self.tree.empty_trash(user)

    # ------------------------------------------------------------------ webhooks

    def register_webhook(self, user: str | None = "admin", **params: Any) -> dict[str, Any]:
        """Register a webhook directly (OCS parameter names); returns the WebhookInfo dict."""
        return self.registry.info(self.registry.create(user, params))

    def flush_deliveries(self, timeout: float = 10.0, *, fast_forward: bool = False) -> int:
        """Block until every queued delivery was attempted; returns how many were attempted.

        ``fast_forward`` skips remaining delays. ``TimeoutError`` after ``timeout`` seconds.
        """
        return self.engine.flush(timeout, fast_forward=fast_forward)

    @property
    def deliveries(self) -> list[Delivery]:
        """Attempted deliveries, in attempt order: ``(registration id, url, status, envelope)``."""
        return list(self.engine.deliveries)

    @property
    def dropped_deliveries(self) -> list[tuple[int, dict[str, Any]]]:
        """Deliveries dropped by ``drop_rate``: ``(registration id, envelope)``."""
        return list(self.engine.dropped)

    @property
    def drop_rate(self) -> float:
        """Share (0–1) of deliveries dropped silently; settable at any time."""
        return self.engine.drop_rate

    @drop_rate.setter
    def drop_rate(self, value: float) -> None:
        self.engine.drop_rate = float(value)

    @property
    def delivery_delay(self) -> tuple[float, float]:
        """``(min, max)`` delivery delay in seconds; settable at any time."""
        return self.engine.delay

    @delivery_delay.setter
    def delivery_delay(self, value: tuple[float, float]) -> None:
        self.engine.delay = (float(value[0]), float(value[1]))

    @property
    def reorder(self) -> bool:
        """Whether deliveries due together are shuffled; settable."""
        return self.engine.reorder

    @reorder.setter
    def reorder(self, value: bool) -> None:
        self.engine.reorder = bool(value)

    # ------------------------------------------------------------------ request counting

    def count_request(self, method: str, family: str, path: str, status: int) -> None:
        """Record one HTTP request (called by the WSGI app)."""
        with self.lock:
            self._requests[(method.upper(), family)] += 1
            self.request_log.append((method.upper(), path, status))

    def request_count(self, family: str | None = None, method: str | None = None) -> int:
        """Requests served, optionally only of a family (``webdav``, ``dav-search``, ``ocs``,
        ``notes``, ``deck``, ``news``, ``systemtags``, ``status``) and/or a method."""
        with self.lock:
            return sum(
                n
                for (m, f), n in self._requests.items()
                if (family is None or f == family) and (method is None or m == method.upper())
            )

    @property
    def requests(self) -> dict[tuple[str, str], int]:
        """Snapshot of request counts keyed by ``(METHOD, family)``."""
        with self.lock:
            return dict(self._requests)

    def reset_request_counts(self) -> None:
        """Zero the request counters and the request log."""
        with self.lock:
            self._requests.clear()
            self.request_log.clear()

    # ------------------------------------------------------------------ WSGI

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """WSGI entry point."""
        if self._app is None:
            from ncindex.simulator.app import SimulatorApp

            self._app = SimulatorApp(self)
        return self._app(environ, start_response)

    def close(self) -> None:
        """Stop the delivery threads (queued deliveries are dropped)."""
        self.engine.close()
