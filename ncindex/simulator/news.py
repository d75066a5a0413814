"""News: feeds, folders and items with the API ``/index.php/apps/news/api/v1-3`` (§5).

Item ids are global and increase with insertion; ``GET /items`` returns newest first (id desc)
unless ``oldestFirst``; ``offset`` is an item id (``id < offset``, or ``id > offset`` with
``oldestFirst``); ``lastModified`` is stored in microseconds and served as integer seconds;
``/items/updated`` takes seconds or microseconds. There is no single-item GET and News fires no
webhook events. Items of soft-deleted feeds are excluded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from ncindex.simulator.responses import json_response, request_params
from ncindex.simulator.routing import Routes

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["NewsApi", "NewsState"]

#: News' ``index.php`` routes below ``/apps/news/api`` (:class:`~ncindex.simulator.routing.
#: Routes`): nextcloud/news ``appinfo/routes.php`` (d409f2de, August 2026) — no other route of
#: the app has a url below ``/api``. The ``OPTIONS`` one is ``utility_api#preflighted_cors``;
#: the ``/api/v1-2/…`` PUTs are the v1.2 forms kept beside v1.3's POSTs.
_V1 = {"apiVersion": "v1-[23]"}
_V13 = {"apiVersion": "v1-3"}
NEWS_ROUTES = Routes(
    (
        ("GET", "/api", {}),
        ("OPTIONS", "/api/{apiVersion}/{path}", {"apiVersion": "v(1-[23]|2)", "path": ".+"}),
        ("GET", "/api/{apiVersion}/version", {"apiVersion": "v(1-[23]|2)"}),
        ("GET", "/api/{apiVersion}/status", _V1),
        ("GET", "/api/{apiVersion}/cleanup/before-update", _V1),
        ("GET", "/api/{apiVersion}/cleanup/after-update", _V1),
        ("GET", "/api/{apiVersion}/folders", _V1),
        ("POST", "/api/{apiVersion}/folders", _V1),
        ("PUT", "/api/{apiVersion}/folders/{folderId}", _V1),
        ("DELETE", "/api/{apiVersion}/folders/{folderId}", _V1),
        ("POST", "/api/{apiVersion}/folders/{folderId}/read", _V13),
        ("PUT", "/api/v1-2/folders/{folderId}/read", {}),
        ("GET", "/api/{apiVersion}/feeds", _V1),
        ("POST", "/api/{apiVersion}/feeds", _V1),
        ("PUT", "/api/{apiVersion}/feeds/{feedId}", _V1),
        ("DELETE", "/api/{apiVersion}/feeds/{feedId}", _V1),
        ("GET", "/api/{apiVersion}/feeds/all", _V1),
        ("POST", "/api/{apiVersion}/feeds/{feedId}/move", _V13),
        ("PUT", "/api/v1-2/feeds/{feedId}/move", {}),
        ("POST", "/api/{apiVersion}/feeds/{feedId}/rename", _V13),
        ("PUT", "/api/v1-2/feeds/{feedId}/rename", {}),
        ("POST", "/api/{apiVersion}/feeds/{feedId}/read", _V13),
        ("PUT", "/api/v1-2/feeds/{feedId}/read", {}),
        ("GET", "/api/{apiVersion}/feeds/update", _V1),
        ("GET", "/api/{apiVersion}/feeds/{feedId}/filter", _V13),
        ("POST", "/api/{apiVersion}/feeds/{feedId}/filter", _V13),
        ("DELETE", "/api/{apiVersion}/feeds/{feedId}/filter", _V13),
        ("GET", "/api/{apiVersion}/items", _V1),
        ("GET", "/api/{apiVersion}/items/updated", _V1),
        ("POST", "/api/{apiVersion}/items/{itemId}/read", _V13),
        ("PUT", "/api/v1-2/items/{itemId}/read", {}),
        ("POST", "/api/{apiVersion}/items/{itemId}/unread", _V13),
        ("PUT", "/api/v1-2/items/{itemId}/unread", {}),
        ("POST", "/api/{apiVersion}/items/read", _V13),
        ("PUT", "/api/v1-2/items/read", {}),
        ("POST", "/api/{apiVersion}/items/read/multiple", _V13),
        ("PUT", "/api/v1-2/items/read/multiple", {}),
        ("POST", "/api/{apiVersion}/items/unread/multiple", _V13),
        ("PUT", "/api/v1-2/items/unread/multiple", {}),
        ("POST", "/api/{apiVersion}/items/{itemId}/star", _V13),
        ("PUT", "/api/v1-2/items/{feedId}/{guidHash}/star", {}),
        ("POST", "/api/{apiVersion}/items/{itemId}/unstar", _V13),
        ("PUT", "/api/v1-2/items/{feedId}/{guidHash}/unstar", {}),
        ("POST", "/api/{apiVersion}/items/star/multiple", _V13),
        ("PUT", "/api/v1-2/items/star/multiple", {}),
        ("POST", "/api/{apiVersion}/items/unstar/multiple", _V13),
        ("PUT", "/api/v1-2/items/unstar/multiple", {}),
        ("GET", "/api/{apiVersion}/favicon/{feedUrlHash}", _V13),
        ("POST", "/api/v2/folders", {}),
        ("PATCH", "/api/v2/folders/{folderId}", {}),
        ("DELETE", "/api/v2/folders/{folderId}", {}),
    )
)

TYPE_FEED, TYPE_FOLDER, TYPE_STARRED, TYPE_ALL, TYPE_UNREAD = 0, 1, 2, 3, 6
#: The list types ``ItemMapperV2::findAllItems`` and ``findAllAfter`` take besides a feed or
#: a folder; any other (``4`` shared, ``5`` explore, …) raises ``ServiceValidationException``.
_LIST_TYPES = (TYPE_STARRED, TYPE_ALL, TYPE_UNREAD)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


@dataclass
class Feed:
    """A subscribed feed of one user; ``added`` Unix seconds."""

    id: int
    user: str
    url: str
    title: str
    folder_id: int | None
    added: int
    link: str = ""
    deleted_at: int = 0
    ordering: int = 0
    pinned: bool = False


@dataclass
class Folder:
    """A feed folder of one user."""

    id: int
    user: str
    name: str


@dataclass
class Item:
    """A feed item row; ``last_modified_us`` in microseconds, ``pub_date`` Unix seconds."""

    id: int
    user: str
    feed_id: int
    guid: str
    url: str
    title: str
    author: str
    body: str
    pub_date: int | None
    last_modified_us: int
    unread: bool = True
    starred: bool = False


class NewsState:
    """All feeds, folders and items."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.feeds: dict[int, Feed] = {}
        self.folders: dict[int, Folder] = {}
        self.items: dict[int, Item] = {}
        self._ids = {"feed": 1, "folder": 1, "item": 1}
        self._last_us = 0

    def _next(self, kind: str) -> int:
        value = self._ids[kind]
        self._ids[kind] = value + 1
        return value

    def now_us(self) -> int:
        """Current time in microseconds, strictly increasing between calls."""
        now = int(self.sim.clock() * 1_000_000)
        self._last_us = max(now, self._last_us + 1)
        return self._last_us

    def add_folder(self, user: str, name: str) -> Folder:
        """Create a folder for ``user``."""
        folder = Folder(self._next("folder"), user, name)
        self.folders[folder.id] = folder
        return folder

    def add_feed(self, user: str, url: str, title: str, folder_id: int | None = None) -> Feed:
        """Subscribe ``user`` to a feed."""
        feed = Feed(self._next("feed"), user, url, title, folder_id, self.sim.tree.now(), link=url)
        self.feeds[feed.id] = feed
        return feed

    def add_item(
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
    ) -> Item:
        """Add an item to a feed of ``user``."""
        feed = self.feeds[feed_id]
        if feed.user != user:
            raise KeyError(f"feed {feed_id} is not {user}'s")
        item_id = self._next("item")
        link = url or f"{feed.url.rstrip('/')}/items/{item_id}"
        item = Item(
            item_id,
            user,
            feed_id,
            guid or link,
            link,
            title,
            author,
            body,
            self.sim.tree.now() if pub_date is None else pub_date,
            self.now_us(),
        )
        self.items[item.id] = item
        return item

    def visible_items(self, user: str) -> list[Item]:
        """Items of ``user`` whose feed is not deleted, by id."""
        return sorted(
            (
                i
                for i in self.items.values()
                if i.user == user and not self.feeds[i.feed_id].deleted_at
            ),
            key=lambda i: i.id,
        )

    def item_json(self, item: Item) -> dict[str, Any]:
        """Item JSON in News' field order: nextcloud/news ``lib/Db/Item.php`` ``toAPI``;
        ``lastModified`` in seconds (``cropApiLastModified``); ``fingerprint`` and
        ``contentHash`` as ``computeFingerprint`` (title, url, body, enclosure link) and
        ``computeContentHash`` (those, the enclosure type and the author) hash them — the
        simulator's items have no enclosure."""
        fingerprint = _md5(f"{item.title}{item.url}{item.body}")
        content_hash = _md5(f"{item.title}{item.url}{item.body}{item.author}")
        return {
            "id": item.id,
            "guid": item.guid,
            "guidHash": _md5(item.guid),
            "url": item.url,
            "title": item.title,
            "author": item.author,
            "pubDate": item.pub_date,
            "updatedDate": None,
            "body": item.body,
            "enclosureMime": None,
            "enclosureLink": None,
            "mediaThumbnail": None,
            "mediaDescription": None,
            "feedId": item.feed_id,
            "unread": item.unread,
            "starred": item.starred,
            "filtered": False,
            "lastModified": item.last_modified_us // 1_000_000,
            "rtl": False,
            "fingerprint": fingerprint,
            "contentHash": content_hash,
        }

    def feed_json(self, feed: Feed) -> dict[str, Any]:
        """Feed JSON as in ``GET /feeds``."""
        unread = sum(1 for i in self.visible_items(feed.user) if i.feed_id == feed.id and i.unread)
        return {
            "id": feed.id,
            "url": feed.url,
            "title": feed.title,
            "faviconLink": None,
            "added": feed.added,
            "nextUpdateTime": None,
            "folderId": feed.folder_id,
            "unreadCount": unread,
            "ordering": feed.ordering,
            "link": feed.link,
            "pinned": feed.pinned,
            "updateErrorCount": 0,
            "lastUpdateError": None,
            "items": [],
        }

    def set_flag(
        self, user: str, item_id: int, *, unread: bool | None = None, starred: bool | None = None
    ) -> Item:
        """Change read/star state (bumps ``lastModified``); KeyError if not the user's."""
        item = self.items.get(item_id)
        if item is None or item.user != user:
            raise KeyError(item_id)
        if unread is not None:
            item.unread = unread
        if starred is not None:
            item.starred = starred
        item.last_modified_us = self.now_us()
        return item


class NewsApi:
    """HTTP handlers for ``/index.php/apps/news/api/v1-3`` (and ``v1-2`` reads)."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.news = sim.news

    def handle(self, request: Request, uid: str | None) -> Response:
        """Dispatch one News request."""
        if uid is None:
            return json_response({"message": "Current user is not logged in"}, 401)
        m = re.match(r"^(?:/index\.php)?/apps/news/api/v1-[23](/.*)?$", request.path)
        if m is None:
            return Response(b"", status=404)
        route = (m.group(1) or "/").rstrip("/")
        with self.sim.lock:
            return self._route(request, uid, request.method.upper(), route)

    @staticmethod
    def _bool(value: Any, default: bool) -> bool:
        """A ``bool`` controller parameter as nextcloud/server
        ``lib/private/AppFramework/Http/Dispatcher.php`` ``executeController`` casts it: the
        string ``false`` (exactly) is false, anything else PHP's ``settype`` (``""`` and
        ``"0"`` false, every other string true)."""
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        return str(value) not in ("false", "", "0")

    @staticmethod
    def _int(value: Any, default: int) -> int:
        """An ``int`` controller parameter: PHP's ``settype($value, 'int')`` reads the
        leading integer of a string (``"12abc"`` → 12, ``"abc"`` → 0)."""
        if value is None:
            return default
        if isinstance(value, bool | int):
            return int(value)
        m = re.match(r"\s*([+-]?\d+)", str(value))
        return int(m.group(1)) if m else 0

    def _route(self, request: Request, uid: str, method: str, route: str) -> Response:
        news = self.news
        params = request_params(request)
        if route == "/version" and method == "GET":
            # the installed app's version (nextcloud/news lib/Controller/
            # UtilityApiController.php ``version``: ``getValueString(appName,
            # 'installed_version')``), the one the app list and capabilities name
            return json_response({"version": self.sim.apps.get("news", "")})
        if route == "/feeds" and method == "GET":
            feeds = [
                news.feed_json(f)
                for f in sorted(news.feeds.values(), key=lambda f: f.id)
                if f.user == uid and not f.deleted_at
            ]
            items = news.visible_items(uid)
            body: dict[str, Any] = {
                "feeds": feeds,
                "starredCount": sum(1 for i in items if i.starred),
            }
            if items:
                body["newestItemId"] = items[-1].id
            return json_response(body)
        if route == "/folders" and method == "GET":
            folders = [
                {"id": f.id, "name": f.name, "opened": True, "feeds": []}
                for f in sorted(news.folders.values(), key=lambda f: f.id)
                if f.user == uid
            ]
            return json_response({"folders": folders})
        if route == "/items" and method == "GET":
            return self._items(uid, params)
        if route == "/items/updated" and method == "GET":
            return self._updated(uid, params)
        m = re.fullmatch(r"/items/(\d+)/(read|unread|star|unstar)", route)
        if m and method in ("POST", "PUT"):
            action = m.group(2)
            try:
                news.set_flag(
                    uid,
                    int(m.group(1)),
                    unread=None if action in ("star", "unstar") else action == "unread",
                    starred=None if action in ("read", "unread") else action == "star",
                )
            except KeyError:
                return json_response({"message": "Item not found!"}, 404)
            return json_response([])
        m = re.fullmatch(r"/items/(read|unread|star|unstar)/multiple", route)
        if m and method in ("POST", "PUT"):
            action = m.group(1)
            ids = params.get("itemIds") or params.get("items") or []
            for item_id in ids:
                try:
                    news.set_flag(
                        uid,
                        int(item_id),
                        unread=None if action in ("star", "unstar") else action == "unread",
                        starred=None if action in ("read", "unread") else action == "star",
                    )
                except (KeyError, ValueError):
                    continue
            return json_response([])
        return Response(b"", status=404)

    def _select(self, uid: str, item_type: int, ident: int) -> list[Item]:
        news = self.news
        items = news.visible_items(uid)
        if item_type == TYPE_FEED:
            return [i for i in items if i.feed_id == ident]
        if item_type == TYPE_FOLDER:
            return [i for i in items if news.feeds[i.feed_id].folder_id == ident]
        if item_type == TYPE_STARRED:
            return [i for i in items if i.starred]
        if item_type == TYPE_UNREAD:
            return [i for i in items if i.unread]
        return items

    @staticmethod
    def _unknown_type(item_type: int) -> Response | None:
        """The answer to a list type News cannot list, else ``None``: nextcloud/news
        ``lib/Db/ItemMapperV2.php`` ``findAllItems``/``findAllAfter`` throw
        ``ServiceValidationException`` for a type other than feed, folder, starred, all and
        unread, which ``ItemApiController`` does not catch (News registers no middleware), so
        the AppFramework answers 500. The body is a guess (Nextcloud's error page)."""
        if item_type in (TYPE_FEED, TYPE_FOLDER, *_LIST_TYPES):
            return None
        return json_response({"message": "Unexpected Feed type in call"}, 500)

    def _items(self, uid: str, params: dict[str, Any]) -> Response:
        """``GET /items``: nextcloud/news ``lib/Controller/ItemApiController.php`` ``index``
        (defaults ``type=3``, ``id=0``, ``getRead=true``, ``batchSize=-1``, ``offset=0``); a
        feed or folder list drops read items without ``getRead``, all items become the
        unread list, and any other type answers 200 with the refusal message; with
        ``getRead`` a type News cannot list answers 500 (:meth:`_unknown_type`)."""
        batch = self._int(params.get("batchSize"), -1)
        offset = self._int(params.get("offset"), 0)
        item_type = self._int(params.get("type"), TYPE_ALL)
        ident = self._int(params.get("id"), 0)
        get_read = self._bool(params.get("getRead"), True)
        oldest_first = self._bool(params.get("oldestFirst"), False)
        if not get_read and item_type not in (TYPE_FEED, TYPE_FOLDER, TYPE_ALL):
            return json_response(
                {"message": "Setting getRead on an already filtered list is not allowed!"}
            )
        unknown = self._unknown_type(item_type)
        if unknown is not None:
            return unknown
        items = self._select(uid, item_type, ident)
        if not get_read:
            items = [i for i in items if i.unread]
        if offset:
            items = [i for i in items if (i.id > offset if oldest_first else i.id < offset)]
        items.sort(key=lambda i: i.id, reverse=not oldest_first)
        if batch > 0:
            items = items[:batch]
        return json_response({"items": [self.news.item_json(i) for i in items]})

    def _updated(self, uid: str, params: dict[str, Any]) -> Response:
        """``GET /items/updated``: ``ItemApiController::updated`` reads a ``lastModified`` of
        at most 10 digits as seconds (× 10⁶), a longer one as microseconds."""
        last = self._int(params.get("lastModified"), 0)
        if len(str(last)) <= 10:
            last *= 1_000_000
        item_type = self._int(params.get("type"), TYPE_ALL)
        ident = self._int(params.get("id"), 0)
        unknown = self._unknown_type(item_type)
        if unknown is not None:
            return unknown
        items = [i for i in self._select(uid, item_type, ident) if i.last_modified_us >= last]
        items.sort(key=lambda i: i.id, reverse=True)
        return json_response({"items": [self.news.item_json(i) for i in items]})
