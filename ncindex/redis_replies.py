"""Redis replies as text, in one place.

ncindex makes its Redis clients without ``decode_responses`` (``redis.Redis.from_url`` in
:mod:`ncindex.runtime` and the apps), so keys and values come back as ``bytes``; redis-py types
every reply as ``bytes | str`` because a client made with ``decode_responses=True`` returns
``str``. :func:`as_text` turns either into ``str``.
"""

from __future__ import annotations


def as_text(reply: bytes | str, errors: str = "strict") -> str:
    """``reply`` as text: bytes decoded as UTF-8 (``errors`` as for ``bytes.decode``: a
    ``"strict"`` decode raises ``UnicodeDecodeError`` on bytes that are not UTF-8), a ``str``
    returned as it is."""
    return reply if isinstance(reply, str) else reply.decode("utf-8", errors)
