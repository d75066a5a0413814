"""The exceptions ncindex raises, in one tree.

::

    NcindexError
    ├── TransientError            retry with backoff (Celery ``autoretry_for`` names this class)
    │   ├── NextcloudUnavailable  Nextcloud timed out, refused, or answered 5xx / 423 / 429
    │   └── StoreUnavailable      the vector store could not be reached or failed
    └── PermanentError            retrying cannot help
        ├── NextcloudAuthError    Nextcloud answered 401 (bad or revoked app password)
        ├── NotFound              the document is gone or the user cannot see it (404; Deck: 403)
        ├── NextcloudProtocolError Nextcloud answered something that is not its documented format
        │   ├── Forbidden         Nextcloud answered 403 (where the caller did not ask for NotFound)
        │   └── NextcloudRefused  an OCS call was refused with a reason (OCS 400: meta.message)
        ├── ExtractionError       a document's bytes could not be turned into text
        └── TooLarge              a document exceeds a configured size bound

Third-party exceptions (httpx, qdrant-client, redis) are translated at the boundary where
they are caught (``ncindex.nextcloud.http``, ``ncindex.store``); nothing above that layer
sees them.
"""

from __future__ import annotations


class NcindexError(Exception):
    """Base of every ncindex exception."""


class TransientError(NcindexError):
    """Raised when an operation failed for a reason that may pass; retry with backoff."""


class PermanentError(NcindexError):
    """Raised when an operation cannot succeed by being retried."""


class NextcloudUnavailable(TransientError):
    """Raised when Nextcloud times out, refuses the connection, or answers 5xx, 423 (the file
    is locked, e.g. while it is being uploaded or edited) or 429."""


class StoreUnavailable(TransientError):
    """Raised when the vector store cannot be reached or fails an operation."""


class NextcloudAuthError(PermanentError):
    """Raised when Nextcloud rejects the credentials (HTTP 401)."""


class NotFound(PermanentError):
    """Raised when a document does not exist or the user cannot see it (404; Deck: 403)."""


class NextcloudProtocolError(PermanentError):
    """Raised when a Nextcloud answer does not have its documented shape."""


class Forbidden(NextcloudProtocolError):
    """Raised when Nextcloud answers 403: the credentials are valid, the user may not do this."""


class NextcloudRefused(NextcloudProtocolError):
    """Raised when an OCS endpoint refuses a request with a reason (OCS 400, e.g.
    webhook_listeners: "<class> is not an event class compatible with webhooks");
    ``message`` is Nextcloud's ``meta.message``, ``status`` its ``meta.statuscode``."""

    def __init__(self, where: str, status: int, message: str) -> None:
        super().__init__(f"{where}: OCS {status}: {message}")
        self.status = status
        self.message = message


class ExtractionError(PermanentError):
    """Raised when a document's bytes cannot be turned into text."""


class TooLarge(PermanentError):
    """Raised when a document exceeds a configured bound (bytes, pages, characters)."""


def public_reason(exc: BaseException) -> str:
    """What a caller is told about a failed back end: what failed, never the exception's text,
    which may hold local paths, hosts or a header (log that instead). A model error names its
    model (``exc.model``) when it is known."""
    from ncindex.embedding.models import ModelError  # models imports this module

    if isinstance(exc, StoreUnavailable):
        return "the vector store is unavailable"
    if isinstance(exc, NextcloudUnavailable):
        return "Nextcloud is unavailable"
    if isinstance(exc, ModelError):
        model = f" {exc.model!r}" if exc.model else ""
        return f"this process cannot load the live model{model}"
    return "a back end is unavailable"
