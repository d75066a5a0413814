"""The bounded collector every extractor writes its text into (DESIGN §6, §8).

An extractor adds blocks (a slide, a sheet's heading, a row, a paragraph) one at a time and
stops when :meth:`Blocks.add` answers ``False`` (enough characters) or :meth:`Blocks.late`
answers ``True`` (the wall-clock budget is spent); either marks the text ``truncated``.
"""

from __future__ import annotations

import time


class Blocks:
    """Text blocks of one document, bounded by ``max_chars`` characters and ``max_seconds``
    seconds of wall-clock time from construction."""

    def __init__(self, max_chars: int, max_seconds: float) -> None:
        self.max_chars = max_chars
        self.deadline = time.monotonic() + max_seconds
        self.truncated = False
        self._parts: list[str] = []
        self._size = 0

    def add(self, text: str, sep: str = "\n\n") -> bool:
        """Append ``text`` (stripped; nothing when empty) after ``sep`` (a blank line: a new
        paragraph; ``"\\n"``: a new line of the same block). ``False`` once past
        ``max_chars`` characters: the caller stops, and the text is marked truncated."""
        text = text.strip()
        if text:
            if self._parts:
                self._parts.append(sep)
                self._size += len(sep)
            self._parts.append(text)
            self._size += len(text)
        if self._size > self.max_chars:
            self.truncated = True
            return False
        return True

    def room(self) -> int:
        """Characters that may still be added before ``max_chars`` is reached (0: none)."""
        return max(0, self.max_chars - self._size)

    def late(self) -> bool:
        """Whether the time budget is spent (then the text is marked truncated)."""
        if time.monotonic() <= self.deadline:
            return False
        self.truncated = True
        return True

    def seconds_left(self) -> float:
        """Seconds of the budget left (0 when spent)."""
        return max(0.0, self.deadline - time.monotonic())

    def text(self) -> str:
        """The blocks joined by their separators."""
        return "".join(self._parts)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) made one space."""
    return " ".join(text.split())
