"""What every document source is: the :class:`Source` a doc type registers
(:mod:`ncindex.sources.registry`), and the shapes its operations exchange with the reconciler,
the indexer and the verifier.

A source owns one doc type's knowledge of Nextcloud: how its documents are **listed** for a
reconcile scan (:meth:`Source.list`, returning a :class:`Listing` of :class:`Seen`), how one is
**fetched** as a :class:`~ncindex.documents.SourceDocument` (:meth:`Source.fetch`), how a
search candidate is **verified** as the searching user (:meth:`Source.verify`, a
:class:`Checked`), the etag formula the listing and the fetch share, and the webhook event
classes that name one of its documents (:attr:`Source.events`, each an :class:`EventRoute`).
"""

from __future__ import annotations

import builtins
import posixpath
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import redis

from ncindex.documents import DocRef, DocType, SourceDocument
from ncindex.errors import NextcloudProtocolError
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.settings import Settings

if TYPE_CHECKING:
    from ncindex.sources.eligibility import Eligibility

#: An id (file, note, card, item, tag object) as a string: ASCII digits only (``str.isdigit``
#: also accepts ``"²"``, ``"١٢"``, ``"１"``), at most 19 of them; its value is range-checked too.
_ID_DIGITS = re.compile(r"[0-9]{1,19}")
#: Largest id: file ids are 64-bit signed integers in Nextcloud.
MAX_ID = 2**63 - 1


def is_id(value: Any) -> bool:
    """An id in ``0..MAX_ID``, as a strict int (not a bool) or a string of ASCII digits (tag
    events send strings); anything else (Unicode digits, signs, blanks) is not an id."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str) and _ID_DIGITS.fullmatch(value):
        value = int(value)
    return isinstance(value, int) and 0 <= value <= MAX_ID


def listed_id(value: Any, what: str) -> str:
    """The id of a listed document as a string of ASCII digits (:func:`is_id`); raises
    ``NextcloudProtocolError`` for anything else (missing, null, a float, a word)."""
    if not is_id(value):
        raise NextcloudProtocolError(f"{what} without a valid id: {value!r}")
    return str(int(value))


class Context(Protocol):
    """What a source reads of the process: its settings and its Redis (for caches such as
    the user's Notes folder or a Deck stack's board). :class:`ncindex.runtime.Services` is one."""

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        ...

    @property
    def redis(self) -> redis.Redis:
        """The process's Redis client."""
        ...


# --- listing ---------------------------------------------------------------------------------


def ancestors(path: str) -> list[str]:
    """``path`` and every folder above it: ``/a/b.md`` → ``["/a/b.md", "/a", "/"]``."""
    out = [path]
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        out.append(path)
    return out


@dataclass(frozen=True, slots=True)
class Seen:
    """A document as the source listing shows it. ``etag`` and ``path`` are ``None`` when the
    listing gave the id only (Notes ``pruneBefore``: unchanged since the last clean scan)."""

    doc_id: str
    etag: str | None
    path: str | None
    #: further paths the same document is listed at (a file inside two nested shares)
    also_at: tuple[str, ...] = ()

    def at(self, path: str | None) -> bool:
        """Whether the listing shows the document at ``path``."""
        return path == self.path or path in self.also_at


@dataclass(slots=True)
class Listing:
    """What one scan listed: ``docs`` by id; ``covered`` folders skipped because their etag
    is unchanged or their storage cannot be reached now (``StorageUnavailable``) — manifest
    documents below them count as present and unchanged;
    ``folders`` the visited folders' etags; ``marker`` the type's resume point (Notes
    ``pruneBefore``); ``requests`` made to Nextcloud; ``forbidden`` folders the user may not
    list (``PROPFIND`` 403: Sabre ``Directory::getChildren`` throws ``Forbidden`` for a folder
    without read permission): skipped, what is indexed below them counts as missing;
    ``skipped`` the listed files a rule leaves out (subject → rule and path, as
    :func:`ncindex.progress.skip_value` writes them), ``None`` for a listing
    that classifies nothing (every type but files); ``cursor`` where a listing stopped at its
    request limit (JSON-able, in the source's own shape: the folders left to list, the Notes
    chunk cursor), ``None`` once it is complete; ``since`` the Unix time a listing paged over
    several tasks began (:mod:`ncindex.sync.paging`), ``None`` for a listing made in one go;
    ``names_all`` that its last request named every document that exists (the Notes list's
    last chunk), so one an earlier request or page listed and it does not name is gone;
    ``full_walk`` that it walks every folder, ``external_walk`` that it walks the folders on
    and above external storages whatever their etags (files: :mod:`ncindex.sources.file`);
    ``unreachable`` the folders whose storage could not be reached, skipped (and
    ``covered``) by this listing or still so when it began; ``revisit`` the folders recorded
    unreachable by earlier scans that answer again (or are gone) now: walked, with the
    folders above and below them, whatever their etags (files)."""

    docs: dict[str, Seen] = field(default_factory=dict)
    forbidden: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    folders: dict[str, str] = field(default_factory=dict)
    marker: int | None = None
    requests: int = 0
    full_walk: bool = False
    external_walk: bool = False
    skipped: dict[str, str] | None = None
    cursor: Any = None
    since: float | None = None
    names_all: bool = False
    unreachable: set[str] = field(default_factory=set)
    revisit: set[str] = field(default_factory=set)

    def covers(self, path: str | None) -> bool:
        """True when ``path`` lies in (or is) a skipped, unchanged folder."""
        if path is None or not self.covered:
            return False
        return any(folder in self.covered for folder in ancestors(path))

    def empty(self, manifest: Mapping[str, Any]) -> bool:
        """Nothing listed, and no indexed document below a skipped folder (an unchanged
        folder holding nothing indexed does not make a listing that lost everything count);
        ``manifest`` maps doc ids to entries with a ``path``."""
        return not self.docs and not any(self.covers(e.path) for e in manifest.values())

    def indexed_since(self, entry: Any) -> bool:
        """True when the listing was paged (``since`` set) and ``entry`` (a manifest entry,
        with ``indexed_at`` in Unix seconds or ``None``) was indexed after it began: a
        document written meanwhile may lie in a folder listed before it came."""
        return (
            self.since is not None
            and entry.indexed_at is not None
            and entry.indexed_at >= int(self.since)
        )


class ScanMemory(Protocol):
    """What a listing reads and keeps between scans of one user and doc type (rebuildable;
    :class:`ncindex.sync.reconcile.ScanState` keeps it in Redis)."""

    def folders(self) -> dict[str, str]:
        """Folder path → etag at the last clean visit."""
        ...

    def set_folders(self, folders: dict[str, str]) -> None:
        """Replace the folder etags."""
        ...

    def full_walk_at(self) -> float | None:
        """Unix time of the last walk of every folder, if recorded."""
        ...

    def set_full_walk_at(self, at: float) -> None:
        """Record a walk of every folder at ``at`` (Unix seconds)."""
        ...

    def external_walk_at(self) -> float | None:
        """Unix time of the last walk of the folders on and above external storages whatever
        their etags, if recorded."""
        ...

    def set_external_walk_at(self, at: float) -> None:
        """Record such a walk at ``at`` (Unix seconds)."""
        ...

    def unreachable(self) -> dict[str, float]:
        """Folder path → Unix time a scan first skipped it because its storage could not be
        reached, for the folders still unreachable at the last applied scan (files)."""
        ...

    def set_unreachable(self, folders: Mapping[str, float]) -> None:
        """Replace the unreachable folders (path → Unix time first skipped)."""
        ...

    def marker(self) -> int | None:
        """The type's resume point, if any."""
        ...

    def set_marker(self, value: int) -> None:
        """Store the resume point."""
        ...

    def lost(self) -> dict[str, str]:
        """Document id → last path (``""``: unknown) of documents the user lost access to."""
        ...

    def excluded(self) -> set[int]:
        """Ids of the files that carried an excluded tag at the last applied scan."""
        ...

    def set_excluded(self, ids: Iterable[int]) -> None:
        """Replace the ids carrying an excluded tag."""
        ...


# --- fetching --------------------------------------------------------------------------------


@dataclass(slots=True)
class Fetched:
    """A document as read now: ``doc`` (``None`` when unchanged since the stored version: a
    conditional GET answered 304, or the same etag) and ``acl``, the principals that replace
    the stored ones (Deck: the board's participants; ``None``: the reader is added); or,
    with ``ineligible`` (the reason), a document that exists but is not indexed (Deck: an
    archived card): whatever is indexed of it goes."""

    doc: SourceDocument | None
    acl: set[str] | None = None
    ineligible: str | None = None


# --- verifying -------------------------------------------------------------------------------


class Verdict(StrEnum):
    """Result of one verify-on-read check."""

    KEPT = "kept"
    DROPPED = "dropped"  # gone for the user: deleted, unshared, unreadable
    INELIGIBLE = "ineligible"  # still readable, but the index rules exclude it now
    ERROR = "error"  # transient failure: kept (fail-open) and counted
    UNVERIFIED = "unverified"  # no verifier for the doc_type: kept with a warning


@dataclass(slots=True)
class Checked:
    """A verdict and, when the check reveals it, the document's current path for the user
    and MIME type (files); ``reason`` why an ``INELIGIBLE`` one is excluded (an
    :class:`~ncindex.sources.eligibility.Eligibility` reason); ``moved_to``, for a document
    without a path, the keyword payload fields that place it now (payload key → value: a Deck
    card's ``stack_id`` and ``board_id``) when the check found it moved since it was indexed,
    judged there by the check itself (the search holds it to its filter there:
    :func:`~ncindex.search.filters.field_verdict`); ``board_title`` and ``stack_title``, for a
    Deck card, the titles of its board and stack as the check read them (current, and as the
    searching user sees them; ``None`` when the check did not read them)."""

    verdict: Verdict
    path: str | None = None
    mime_type: str | None = None
    reason: str | None = None
    moved_to: dict[str, str] | None = None
    board_title: str | None = None
    stack_title: str | None = None


#: A request a page's checks share, made as the searching user: its answer (decoded JSON).
PageRequest = Callable[[NextcloudClient], Any]


class Answer(Protocol):
    """What :meth:`Source.settle` reads the page's shared requests with."""

    def __call__(self, key: str, request: PageRequest | None = None) -> Any:
        """The answer of the shared request ``key`` (raises what the request raised). A key
        the page did not ask for (not among :meth:`Source.page_requests`) is asked now with
        ``request``, once per page however many candidates ask for it, and ``KeyError``
        without one."""
        ...


# --- event routing ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventRoute:
    """A webhook event class that names one document of a source (by id, without a path):
    ``evict`` says whether it reports the document deleted (``ncindex.evict_document``, a
    re-check before evicting) or changed (``ncindex.index_document``); ``id_path`` is where
    the id is in the event object (``("card", "id")``: ``event.card.id``); ``cost_without``
    what is lost when Nextcloud refuses to register the class. With ``field`` the id names
    not a document but every indexed document whose payload ``field`` (keyword-indexed)
    holds it — a Deck ACL event names a board, whose cards' ``board_id`` it is — and each is
    re-read (``ncindex.index_related``). ``reader``, given the event object, names another
    user who may read what the event names (a Deck ACL entry's participant), to read it as
    when the event's own user is not a configured account (``None``: nobody)."""

    event_class: str
    evict: bool
    id_path: tuple[str, ...]
    cost_without: str
    field: str | None = None
    reader: Callable[[Mapping[str, Any]], str | None] | None = None

    @property
    def id_field(self) -> str:
        """The id's field in the envelope, as an error names it (``event.card.id``)."""
        return ".".join(("event", *self.id_path))

    def id_in(self, event: Mapping[str, Any]) -> Any:
        """The value at :attr:`id_path` in the event's extra keys (``None`` when absent)."""
        value: Any = event
        for key in self.id_path:
            value = value.get(key) if isinstance(value, Mapping) else None
        return value


# --- the source ------------------------------------------------------------------------------


class Source(ABC):
    """One doc type's knowledge of Nextcloud. Subclasses set :attr:`doc_type` and implement
    :meth:`list`, :meth:`fetch` and :meth:`verify`; the rest has defaults.

    ``node`` sources are files in the user's files (notes, files): their events are the
    file events (:mod:`ncindex.ingest.events`), their documents are indexed by file id
    (``ncindex.index_node``: looked up, classified, then fetched with their WebDAV entry).
    The others are indexed by ``ncindex.index_document`` and name their own events."""

    doc_type: ClassVar[DocType]
    #: a file in the user's files, indexed by file id (see the class docstring)
    node: ClassVar[bool] = False
    #: the Nextcloud app the documents live in (its listing's 404 means the app is not
    #: installed, not a failure); ``None`` for core (files)
    app: ClassVar[str | None] = None
    #: whether the index rules (globs, MIME list, tags) apply to its documents
    ruled: ClassVar[bool] = False
    #: whether a re-path alone gives a document its title (its title is its file name)
    title_from_path: ClassVar[bool] = False
    #: the webhook event classes that name one of its documents by id
    events: ClassVar[tuple[EventRoute, ...]] = ()
    #: the payload field naming where a document's readers come from (Deck: ``board_id``),
    #: for a source whose :meth:`fetch` gives the ``acl``; ``None``: :meth:`readers_now` is
    #: never asked
    readers_field: ClassVar[str | None] = None
    #: whether a document changed while its listing is paged comes again, as it is then, on
    #: a later page, so that entry replaces the earlier one (Notes: nextcloud/notes
    #: ``lib/Controller/Helper.php`` ``getNotesAndCategories`` orders the chunks by the meta
    #: ``lastUpdate``, which ``MetaService::updateIfNeeded`` moves to now on a change);
    #: otherwise one document on two pages is one listed at two paths, and keeps both
    relists_changed: ClassVar[bool] = False
    #: whether its documents' text is made by :func:`ncindex.text.extract.extract_text`, their
    #: payload naming the format and its extraction's version (:mod:`ncindex.text.versions`):
    #: a reconcile scan then re-reads those an older extraction read (files, News items)
    extracts: ClassVar[bool] = False

    @abstractmethod
    def list(
        self,
        ctx: Context,
        client: NextcloudClient,
        memory: ScanMemory,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Every document of the type ``client.user`` can see now (or those changed since
        ``memory``'s resume points), for a reconcile scan. Raises an ``NcindexError`` when the
        listing fails (``NotFound``: the app, or the files root, is not there). With
        ``resume`` (a listing an earlier call stopped, its ``requests`` reset to 0), go on
        from its ``cursor`` into it; with ``limit``, stop once ``limit`` requests were made
        and more are needed, with ``cursor`` set (a source whose listing is a few requests
        may ignore both and always list in full)."""

    def commit(  # noqa: B027  (a default, not abstract: most sources keep nothing)
        self, memory: ScanMemory, listing: Listing, dirty: set[str], clean: bool
    ) -> None:
        """Advance the stored state after an applied scan. ``dirty`` holds every folder with
        a change at or below it; ``clean`` says whether the whole scan was clean. By default
        nothing is kept: every scan lists everything."""

    def add_tagged(  # noqa: B027  (a default, not abstract: only a walk can miss them)
        self,
        ctx: Context,
        client: NextcloudClient,
        listing: Listing,
        memory: ScanMemory,
        tagged: Mapping[str, Mapping[int, DavEntry]],
        apply: bool,
    ) -> None:
        """With tag rules set, add to ``listing`` what the tags say may be newly eligible
        (``tagged``: gate or excluded tag name → the files carrying it now). By default
        nothing: only a walk that skips folders can miss them."""

    @abstractmethod
    def fetch(
        self,
        ctx: Context,
        client: NextcloudClient,
        ref: DocRef,
        current: dict[str, Any] | None,
        entry: DavEntry | None = None,
    ) -> Fetched:
        """Read document ``ref`` as ``client.user``; ``current`` is its stored payload (a
        conditional read may answer "unchanged"); ``entry`` is a node's WebDAV entry as just
        looked up by id (required for ``node`` sources, ``None`` for the others). Raises
        ``NotFound`` when it is gone for the user, and what the client raises."""

    @abstractmethod
    def verify(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        """The cheapest authoritative check that ``client.user`` can still see the document
        of ``payload`` (its best chunk's). Raises ``NotFound``/``Forbidden`` when it is gone
        (the verifier drops it), and what the client raises."""

    #: the request its :meth:`verify_many` makes, ``None`` for a source without one: the
    #: candidates of every source with the same value are checked together, by the first
    #: one's :meth:`verify_many` (``"webdav"``: files and notes, one SEARCH by file id)
    verified_with: ClassVar[str | None] = None

    def verify_many(
        self, client: NextcloudClient, payloads: Sequence[dict[str, Any]]
    ) -> builtins.list[Checked]:
        """:meth:`verify` for each of ``payloads`` (same order; of any doc type whose source
        has the same :attr:`verified_with`) in fewer requests; the others raise
        ``NotImplementedError``. A document gone for the user is ``DROPPED`` here, not
        raised. Raises what the client raises (the whole batch failed) and
        ``KeyError``/``ValueError`` for a payload it cannot read."""
        raise NotImplementedError(f"{self.doc_type} checks its candidates one by one")

    def page_requests(self, payloads: Sequence[dict[str, Any]]) -> dict[str, PageRequest]:
        """The requests the checks of ``payloads`` (this source's candidates of one page)
        share, by a key unique among every source's: each is made once per page, as the
        searching user and concurrently with the candidates' own checks, and its answer is
        given to :meth:`settle`. By default none."""
        return {}

    def settle(self, payload: dict[str, Any], checked: Checked, answer: Answer) -> Checked:
        """The verdict of a candidate its own check kept (``checked``), given ``answer(key)``:
        the answer of the shared request ``key`` of :meth:`page_requests` (it raises what
        the request raised: ``NotFound`` drops the candidate, a transient error keeps it as
        an error); ``answer(key, request)`` asks a request the page did not make once, for
        what only the candidates' checks revealed (:class:`Answer`). By default
        ``checked``."""
        return checked

    def rule_reason(
        self, rules: Eligibility, path: str, mime_type: str | None, tags: builtins.list[str]
    ) -> str | None:
        """Why the index rules exclude a document now at ``path`` with ``mime_type`` and the
        configured ``tags``, or ``None`` (the default: no rules apply, see :attr:`ruled`)."""
        return None

    def subscribes(self, settings: Settings) -> bool:
        """Whether :attr:`events` are registered with Nextcloud under ``settings``."""
        return True

    def readers_now(self, ctx: Context, client: NextcloudClient, doc: SourceDocument) -> set[str]:
        """The principals that may read ``doc`` (as :meth:`fetch` gave it) now, asked again
        as ``client.user`` after it was written (a source with :attr:`readers_field` only).
        Raises ``NotFound`` when ``client.user`` can no longer read it, and what the client
        raises."""
        raise NotImplementedError(f"{self.doc_type} does not re-read its readers")
