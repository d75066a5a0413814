"""Every exception ncindex raises, in two trees.

Failures of the work (Nextcloud, the store, Redis, a document)::

    NcindexError
    ├── TransientError            retry with backoff (Celery ``autoretry_for`` names this class)
    │   ├── NextcloudUnavailable  Nextcloud timed out, refused, or answered 5xx / 423 / 429
    │   ├── StoreUnavailable      the vector store could not be reached or failed
    │   ├── BrokerUnavailable     Redis or the broker did not take a task (nothing acknowledged)
    │   ├── SearchUnavailable     the query could not be embedded at all
    │   ├── LockBusy              another task holds the document's lock
    │   ├── StaleEntry            a download does not match the entry it was looked up by
    │   ├── FileUnavailable       one file's bytes cannot be opened now (its GET: 423, 503)
    │   └── StorageUnavailable    one folder's storage cannot be reached now (its PROPFIND: 503)
    ├── PermanentError            retrying cannot help
    │   ├── NextcloudAuthError    Nextcloud answered 401 (bad or revoked app password)
    │   │   ├── AccountDisabled   WebDAV refused the login of a disabled account (503)
    │   │   └── AccountHeld       not sent: Nextcloud refused this account's credential lately
    │   ├── Unauthenticated       a caller sent no usable credentials, or Nextcloud refused them
    │   ├── Forbidden             valid credentials, access refused (403; Notes ``"error": true``)
    │   ├── NextcloudRefused      an OCS call was refused with a reason (OCS 400: ``meta.message``)
    │   ├── NotFound              the document is gone or the user cannot see it (404; Deck: 403)
    │   │   └── FileGone          a file's download answered 404 and it is gone by id too
    │   ├── ArchivedCard          a Deck card that exists but is archived (not indexed)
    │   ├── DocumentNotFound      the index holds no such document the caller can read
    │   ├── NextcloudProtocolError Nextcloud answered something that is not its documented format
    │   ├── ExtractionError       a document's bytes could not be turned into text
    │   ├── TooLarge              a document exceeds a configured size bound
    │   ├── ModelError            the offline models cannot be installed or loaded
    │   ├── ReindexError          a model-change step does not apply to the current pointers
    │   └── RedisTooOld           the Redis found is older than 7.0
    └── RpcError                  an RCP/1 error answer (``code``, ``message``, ``data``)

Bad input from a caller (a webhook delivery, a search, a command line) — the second root,
a ``ValueError``, each with a machine-readable ``code`` and the offending ``field``::

    InputError
    ├── EnvelopeError             a webhook body not shaped as Nextcloud's (code invalid_envelope)
    ├── FilterError               a search filter or filter parameter that cannot be used
    ├── ChunkOutOfRange           a context request past a document's last chunk
    └── UnsupportedDocType        a scan asked for a doc type that has no scanner

A process's configuration (``NCINDEX_*``) that does not validate raises
:class:`ncindex.settings.SettingsError` (a ``ValueError``), kept beside the settings, which sit
below this module.

Third-party exceptions (httpx, qdrant-client, redis) are translated at the boundary where they
are caught (:mod:`ncindex.nextcloud.client`, :mod:`ncindex.store`); nothing above that layer
sees them — except ``redis.RedisError``, which the Redis callers handle themselves, and its
subclass :class:`~ncindex.redis_breaker.RedisSkipped` (a call the open circuit breaker did not
make), which is one so that they need no second ``except``. The HTTP answer of each of these
classes is one table, :data:`ncindex.web.problems.PROBLEMS`. The web layer's own is an HTTP
exception: :class:`ncindex.web.problems.UnreadableBody` (werkzeug's ``BadRequest``, a request
body that could not be read whole).
"""

from __future__ import annotations

from typing import Any, Literal


class NcindexError(Exception):
    """Base of every ncindex exception other than :class:`InputError`."""


class TransientError(NcindexError):
    """Raised when an operation failed for a reason that may pass; retry with backoff."""


class PermanentError(NcindexError):
    """Raised when an operation cannot succeed by being retried."""


# --- transient -----------------------------------------------------------------------------


class NextcloudUnavailable(TransientError):
    """Raised when Nextcloud times out, refuses the connection, or answers 5xx, 423 (the file
    is locked, e.g. while it is being uploaded or edited) or 429. ``retry_after`` is the
    answer's ``Retry-After`` in seconds (``None`` without one); ``maintenance`` is true for
    Nextcloud's maintenance mode (503 with ``X-Nextcloud-Maintenance-Mode: 1``);
    ``unreachable`` is true when no HTTP answer came at all — the connection refused or reset,
    no answer in ``http_timeout`` seconds (:mod:`ncindex.nextcloud.client`) —: unlike an error
    answer, which is one request's, the next request is likely to wait as long for nothing.
    The three are ``False``/``None`` in an instance rebuilt from its message alone (pickle)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        maintenance: bool = False,
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.maintenance = maintenance
        self.unreachable = unreachable


class StoreUnavailable(TransientError):
    """Raised when the vector store cannot be reached or fails an operation."""


class BrokerUnavailable(TransientError):
    """Raised when the broker or Redis did not take a task; nothing was acknowledged."""


class SearchUnavailable(TransientError):
    """Raised when the query cannot be embedded at all (both halves, or the one asked for)."""


class LockBusy(TransientError):
    """Raised when another task holds a document's lock; the task retries later."""


class StaleEntry(TransientError):
    """Raised when a file's download does not match the entry it was looked up by (a body
    of another length than the entry's size, or a 404 for a file that moved meanwhile); the
    task retries and looks the file up again."""


class FileUnavailable(TransientError):
    """Raised when Nextcloud answers a file's download 423 or 503 (not maintenance mode):
    nextcloud/server ``apps/dav/lib/Connector/Sabre/File.php`` ``get`` answers ``FileLocked``
    (423) for a ``LockedException`` and ``ServiceUnavailable`` (503) when the file cannot be
    opened (``fopen`` false: "Could not open file", the file cache naming a file the storage
    does not hold), its encryption is not ready (``GenericEncryptionException``) or its
    storage is not available. That file, not Nextcloud, is what is unavailable: the task
    retries, but is not kept to be sent again as an outage's are (a file that stays
    unopenable would be sent again after every task that succeeds)."""


class StorageUnavailable(TransientError):
    """Raised when Nextcloud answers a folder's ``PROPFIND`` 503
    ``Sabre\\DAV\\Exception\\ServiceUnavailable`` "Storage is temporarily not available"
    (not maintenance mode): nextcloud/server ``apps/dav/lib/Connector/Sabre/ObjectTree.php``
    ``getNodeForPath`` throws it for a ``StorageNotAvailableException`` and for a mount whose
    storage is a ``FailedStorage`` — an external storage (files_external) whose server is
    away or whose credentials are refused, a federated share whose server cannot be reached.
    That storage, not Nextcloud, is what is unavailable: a walk skips the folder and keeps
    what is indexed below it; a task retries, but is not held as an outage's are."""


# --- permanent -----------------------------------------------------------------------------


class NextcloudAuthError(PermanentError):
    """Raised when Nextcloud rejects the configured credentials (HTTP 401)."""


class AccountDisabled(NextcloudAuthError):
    """Raised when WebDAV refused the login of a disabled account (HTTP 503, not 401:
    nextcloud/server ``apps/dav/lib/Connector/Sabre/Auth.php`` ``check`` wraps the
    ``LoginException`` of ``lib/private/User/Session.php`` ``completeLogin`` in
    ``ServiceUnavailable``): the credential is right, so its app password is not known to be
    gone — enabled again, the account logs in with it (:func:`refused_with_401` is false)."""


class AccountHeld(NextcloudAuthError):
    """Raised instead of sending a configured account's credential that Nextcloud refused
    lately (:meth:`ncindex.runtime.Services.account`): nothing was asked, so it is no new refusal
    to record. ``since``: when Nextcloud last refused it, ``until``: when it is sent again (Unix
    seconds), ``refusal``: the refused request and Nextcloud's answer, as recorded
    (:func:`ncindex.accounts.record_refused`), ``times``: the refusals of it in a row; each
    ``None`` when not given (an instance rebuilt from its message alone, as pickle does)."""

    def __init__(
        self,
        message: str,
        *,
        since: float | None = None,
        until: float | None = None,
        refusal: str | None = None,
        times: int | None = None,
    ) -> None:
        super().__init__(message)
        self.since = since
        self.until = until
        self.refusal = refusal
        self.times = times


class Unauthenticated(PermanentError):
    """Raised when a caller's ``Authorization`` header is missing, malformed, or not
    confirmed by Nextcloud (answered 401 to the search API, ``-32001`` over RCP)."""


class Forbidden(PermanentError):
    """Raised when Nextcloud answers 403: the credentials are valid, the user may not do this
    (an access-control rule; where a 403 means "not yours", callers ask for :class:`NotFound`);
    also for a note the Notes API answers with ``"error": true`` (its content is unreadable) and
    a file whose download answers 404 while it is listed unreadable (Sabre ``File::get``)."""


class NextcloudRefused(PermanentError):
    """Raised when an OCS endpoint refuses a request with a reason (OCS 400, e.g.
    webhook_listeners: "<class> is not an event class compatible with webhooks"): a documented
    answer, so not a :class:`NextcloudProtocolError`. ``message`` is Nextcloud's
    ``meta.message``, ``status`` its ``meta.statuscode``."""

    def __init__(self, where: str, status: int, message: str) -> None:
        super().__init__(f"{where}: OCS {status}: {message}")
        self.status = status
        self.message = message


class NotFound(PermanentError):
    """Raised when a document does not exist or the user cannot see it (404; Deck: 403)."""


class FileGone(NotFound):
    """Raised when a file's download answered 404 and looking it up by id again confirms
    that the user can no longer see it."""


class ArchivedCard(PermanentError):
    """Raised for a Deck card that exists but is archived: not indexed, so it is removed."""


class DocumentNotFound(PermanentError):
    """Raised by ``SearchService.context`` when the caller cannot read the document."""


class NextcloudProtocolError(PermanentError):
    """Raised when a Nextcloud answer does not have its documented shape."""


class ExtractionError(PermanentError):
    """Raised when a document's bytes cannot be turned into text."""


class TooLarge(PermanentError):
    """Raised when a document exceeds a configured bound (bytes, pages, characters)."""


class ModelError(PermanentError):
    """Raised when the offline models cannot be installed or loaded (a package or file is
    missing, a file is corrupt, or the model does not have the expected shape). ``model`` names
    the model when it is known (the message may hold local paths; the model's name does not)."""

    def __init__(self, message: str, model: str | None = None) -> None:
        super().__init__(message)
        self.model = model


class ReindexError(PermanentError):
    """Raised when a reindex step does not apply to the current pointers (e.g. a build while
    another second model exists, a switch back without a standby)."""


class RedisTooOld(PermanentError):
    """Raised by ``ingest.queueing.check_redis`` for a Redis older than 7.0 (the debounce
    claim needs ``SET`` with ``NX`` and ``GET`` together)."""


class RpcError(NcindexError):
    """An RCP/1 (JSON-RPC) error to answer with: ``code`` (``rcp.Errc``), ``message``,
    ``data``."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


# --- input ---------------------------------------------------------------------------------


class InputError(ValueError):
    """Base of the errors in a caller's input: ``code`` (machine-readable, the problem's
    ``code``), ``field`` (the offending input's path) and ``detail`` (for a person)."""

    def __init__(self, code: str, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.code = code
        self.field = field
        self.detail = detail


class EnvelopeError(InputError):
    """Raised for a webhook envelope that is not valid; ``field`` is the dotted path of the
    offender, ``message`` (also ``detail``) what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__("invalid_envelope", field, message)
        self.message = message


FilterCode = Literal["invalid_filter", "unknown_field", "unsupported_operator", "invalid_value"]


class FilterError(InputError):
    """Raised for a filter or filter parameter that cannot be used.

    ``code`` is one of ``invalid_filter`` (the tree's shape), ``unknown_field`` (a field not
    advertised), ``unsupported_operator`` (an operator unknown, or not valid for the field),
    ``invalid_value`` (a value of the wrong type or out of range); ``field`` is the path of
    the offending input (``filter.or[0].value``, ``modified_after``); ``option`` is the
    operator when it is not one of the advertised operators at all (RCP maps that to -32005).
    """

    def __init__(
        self, code: FilterCode, field: str, detail: str, *, option: str | None = None
    ) -> None:
        super().__init__(code, field, detail)
        self.code: FilterCode = code
        self.option = option


class ChunkOutOfRange(InputError):
    """Raised by ``SearchService.context`` for a ``chunk_index`` past the document's last
    chunk."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid_value", "chunk_index", detail)


class UnsupportedDocType(InputError):
    """Raised when a scan is asked for a doc type that has no scanner yet."""

    def __init__(self, doc_type: str) -> None:
        super().__init__("invalid_value", "doc_type", f"no reconcile scanner for {doc_type} yet")
        self.doc_type = doc_type


RETRY_AFTER_SECONDS = 5
"""How long a caller is told to wait before trying again after a back end failed for a reason
that may pass (a :class:`TransientError`: the store, Nextcloud or Redis; and a model this
process cannot load), seconds: the search API's ``Retry-After``, RCP's ``retryAfterMs``, and
the MCP server's ``Retry-After`` and ``retry_after`` (its refusals' and its tool errors')."""


def refused_with_401(exc: BaseException) -> bool:
    """Whether ``exc`` says Nextcloud answered a caller's credential HTTP 401: a
    :class:`NextcloudAuthError`, or the :class:`Unauthenticated` raised from one
    (``ncindex.web.auth.resolve_caller``). Its app password is then no more as far as ncindex
    can tell, and any request signed in with it — its delete too — is one more refused login:
    nextcloud/server ``lib/private/User/Session.php`` ``logClientIn`` finds no token
    (``isTokenPassword``), the password login fails and ``handleLoginFailed`` counts it
    against the sender's address (``Throttler::registerAttempt``). Two 401s are not that:

    * a disabled account's: OCS answers its login 401 as well (``ocs/v1.php`` catches
      ``completeLogin``'s ``LoginException`` "User disabled" as OCS 997), uncounted, and the
      app password works again once the account is enabled. The answer does not tell it
      apart; the webhook admin's lookup does
      (:func:`ncindex.web.revocations.account_disabled`), which the search page asks before
      it forgets a credential refused so;
    * an app password Nextcloud marked invalid because the user's login password changed
      outside it (``Session::checkTokenCredentials`` → ``PublicKeyTokenProvider::
      markPasswordInvalid``; ``getToken`` then throws ``TokenPasswordExpiredException``,
      which ``logClientIn`` returns on without ``handleLoginFailed``): 401, uncounted, on
      OCS and WebDAV alike, and valid again at the user's next web login
      (``PublicKeyTokenProvider::updatePasswords`` clears ``password_invalid``). Nothing
      ncindex can see tells it from a revoked one — the same 401 and body (``ocs/v1.php``
      "Unauthorised"; Sabre's "Username or password was incorrect" from ``Auth::
      validateUserPass``), ``enabled`` true to the admin — so the search page keeps such a
      credential for one more delete a day later
      (:data:`ncindex.web.revocations.REFUSED_RETRY_SECONDS`), which deletes one revived by
      a login meanwhile and costs a revoked one one more counted login, then drops it.

    False for every other refusal (a 403, a 404, an answer in no known shape: the app password
    may stand), for an :class:`AccountDisabled` (WebDAV's 503) and an :class:`AccountHeld`
    (nothing was asked)."""
    refusal = exc.__cause__ if isinstance(exc, Unauthenticated) else exc
    return isinstance(refusal, NextcloudAuthError) and not isinstance(
        refusal, AccountDisabled | AccountHeld
    )


def public_reason(exc: BaseException) -> str:
    """What a caller is told about a failed back end: what failed, never the exception's text,
    which may hold local paths, hosts or a header (log that instead). A model error names its
    model (``exc.model``) when it is known."""
    if isinstance(exc, StoreUnavailable):
        return "the vector store is unavailable"
    if isinstance(exc, NextcloudUnavailable):
        return "Nextcloud is unavailable"
    if isinstance(exc, BrokerUnavailable):
        return "Redis is unavailable"
    if isinstance(exc, ModelError):
        model = f" {exc.model!r}" if exc.model else ""
        return f"this process cannot load the live model{model}"
    return "a back end is unavailable"
