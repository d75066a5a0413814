"""Path globs of the indexing rules (``NCINDEX_INDEX_INCLUDE_GLOBS``,
``NCINDEX_INDEX_EXCLUDE_GLOBS``; :mod:`ncindex.sources.eligibility`).

A glob is matched against a path in the user's own view, relative to the files root and
starting with ``/`` (``/Projects/2026/spec.pdf``): ``**`` matches across folders, ``*`` and
``?`` within one segment, ``[abc]`` / ``[!abc]`` a character class (``[a-z]`` a range). A glob
that does not start with ``/`` matches at any depth (``*.tmp`` is ``/**/*.tmp``), and ``/**/``
also matches a single ``/`` (``/**/x.md`` matches ``/x.md``). A ``[`` without its ``]`` is
itself. :class:`~ncindex.settings.Settings` compiles every glob it is given, so one that
cannot be compiled (a reversed range such as ``[z-a]``) is refused there rather than failing
each file's classification in the workers.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a path glob (module docstring) into an anchored regular expression; raises
    ``re.error`` for a character class that is no valid one (``[z-a]``)."""
    if not pattern.startswith("/"):
        pattern = "/**/" + pattern
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("/**/", i):
            out.append("(?:/.*)?/")
            i += 4
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace(r"\-", "-")
            out.append(f"[^/{body}]" if negate else f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(path: str, pattern: str) -> bool:
    """Whether ``path`` (``/a/b.md``) matches ``pattern`` (module docstring)."""
    return glob_regex(pattern).match(path) is not None
