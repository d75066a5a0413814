"""Every name ncindex gives to something outside its processes: Celery task names, queue names
and Redis keys, in one place.

Task names (``ncindex.index_node`` …) are a public interface — operators route, revoke and
alert on them — and never change. Queues are named by what runs on them (``ingest``, ``index``,
``evict``, ``reconcile``); a worker consumes them by these names (``celery worker -Q index``).

Every Redis key belongs to one deployment's **namespace** (``NCINDEX_NAMESPACE``, default
``ncindex``), so that two deployments can share one Redis database:

- ncindex's own keys are ``<namespace>:<kind>:…`` (:class:`Names`), e.g.
  ``ncindex:lock:node:42`` or ``ncindex:debounce:index:alice:42``;
- Celery's keys — the queue lists, ``unacked`` / ``unacked_index``, kombu's bindings and the
  event and control channels — carry the prefix ``<namespace>:`` through kombu's
  ``global_keyprefix`` transport option (:attr:`Names.broker_prefix`) — and so do the rate
  limiter's (:attr:`Names.limits_prefix`) — so a queue is still
  called ``index`` by workers and producers while its list is ``<namespace>:index`` in Redis.
  The default namespace keeps Celery's keys unprefixed (``index``, ``unacked``), the names of
  earlier releases, so an upgrade strands no queued task and a queue-length autoscaler keeps
  reading the list it read before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# --- Celery task names (public, never namespaced) ----------------------------------------
INDEX_NODE = "ncindex.index_node"
INDEX_NODES = "ncindex.index_nodes"
EVICT_NODE = "ncindex.evict_node"
MOVE_PATH = "ncindex.move_path"
INDEX_DOCUMENT = "ncindex.index_document"
EVICT_DOCUMENT = "ncindex.evict_document"
SEND_ACTIONS = "ncindex.send_actions"
FLUSH_GATHERED = "ncindex.flush_gathered"
SWEEP_GATHERED = "ncindex.sweep_gathered"
REVOKE_APP_PASSWORDS = "ncindex.revoke_app_passwords"
RESOLVE_NODE = "ncindex.resolve_node"
INDEX_RELATED = "ncindex.index_related"
INDEX_FOLDER = "ncindex.index_folder"
OUTAGE_REQUEUE = "ncindex.outage_requeue"
RECONCILE_CHECK = "ncindex.reconcile_check"
RESCAN_IF_FORGOTTEN = "ncindex.rescan_if_forgotten"
RESCAN_USERS = "ncindex.rescan_users"
RECONCILE_SCAN = "ncindex.reconcile_scan"
POLL_SHARES = "ncindex.poll_shares"
REINDEX_MODEL = "ncindex.reindex_model"
REINDEX_FINISH = "ncindex.reindex_finish"
REINDEX_ANALYZER = "ncindex.reindex_analyzer"

# --- Queues (as workers name them in ``-Q``) ---------------------------------------------
#: Fan-out of large envelopes and the default queue.
INGEST = "ingest"
#: Everything that embeds: indexing and model changes.
INDEX = "index"
#: Evictions and moves (no embedding), so they never wait behind an indexing backlog.
EVICT = "evict"
#: Reconciliation checks and scans.
RECONCILE = "reconcile"
QUEUES = (INGEST, INDEX, EVICT, RECONCILE)

DEFAULT_NAMESPACE = "ncindex"
#: What a namespace may be: it starts Redis keys and must not hold a glob character or ``:``.
NAMESPACE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"
_NAMESPACE = re.compile(NAMESPACE_PATTERN)


@dataclass(frozen=True)
class Names:
    """The Redis keys of one deployment (``namespace``; see the module docstring).

    Raises ``ValueError`` for a namespace that does not match :data:`NAMESPACE_PATTERN`.
    """

    namespace: str = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        if not _NAMESPACE.match(self.namespace):
            raise ValueError(f"namespace must match {NAMESPACE_PATTERN}: {self.namespace!r}")

    def key(self, *parts: object) -> str:
        """``<namespace>:<part>:<part>…``."""
        return ":".join((self.namespace, *(str(p) for p in parts)))

    # --- Celery's keys, through kombu's global_keyprefix ---------------------------------
    @property
    def broker_prefix(self) -> str:
        """kombu's ``global_keyprefix``: ``""`` for the default namespace, else
        ``"<namespace>:"``."""
        return "" if self.namespace == DEFAULT_NAMESPACE else f"{self.namespace}:"

    def queue_list(self, queue: str) -> str:
        """The Redis list holding the messages waiting on ``queue``."""
        return self.broker_prefix + queue

    @property
    def unacked(self) -> str:
        """kombu's hash of delivered, unacknowledged messages (running or counting down)."""
        return self.broker_prefix + "unacked"

    @property
    def unacked_index(self) -> str:
        """kombu's sorted set of :attr:`unacked` by delivery time (Unix seconds)."""
        return self.broker_prefix + "unacked_index"

    # --- ncindex's keys -------------------------------------------------------------------
    def lock(self, *parts: object) -> str:
        """A Redis lock: ``<namespace>:lock:<parts>`` (``node:<file id>``, ``reindex``, …)."""
        return self.key("lock", *parts)

    @property
    def remembered(self) -> str:
        """Set (Unix seconds) once this deployment's Redis was found without it: its absence
        means a first start or a Redis that lost its data (:func:`ncindex.sync.reconcile.
        rescan_if_forgotten`)."""
        return self.key("remembered")

    @property
    def rescan_due(self) -> str:
        """Unix seconds from which every account is to be scanned once: set after a first
        webhook registration (:func:`ncindex.ingest.registration.rescan_once_listening`),
        taken by :func:`ncindex.sync.reconcile.rescan_if_due`."""
        return self.key("rescan-due")

    @property
    def debounce_prefix(self) -> str:
        """Debounce claims: ``<namespace>:debounce:<operation>:…``."""
        return self.key("debounce", "")

    @property
    def deadletter(self) -> str:
        """The dead letter hash (field: subject)."""
        return self.key("deadletter")

    @property
    def runs_prefix(self) -> str:
        """Per-document run counts of the poison-document guard: ``…:runs:<subject>``."""
        return self.key("runs", "")

    def batch_recorded(self, run: str) -> str:
        """Set once an ``ncindex.index_nodes`` run (``run``: its task id) has recorded its
        files' progress, so that a retry of the task records none again (string, expiring)."""
        return self.key("batch-recorded", run)

    def gathered(self, user: str) -> str:
        """Debounced index actions of ``user`` waiting to go out together (list of JSON
        ``{"file_id", "debounce_key", "queue"}``; :func:`ncindex.ingest.queueing.send_gathered`)."""
        return self.key("gathered", user)

    def gathered_flush(self, user: str) -> str:
        """Set while an ``ncindex.flush_gathered`` task for ``user`` is on its way (string,
        expiring)."""
        return self.key("gathered-flush", user)

    def gathered_taken(self, user: str, run: str) -> str:
        """The gathered actions of ``user`` an ``ncindex.flush_gathered`` run (``run``: its
        task id, without ``:``) took, until it has sent them (list, expiring)."""
        return self.key("gathered-taken", user, run)

    @property
    def failing(self) -> str:
        """Documents whose last task run failed or is being retried (hash: subject → JSON
        with the user, task, attempts and last error; :mod:`ncindex.progress`)."""
        return self.key("failing")

    def pending(self, user: str) -> str:
        """The documents queued for ``user`` and not yet processed (sorted set: subject →
        Unix seconds queued)."""
        return self.key("pending", user)

    def skipped(self, user: str) -> str:
        """The documents of ``user`` the indexing rules leave out (hash: subject → rule)."""
        return self.key("skipped", user)

    def truncated(self, user: str) -> str:
        """The documents of ``user`` indexed with their text cut short by a bound (hash:
        subject → the document's path in ``user``'s view, or its doc_key without one)."""
        return self.key("truncated", user)

    def first_indexing(self, user: str) -> str:
        """``user``'s first indexing (hash: ``started_at``, ``done_at`` in Unix seconds,
        ``finished`` documents)."""
        return self.key("first-indexing", user)

    @property
    def progress_users(self) -> str:
        """Every user a document was queued for, i.e. with a :meth:`first_indexing` record
        (set of user ids, added where that record is written: :class:`ncindex.progress.
        Progress`), so that ``ncindex status`` lists them without a SCAN."""
        return self.key("progress-users")

    @property
    def progress_users_listed(self) -> str:
        """Set once the :meth:`first_indexing` records written before :attr:`progress_users`
        was kept have been added to it (string; :meth:`ncindex.progress.Progress.users`)."""
        return self.key("progress-users", "listed")

    @property
    def index_rebuilds(self) -> str:
        """The keys of the index rebuild notes (``<namespace>:index-rebuild:<collection>:
        <field>``), each scored with the Unix second it expires at (sorted set;
        :class:`ncindex.progress.IndexRebuilds`)."""
        return self.key("index-rebuilds")

    def first_indexed(self, user: str) -> str:
        """The documents finished during ``user``'s first indexing while it runs (set of
        subjects; counted into ``first_indexing``'s ``finished`` and deleted when it ends)."""
        return self.key("first-indexed", user)

    def throughput(self, bucket: int) -> str:
        """Documents and chunks finished in one time bucket (hash; ``bucket`` is Unix seconds
        divided by the bucket length), expiring after the rate window."""
        return self.key("throughput", bucket)

    @property
    def reindex_progress(self) -> str:
        """The progress of a model change (``ncindex reindex --status``)."""
        return self.key("reindex")

    @property
    def reconcile_prefix(self) -> str:
        """Scan state: ``…:reconcile:<doc_type>:<user>…`` and the last scans."""
        return self.key("reconcile", "")

    def scan_state(self, doc_type: str, user: str) -> str:
        """The base of ``user``'s scan state of ``doc_type``
        (:class:`ncindex.sync.reconcile.ScanState`): ``…:reconcile:<doc_type>:<user>``; its
        keys are ``<base>:<part>`` (``folders``, ``tried``, ``held``, ``pages:docs`` …)."""
        return self.key("reconcile", doc_type, user)

    def scan_pending(self, doc_type: str, user: str) -> str:
        """Set while a scan of ``user`` and ``doc_type`` is queued and not yet started
        (string, expiring; :func:`ncindex.sync.reconcile.request_scans`)."""
        return self.key("reconcile", "pending", doc_type, user)

    @property
    def last_scans(self) -> str:
        """The last scans' summaries (hash: ``<user>:<doc_type>`` → JSON)."""
        return self.key("reconcile", "last")

    def lost_access(self, doc_type: str, user: str) -> str:
        """Documents of ``doc_type`` whose access ``user`` lost (hash: doc id → the user's path
        then, ``""`` without one): the next scans walk those folders whatever their etags say,
        and never hold the document back as unindexable (written by the indexer, read and
        cleared by the scans: :mod:`ncindex.sync.reconcile`)."""
        return self.key("reconcile", "lost", doc_type, user)

    def unconfirmed_grants(self, user: str) -> str:
        """The grants to ``user`` written and not yet confirmed by a look-up (hash: doc_key →
        JSON; :mod:`ncindex.index.grants`)."""
        return self.key("grants", "unconfirmed", user)

    def shares_seen(self, user: str) -> str:
        """The shares made with ``user`` that the last share poll saw (string: JSON object,
        share id → ``[file id, path, is a folder, attributes]``, and a fifth item, the paths
        it was moved from since, once its recipient moved it; :mod:`ncindex.sync.shares`)."""
        return self.key("shares", "seen", user)

    def missing_user(self, user: str) -> str:
        """When Nextcloud first said ``user`` does not exist (Unix seconds, expiring;
        :func:`ncindex.sync.deleted.check_deleted`)."""
        return self.key("missing-user", user)

    def refusal_asked(self, user: str) -> str:
        """The fingerprint of ``user``'s credential whose refusal Nextcloud's admin was last
        asked about (expiring; :meth:`ncindex.runtime.Services.account_refused`): asked once
        per refusal, not by each task refused at once."""
        return self.key("refusal-asked", user)

    def of_user(self, user: str, doc_types: Iterable[str]) -> tuple[list[str], list[str]]:
        """The keys that are configured account ``user``'s alone, for scans of ``doc_types``:
        ``(keys, patterns)`` — the keys themselves, and the ``SCAN`` ``MATCH`` patterns of
        those with a further part (the scan state's parts, a flush's taken actions, the
        debounce claims of ``user``'s tasks: ``<operation>:<user>:…``, as
        :mod:`ncindex.ingest.events` builds them; a claim of another user's whose key holds
        ``:<user>:`` matches too, which costs at most one duplicate task). A key family
        named by user belongs here. Not here: the scan lock (``user``'s scan holds it and
        lets it expire) and the fields of shared hashes (:attr:`last_scans`,
        :attr:`failing`, :attr:`refused_accounts` …)."""
        user_glob = _glob_escaped(user)
        keys = [
            self.gathered(user),
            self.gathered_flush(user),
            self.pending(user),
            self.skipped(user),
            self.truncated(user),
            self.first_indexing(user),
            self.first_indexed(user),
            self.notes_settings(user),
            self.missing_user(user),
            self.refusal_asked(user),
            self.unconfirmed_grants(user),
            self.shares_seen(user),
        ]
        patterns = [
            _glob_escaped(self.gathered_taken(user, "")) + "*",
            f"{_glob_escaped(self.debounce_prefix)}*:{user_glob}:*",
        ]
        for doc_type in doc_types:
            keys += [self.scan_pending(doc_type, user), self.lost_access(doc_type, user)]
            patterns.append(_glob_escaped(self.scan_state(doc_type, user)) + ":*")
        return keys, patterns

    @property
    def outage_parked(self) -> str:
        """Tasks that gave up while Nextcloud was unavailable (hash: task id → JSON
        ``{"name", "kwargs", "queue"}``), sent again once it answers."""
        return self.key("outage", "parked")

    def retrying_since(self, task_id: str) -> str:
        """When a task's first transient failure happened (Unix seconds)."""
        return self.key("retrying", task_id)

    def notes_settings(self, user: str) -> str:
        """The cached Notes app settings of ``user`` (JSON: ``path``, ``suffix``). Named apart
        from ``notes-settings``, which held the folder alone: a worker of the release before,
        still running during an upgrade, reads that key's value as a path."""
        return self.key("notes-prefs", user)

    @property
    def deck_stack_board_prefix(self) -> str:
        """Deck: the board of a stack, ``…:deck:stack-board:<stack id>``."""
        return self.key("deck", "stack-board", "")

    @property
    def auth_prefix(self) -> str:
        """Callers confirmed by Nextcloud recently: ``…:auth:<sha256 of the header>``."""
        return self.key("auth", "")

    @property
    def rcp_prefix(self) -> str:
        """RCP sessions: ``…:rcp:s:{<credential hash>}:<session id>``."""
        return self.key("rcp", "")

    def ui_session(self, session_hash: str) -> str:
        """A search-page session (hash: ``csrf``, ``authorization``, ``user``,
        ``poll_token``): ``…:ui-session:<sha256 of the cookie value>``."""
        return self.key("ui-session", session_hash)

    @property
    def ui_revoke(self) -> str:
        """App passwords of Login Flow credentials to delete in Nextcloud (a sorted set:
        member the ``Basic`` credential, score when it is due, Unix ms):
        ``…:ui-revoke`` (:mod:`ncindex.web.revocations`)."""
        return self.key("ui-revoke")

    @property
    def ui_revoke_owner(self) -> str:
        """Which session holds each credential of :attr:`ui_revoke` still (a hash: the
        credential → that session's key): ``…:ui-revoke-owner``."""
        return self.key("ui-revoke-owner")

    @property
    def ui_revoke_user(self) -> str:
        """The Nextcloud user id each credential of :attr:`ui_revoke` signed a session in as,
        when one did (a hash: the credential → that user id): ``…:ui-revoke-user``. A Login
        Flow's credential names the login name the user typed (an e-mail address, an LDAP
        login), which the webhook admin's user lookup does not know
        (:func:`ncindex.web.revocations.account_disabled`)."""
        return self.key("ui-revoke-user")

    @property
    def ratelimit_prefix(self) -> str:
        """flask-limiter's ``key_prefix`` (its keys are ``LIMITS:LIMITER/<prefix>/…``)."""
        return self.key("ratelimit")

    @property
    def limits_prefix(self) -> str:
        """The ``limits`` library's Redis key prefix (its default ``LIMITS``), after
        :attr:`broker_prefix` like Celery's keys."""
        return self.broker_prefix + "LIMITS"

    @property
    def refused_accounts(self) -> str:
        """The accounts Nextcloud answered 401 (hash: user id → JSON ``{"at", "where"}``)."""
        return self.key("accounts", "refused")

    @property
    def last_task_done(self) -> str:
        """When a worker last finished a task (Unix seconds)."""
        return self.key("metrics", "last_task_done")

    @property
    def waiting_since(self) -> str:
        """When a scrape first saw messages waiting (Unix seconds)."""
        return self.key("metrics", "waiting_since")


def _glob_escaped(text: str) -> str:
    """``text`` with the characters Redis glob patterns give a meaning (``*?[]\\``)
    escaped, so that it matches itself alone."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)
