"""Token counts of a text's substrings from one encoding of the whole text (DESIGN §8).

The splitter sizes every candidate chunk by tokenising it. A candidate starts at the chunk's
start and is about a chunk long, but a paragraph on one line gives the splitter no boundary
between sentences and chunk, so it tries several candidates per chunk, each tokenised from
its start: measured on SciFact prose, 15–23 characters tokenised per character of text on one
line (7 when wrapped), the more the longer the text.

:class:`SubstringTokens` encodes the whole text once — some 32 K characters at a time, cut
before a space, through ``encode_batch``, which releases the GIL (one ``encode`` of a 1.6 MB
line held it 1.7 s, stalling a search thread of the same process, and took 200 MB) — and answers
each candidate from the token offsets of that encoding, by bisection. The answer is the same as
tokenising the candidate alone when neither end of the candidate falls strictly inside one
*word* of the encoding (a pre-token: for BERT's ``BertPreTokenizer`` a run between whitespace
and punctuation, or one punctuation or CJK character): WordPiece tokenises each word alone, and
BERT's normaliser works character by character — clean-up, CJK spacing and lower-casing per
character, accent stripping by NFD then dropping nonspacing marks — so a word's tokens do not
depend on the text around it (huggingface/tokenizers ``tokenizers/src/normalizers/bert.rs``
``BertNormalizer::normalize``, ``tokenizers/src/tokenizer/normalizer.rs``
``NormalizedString::lowercase``, ``tokenizers/src/pre_tokenizers/bert.rs``). NFD reorders a run
of combining marks by combining class, so a kept spacing mark (U+1D165, say) can move before a
dropped nonspacing mark and take the dropped mark's place in the offsets, outside its word's
span there: a cut just before a character whose decomposition starts with a combining mark is
counted as a cut inside a word. A candidate cut inside a word — the splitter's character level,
an unbreakable string — or one whose place in the text is not found is tokenised alone, as
before. Property tests check the equality against tokenising each piece
(``tests/text/test_token_spans.py``) and the chunks against the splitter's own tokenizer sizer
(``tests/text/test_chunking.py``).
"""

from __future__ import annotations

import re
import string
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from typing import TYPE_CHECKING

from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# Where the splitter's next candidates start and end: its binary search tries candidates from
# one start, its overlap search candidates to one end, and the next chunk starts at one of
# those; a few recent places find nearly every candidate without a search.
_RECENT = 32
# Characters of the text encoded at a time (then cut where a word starts, below)
_SEGMENT = 32_768
# Where a segment may end (before one of these; see ``SubstringTokens._read_words``)
_CUTS = " " + string.punctuation
# Characters the normaliser deletes that may lie between a cut and the character it checks
_DELETED_RUN = 32


class SubstringTokens:
    """Counts of ``tokenizer``'s tokens (no special tokens) in substrings of ``text``.

    Call it with a substring of ``text``: the number of tokens
    ``tokenizer.encode(piece, add_special_tokens=False)`` gives. The tokenizer must not
    truncate or pad. A tokenizer other than BERT's (``BertNormalizer`` or none,
    ``BertPreTokenizer``, ``WordPiece``) tokenises every piece alone. Not thread-safe: one
    instance per text and thread.
    """

    def __init__(self, tokenizer: Tokenizer, text: str) -> None:
        self._tokenizer = tokenizer
        self._text = text
        self._recent_starts: deque[int] = deque(maxlen=_RECENT)
        self._recent_ends: deque[int] = deque(maxlen=_RECENT)
        # per word of the text: its first and last character, and the number of tokens of the
        # words before it (``_before[len(words)]`` is the total)
        self._starts = array("q")
        self._ends = array("q")
        self._before = array("q", [0])
        self._usable = (
            isinstance(tokenizer.normalizer, BertNormalizer | None)
            and isinstance(tokenizer.pre_tokenizer, BertPreTokenizer)
            and isinstance(tokenizer.model, WordPiece)
        )
        if self._usable:
            self._read_words(text)

    def _read_words(self, text: str) -> None:
        """Encode ``text`` once, a segment at a time, and keep its words' places and token
        counts. A segment ends before a space, an ASCII punctuation mark or a CJK ideograph
        (U+4E00-U+9FFF) that no special token holds: each is kept by the normaliser as itself,
        a starter NFD does not reorder across, and a word of its own or a pre-tokenizer split,
        so the segments' words are the text's. Each is encoded without the GIL
        (``encode_batch``), and only one segment's encoding is held at a time (a whole 1.6 MB
        line's took 200 MB, 400,000 CJK characters' 230 MB)."""
        special = {
            c for t in self._tokenizer.get_added_tokens_decoder().values() for c in t.content
        }
        cuts = "".join(c for c in _CUTS if c not in special)
        ideographs = "" if any("\u4e00" <= c <= "\u9fff" for c in special) else "\u4e00-\u9fff"
        cut_before = re.compile(f"[{re.escape(cuts)}{ideographs}]") if cuts or ideographs else None
        begin = 0
        while begin < len(text):
            found = cut_before.search(text, begin + _SEGMENT) if cut_before else None
            cut = found.start() if found else len(text)
            if not self._read_segment(text[begin:cut], begin):
                self._usable = False  # not words one after another: count nothing from spans
                return
            begin = cut

    def _read_segment(self, segment: str, shift: int) -> bool:
        """Add the words of ``segment``, which starts at ``shift`` in the text; ``False`` when
        its tokens are not words one after another."""
        [encoding] = self._tokenizer.encode_batch([segment], add_special_tokens=False)
        last_word: int | None = None
        for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
            start, end = start + shift, end + shift
            if word is not None and word == last_word:
                self._ends[-1] = max(self._ends[-1], end)
                self._before[-1] += 1
                continue
            if word is None or start >= end or (self._ends and start < self._ends[-1]):
                return False
            self._starts.append(start)
            self._ends.append(end)
            self._before.append(self._before[-1] + 1)
            last_word = word
        return True

    def __call__(self, piece: str) -> int:
        """Tokens in ``piece`` (any string; one not found in the text is tokenised alone)."""
        if self._usable:
            start = self._locate(piece)
            if start is not None:
                end = start + len(piece)
                self._recent_starts.append(start)
                self._recent_ends.append(end)
                count = self._count(start, end)
                if count is not None:
                    return count
        # encode_batch lets other threads run meanwhile (a search in the same process)
        [encoding] = self._tokenizer.encode_batch([piece], add_special_tokens=False)
        return len(encoding.ids)

    def _locate(self, piece: str) -> int | None:
        """A place of ``piece`` in the text (any one: the count depends on the words there,
        which :meth:`_count` checks), tried first where recent pieces started or ended, then
        searched for near them (``None`` when not there: the piece is then tokenised)."""
        text = self._text
        for start in reversed(self._recent_starts):
            if text.startswith(piece, start):
                return start
        for end in reversed(self._recent_ends):
            start = end - len(piece)
            if start >= 0 and text.startswith(piece, start):
                return start
        # a bounded search: the work per piece stays in proportion to the pieces' lengths
        low, high = 0, len(text)
        if self._recent_starts:
            low = max(0, min(self._recent_starts) - 2 * len(piece))
            high = max(self._recent_ends) + 2 * len(piece)
        found = text.find(piece, low, high)
        return found if found >= 0 else None

    def _count(self, start: int, end: int) -> int | None:
        """Tokens of the words within ``text[start:end]``; ``None`` when ``start`` or ``end``
        falls strictly inside a word (the piece then tokenises differently)."""
        if self._before_mark(start) or self._before_mark(end):
            return None
        starts, ends = self._starts, self._ends
        left = bisect_right(starts, start) - 1
        if left >= 0 and starts[left] < start < ends[left]:
            return None
        right = bisect_left(starts, end)  # words starting before ``end``
        if right > 0 and starts[right - 1] < end < ends[right - 1]:
            return None
        first = bisect_left(starts, start)
        return max(0, self._before[right] - self._before[first])

    def _before_mark(self, place: int) -> bool:
        """Whether NFD may reorder characters across a cut at ``place``: the first character
        from ``place`` on that the normaliser keeps decomposes to start with a combining mark.
        Characters BERT's ``clean_text`` deletes (categories C* but tab and line breaks,
        U+FFFD) are skipped, up to ``_DELETED_RUN``; one unassigned in Python's Unicode
        (``Cn``, perhaps a mark in the tokenizer's newer tables) counts as a mark."""
        text = self._text
        for char in text[place : place + _DELETED_RUN] if place > 0 else ():
            category = unicodedata.category(char)
            if category == "Cn":
                return True
            if char == "\ufffd" or (category[0] == "C" and char not in "\t\n\r"):
                continue
            return unicodedata.combining(unicodedata.normalize("NFD", char)[0]) != 0
        return place > 0 and place + _DELETED_RUN <= len(text)
