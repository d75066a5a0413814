"""Which URLs may be offered to a browser as a link or opened in a window
(:func:`is_web_url`), and which hosts name this machine's loopback (:func:`is_loopback_host`)."""

from __future__ import annotations

import ipaddress
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


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (a URL's host name or an address to listen on) is loopback:
    ``localhost`` and its subdomains (RFC 6761 §6.3), ``127.0.0.0/8``, ``::1`` (an IPv6
    zone index ``%…`` ignored)."""
    if not host:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False
