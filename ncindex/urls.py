"""Which URLs may be offered to a browser as a link or opened in a window."""

from __future__ import annotations

from urllib.parse import urlsplit


def is_web_url(url: object) -> bool:
    """Whether ``url`` is a string holding an absolute ``http`` or ``https`` URL with a host,
    and no whitespace or control character (browsers drop some of them before reading the
    scheme, so ``" javascript:…"`` runs script). Anything else — ``javascript:``, ``data:``,
    scheme-relative ``//host/…``, a relative path — is not."""
    if not isinstance(url, str) or any(c <= " " or c == "\x7f" for c in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # an unreadable IPv6 literal or port
        return False
    return parts.scheme in ("http", "https") and bool(host)
