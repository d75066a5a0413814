"""The analysis chain of the BM25 half: text → terms → BM25 sparse vectors (issue 19).

English stemming and stop words; tokens, accent folding, elision and CJK bigrams for the
other languages of a Nextcloud (German, French, Italian, Chinese, Japanese, Korean notes).
Documents and queries go through the same chain, so a word meets itself:

1. **Tokens** (:func:`terms`; with offsets, :func:`occurrences`): runs of letters and digits,
   lowercased, with these kept whole because people search for them as they are written
   (each rule has a unit test in ``tests/embedding/test_analyzer.py``):

   - e-mail addresses (``jane.doe@example.org``);
   - a word ending in ``++`` or ``#`` (``C++``, ``C#``, ``F#``, ``g++``);
   - a name starting with a dot after a space (``.NET``, ``.gitignore``);
   - words joined by ``-``, ``.`` or ``_`` with no space (``IL-6``, ``COVID-19``, ``UTF-8``,
     ``x86-64``, ``x86_64``, version numbers ``2.1.0``, file names ``report.pdf``).

   A whole e-mail address, dotted name or joined word is one term *and* each of its parts is a
   term too (``IL-6`` → ``il-6``, ``il``, ``6``), as Lucene's ``WordDelimiterGraphFilter`` with
   ``preserveOriginal`` does, so a search for ``covid`` still finds ``COVID-19``. Words with
   apostrophes stay one token (``don't``); a trailing possessive ``'s`` goes (Snowball's step 0).

   Since ``en-3``, as Lucene's filters do (the code is this module's own):

   - **elision** (Lucene's ``ElisionFilter`` with the French and Italian default articles,
     :data:`ELISION_ARTICLES`): ``l'église`` → ``église``, ``dell'arte`` → ``arte`` (then stemmed);
     ``don't`` and ``o'clock`` stay whole;
   - **accent folding, original kept** (Lucene's ``ASCIIFoldingFilter`` with
     ``preserveOriginal``): a token with letters that fold to ASCII gives its own term and the
     folded one at the same offsets (``München`` → ``münchen``, ``munchen``; ``Straße`` →
     ``straße``, ``strass``, the stem of ``strasse``), so ``munchen`` finds ``München``
     and ``München`` finds ``Munchen``. The two forms stand at one position: in a query they
     share the word's weight (½ each, as Lucene's ``SynonymQuery``), in a document its length
     counts them once (BM25's discounted overlaps);
   - **CJK bigrams** (Lucene's ``CJKBigramFilter``): a run of Han, Hiragana, Katakana or
     Hangul is a token of its own, cut where the script changes (``iPhone用户`` → ``iphon``,
     ``用户``), and gives its overlapping bigrams (``北京烤鸭`` → ``北京``, ``京烤``, ``烤鸭``);
     a lone character is its own term. So a query of two or more characters finds them inside
     a longer run; a one-character query finds only that character standing alone, as in
     Lucene.

   Text of ASCII letters, digits and punctuation gives the terms of ``en-2`` (but for the
   elided articles: ``c'mon`` → ``mon``).

   Since ``en-4``, a combining mark stays in the word it is written in, as UAX #29's word
   breaks keep it (Python's ``\\w`` does not match marks): the vowel signs and viramas of
   Devanagari and other Indic scripts (``हिन्दी`` is one term, not three consonants), Hebrew
   points, and accents written as a letter and a combining mark; and a word is indexed composed
   (NFC), so ``Mu\\u0308nchen`` (decomposed, as some PDFs and macOS text have it) gives
   ``münchen`` and ``munchen`` as ``München`` does. Text without marks gives the terms of
   ``en-3``.

   Since ``en-5``, a word is read without the invisible format characters inside it (UAX #29's
   WB4 ignores them there; :func:`_is_ignored_format`): a soft hyphen (``Rech\u00adnung``),
   a zero-width joiner or non-joiner, a word joiner, a bidi control no longer cuts a word in
   two, and the term is the word without them, so ``Rechnung`` finds it. And a word holding a
   German umlaut gets one more form, the umlaut spelt out (:data:`_UMLAUTS`: ``Müller`` →
   ``müller``, ``muller``, ``mueller``), so ``Mueller`` finds ``Müller`` and the other way
   round. Text without such characters and umlauts gives the terms of ``en-4``.

   Since ``en-6``, half-width katakana (U+FF66–U+FF9F, as older Japanese systems, bank
   statements and receipts write them) are read full-width before the bigrams, as Lucene's
   ``CJKWidthFilter`` does (:func:`_widened`): ``ｶﾀｶﾅ`` gives the terms of ``カタカナ``, so
   either finds the other. And a Greek word with accents (tonos, dialytika, the breathings of
   polytonic text) gets its form without them as its folded one (:data:`_GREEK`), so
   ``ΑΘΗΝΑ``, written without them as Greek capitals are, finds ``Αθήνα``. Text without such
   katakana and Greek gives the terms of ``en-5``.

   Since ``en-7``, three ways people write a word the way they type it meet it:

   - a **zero-width space** (U+200B, as web pages' ``<wbr>`` and PDFs leave it) inside a word
     is read as the other format characters are, the word without it (``Rech\u200bnung`` is
     ``rechnung``), but where a letter of Thai, Lao, Khmer, Myanmar or another script written
     without spaces stands beside it: there it separates words, as UAX #29 has it
     (:func:`_separates`);
   - a compound of **words joined by hyphens** alone (no digit, ``.`` or ``_``) also gives the
     word without them (:func:`_joined`, Lucene's ``WordDelimiterGraphFilter`` with
     ``catenateWords``), stemmed, at the compound's place beside its whole form: ``E-Mail`` →
     ``e-mail``, ``email``, ``e``, ``mail``, so ``email`` finds ``E-Mail`` and ``e-mail``, and
     ``e-mail`` finds ``email`` (``co-operate`` meets ``cooperation``, ``re-index``
     ``reindex``). The joined form shares the whole form's position, as a folded form does: a
     document's length counts the two once, and in a query they share the compound's weight
     (½ each), so a hyphenated word does not count twice. ``IL-6`` and ``x86-64`` are not
     joined, and a longer compound is joined whole only (``E-Mail-Adresse`` → ``emailadress``,
     not ``email``). The hyphen (U+2010) and the non-breaking hyphen (U+2011) join words as
     ``-`` does, and are ``-`` in the whole form;
   - every **apostrophe** form is ``'`` (:data:`_APOSTROPHES`: ``’``, ``‘``, the modifier
     letter ``ʼ``, the prime ``′``, the full-width ``＇``, the acute ``´`` of German keyboards),
     so ``it‘s``, ``O’Neill``, ``OʼNeill`` and ``O'Neill`` give the same terms, elision
     included (``lʼéglise`` → ``église``).

   Text without zero-width spaces, hyphenated words and those apostrophes gives the terms of
   ``en-6``.
2. **Stemming**: the Snowball English stemmer (Porter2, through ``PyStemmer``, the Snowball
   project's own C build) for tokens made of letters only; tokens holding digits or symbols
   (``3d``, ``il-6``, ``c++``) are left as they are.
3. **Stop words**: Lucene's English stop set (33 words, :data:`STOP_WORDS`), compared *after*
   stemming against the stems of the set, so every form of a word is kept or dropped alike
   (the 1,333-word list used before dropped ``system`` but indexed ``systems``).
4. **Weights**: documents get the term-frequency half of Okapi BM25,
   ``tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len))`` (:data:`K1`, :data:`B`, :data:`AVG_LEN`),
   the IDF half being Qdrant's ``Modifier.IDF`` on the sparse vector; queries get each term's
   count in the query (query term frequency, as Lucene's BM25 sums over repeated terms).
   A term's index is ``abs(murmur3_32(term))`` (``mmh3.hash``, signed, seed 0), the ids
   fastembed's ``Qdrant/bm25`` gives, so plain words of an index built before keep their ids.

The chain has a version, :data:`ANALYZER_VERSION`, written into every point's payload
(``analyzer``); changing the chain means a new version and a rebuild through
``ncindex reindex --analyzer`` (README, "The BM25 analyzer").
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import mmh3

from ncindex.store.port import SparseVector

ANALYZER_VERSION = "en-7"
"""The analysis chain's version, stored in each point's ``analyzer`` payload field. ``en-1``
was fastembed's ``Qdrant/bm25`` with the 1,333-word ``stop-words`` list; ``en-2`` the chain
without elision, accent folding and CJK bigrams; ``en-3`` the chain that split words at
combining marks; ``en-4`` the chain that split words at format characters (a soft hyphen)
and did not spell out umlauts; ``en-5`` the chain that read half-width katakana as they are
and did not fold Greek accents; ``en-6`` the chain that split words at a zero-width space,
did not join hyphenated words and read only ``'`` and ``’`` as apostrophes.
``en`` names the stemmer and stop words, still English. An older point answers every query
term the current chain shares with it (all of plain ASCII text but the joined forms of
hyphenated words, and a word's own form beside its folded one) until ``ncindex reindex
--analyzer`` rewrites it; what it lacks is :data:`LACKING`."""

LACKING = {
    "en-2": "folded forms, words after a French or Italian elision, CJK bigrams",
    "en-3": "words holding combining marks (Hindi and other Indic scripts, pointed Hebrew, "
    "decomposed accents)",
    "en-4": "words holding invisible format characters (soft hyphens, zero-width joiners), "
    "German umlauts spelt out (Mueller for Müller)",
    "en-5": "half-width katakana as full-width (ｶﾀｶﾅ for カタカナ), Greek words without "
    "their accents (ΑΘΗΝΑ for Αθήνα)",
    "en-6": "words holding a zero-width space, hyphenated words joined (email for E-Mail), "
    "words with apostrophes other than ' and ’ (O‘Neill, OʼNeill)",
}
"""What a point of each older version lacks of the current chain's terms, version by version:
a point of ``en-2`` lacks what ``en-2`` and every later entry name."""

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
"""Lucene's English stop set: ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` of Apache Lucene
(lucene/analysis/common, org.apache.lucene.analysis.en.EnglishAnalyzer), 33 words."""

K1 = 1.2
"""BM25 term-frequency saturation (Robertson's and Lucene's default)."""
B = 0.75
"""BM25 length normalisation (Robertson's and Lucene's default)."""
AVG_LEN = 256.0
"""Assumed average chunk length in terms (fastembed's ``Qdrant/bm25`` default; a chunk of
200 model tokens gives about 150 to 250 terms)."""
FEEDBACK_TERMS = 40
"""Expansion terms added to a BM25 query by pseudo-relevance feedback
(:func:`feedback_query_vector`); tuned on SciFact and NPL (benchmarks/RESULTS.md)."""
FEEDBACK_WEIGHT = 1.0
"""Weight of the expansion terms against the query's own: together they weigh this many times
the query's term count (RM3's ``1 − λ`` over ``λ``: 1.0 is Anserini's default ``λ = 0.5``)."""
MAX_TERM_CHARS = 64
"""Longer terms are dropped (base64 blobs, hashes); their parts are still terms."""

# The scripts written without spaces between words, whose runs become bigrams (Lucene's
# CJKBigramFilter: Han, Hiragana, Katakana, Hangul). Han: CJK Unified Ideographs with
# extension A, the compatibility ideographs and extensions B to H (U+20000–U+323AF), the
# iteration mark 々 and 〇; Hiragana; Katakana with its phonetic extensions, the prolonged sound
# mark ー and the half-width forms; Hangul syllables and jamo.
_CJK = (
    "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U000323af"
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
)
_APOSTROPHES = "'\u2019\u2018\u02bc\u2032\uff07\u00b4"
"""The characters written as an apostrophe inside a word, each read as ``'``: the ASCII one,
the right and left single quotation marks (U+2019, U+2018: what word processors, phones and
web pages make of it, the left one where the quote was turned the wrong way), the modifier
letter apostrophe (U+02BC), the prime (U+2032), the full-width apostrophe (U+FF07) and the
acute accent (U+00B4, which German keyboards put where others have the apostrophe: ``it´s``).
UAX #29 keeps a word whole across U+0027, U+2018, U+2019 and U+FF07 (MidNumLet, Single_Quote)
and U+02BC (a letter); here all of them are the same apostrophe (since ``en-7``; before,
``it‘s`` gave ``s``, ``itʼs`` ``itʼ``)."""
_AS_APOSTROPHE = str.maketrans(dict.fromkeys(_APOSTROPHES, "'"))
_APOSTROPHE = re.compile(f"[{_APOSTROPHES}]")
_HYPHENS = "\u2010\u2011"
"""The Unicode hyphen and non-breaking hyphen, which join words as ``-`` does (``E‑Mail``
with U+2011, as word processors write it); a compound's whole form has ``-`` for them."""

# One token per match; the named group says which rule matched. Order matters: the longest
# forms first. _A is a letter or digit (any script) but a CJK one, _L a letter but a CJK one:
# a CJK run is a token of its own (``cjk``), so ``iPhone用户`` splits where the script changes,
# as the Unicode word breaks (UAX #29) of Lucene's StandardTokenizer do. The runs are
# possessive (*+, ++): what follows each run can never be a character of it, so giving
# characters back could not make a rule match, and a plain word is not re-scanned character
# by character for an "@", "++" or "-" it lacks (the same tokens as the plain quantifiers,
# about a fifth faster).
_A = rf"[^\W_{_CJK}]"
_L = rf"[^\W\d_{_CJK}]"


def _token_pattern(a: str, letter: str) -> re.Pattern[str]:
    """The token rules, ``a`` standing for a letter or digit and ``letter`` for a letter (each
    a regular expression of one character, or of one with the combining marks after it:
    :func:`_marked`)."""
    return re.compile(
        rf"""
        (?P<email>{a}[\w.+-]*+@{a}[\w-]*+(?:\.{a}[\w-]*+)+)
      | (?P<symbol>{letter}{a}*+(?:\+\+\d*|\#)(?![\w+#]))
      | (?P<dotname>(?<![^\s(\[{{"'“‘])\.{letter}{a}*+)
      | (?P<joined>{a}++(?:[-{_HYPHENS}._]{a}++)+)
      | (?P<word>{a}++(?:[{_APOSTROPHES}]{a}++)*)
      | (?P<cjk>[{_CJK}]++)
        """,
        re.VERBOSE,
    )


_TOKEN = _token_pattern(_A, _L)
_PART = re.compile(rf"{_A}+|[{_CJK}]+")


@dataclass(frozen=True, slots=True)
class _Marks:
    """The patterns for text holding combining marks (Unicode categories Mn, Mc, Me: the
    vowel signs and viramas of Devanagari, Hebrew points, and accents written as a letter and a
    mark, as decomposed (NFD) text has them). Python's ``\\w`` leaves marks out, so without
    these ``हिन्दी`` fell apart into consonants and a decomposed ``Mu\\u0308nchen`` into ``mu``
    and ``nchen``; Lucene's StandardTokenizer keeps a mark with the letter before it (UAX #29's
    ``Extend``), and so do these. And for text holding format characters, which a word is
    read without (:func:`_is_ignored_format`)."""

    bmp_mark: re.Pattern[str]
    """One combining mark up to U+FFFF."""
    astral_char: re.Pattern[str]
    """One character beyond U+FFFF."""
    astral_mark: re.Pattern[str]
    """One combining mark beyond U+FFFF."""
    token: re.Pattern[str]
    """:data:`_TOKEN` with each letter or digit taking the marks after it."""
    part: re.Pattern[str]
    """:data:`_PART` likewise."""
    cluster: re.Pattern[str]
    """One character and the marks and format characters after it (a lone mark or format
    character at the start of a text too)."""
    bmp_format: re.Pattern[str]
    """One format character a word is read without (:func:`_is_ignored_format`) up to U+FFFF."""
    astral_format: re.Pattern[str]
    """One format character beyond U+FFFF."""

    def found_in(self, text: str) -> bool:
        """Whether ``text`` holds a combining mark (the class beyond U+FFFF is searched only
        when ``text`` has such a character)."""
        if self.bmp_mark.search(text) is not None:
            return True
        return self.astral_char.search(text) is not None and bool(self.astral_mark.search(text))

    def format_in(self, text: str) -> bool:
        """Whether ``text`` holds a format character that words ignore (as :meth:`found_in`
        looks for marks)."""
        if self.bmp_format.search(text) is not None:
            return True
        return self.astral_char.search(text) is not None and bool(self.astral_format.search(text))


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch).startswith("M")


_ZERO_WIDTH_SPACE = "\u200b"
_SPACELESS = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u1950-\u19ff\u1a20-\u1aaf\ua9e0-\ua9ff\uaa60-\uaadf]"
)
"""A letter of the scripts written without spaces whose words a zero-width space separates
(the Unicode line-breaking class SA of UAX #14: Thai, Lao, Myanmar, Khmer, Tai Le, New Tai
Lue, Tai Tham, Tai Viet), by their blocks."""


def _is_ignored_format(ch: str) -> bool:
    """Whether ``ch`` is a format character a word is read without (Unicode's category Cf):
    the soft hyphen (U+00AD) that HTML's ``&shy;``, word processors and PDFs put inside words
    (``Rech\u00adnung`` is ``Rechnung``), the zero-width space (U+200B) of web pages and PDFs
    (``<wbr>``, copied line-break hints), the zero-width non-joiner and joiner (U+200C,
    U+200D) inside Persian and Indic words, the word joiner (U+2060), bidi controls
    (U+202A–U+202E, U+2066–U+2069), the byte-order mark (U+FEFF). UAX #29's rule WB4 ignores
    Format, Extend and ZWJ characters between the letters of a word, so Lucene's
    StandardTokenizer keeps such a word whole; here they are also dropped from the term, so it
    meets the word typed without them, as the snippets show it
    (``ncindex.text.snippets.clean_text`` removes them). UAX #29 leaves the zero-width space
    out of Format, as it separates words in Thai and Khmer text: here it separates words where
    a letter of those scripts stands beside it (:data:`_SPACELESS`, :func:`_separates`) and is
    dropped elsewhere, since in the scripts written with spaces it stands inside words, which
    the reader sees whole (since ``en-7``). The zero-width joiners are dropped in every script:
    a Persian or Indic word is the same letters with them or without, in a document and a
    query alike. UAX #29 also leaves out the prepended concatenation marks (the Arabic number
    signs U+0600–U+0605), which this drops (a guess: they stand before digits, which they would
    otherwise separate from nothing a query holds)."""
    return unicodedata.category(ch) == "Cf"


def _separates(before: str, after: str) -> bool:
    """Whether a zero-width space between the characters ``before`` and ``after`` (each ``""``
    at an end of the text) separates two words: when either is a letter of a script written
    without spaces (:data:`_SPACELESS`)."""
    return _SPACELESS.match(before) is not None or _SPACELESS.match(after) is not None


def _mark_ranges(low: int, high: int, wanted: Callable[[str], bool] = _is_mark) -> str:
    """The characters in ``[low, high)`` that are ``wanted`` (by default the combining marks)
    as the ranges of a regular-expression class."""
    ranges: list[str] = []
    first = None
    for cp in range(low, high + 1):
        is_mark = cp < high and wanted(chr(cp))
        if is_mark and first is None:
            first = cp
        elif not is_mark and first is not None:
            ranges.append(f"{re.escape(chr(first))}-{re.escape(chr(cp - 1))}")
            first = None
    return "".join(ranges)


@functools.cache
def _marked() -> _Marks:
    """:class:`_Marks`, built on first use from the Unicode database (about 40 ms). The
    marks beyond U+FFFF (up to U+1FFFF, and the variation selectors at U+E0100) are a class of
    their own, tried only at such a character: a class reaching past U+FFFF is matched range by
    range, one within it by a lookup table, 50 times faster on a page of German."""
    bmp = _mark_ranges(0, 0x10000)
    astral = _mark_ranges(0x10000, 0x20000) + _mark_ranges(0xE0000, 0xE1000)
    bmp_fmt = _mark_ranges(0, 0x10000, _is_ignored_format)
    astral_fmt = _mark_ranges(0x10000, 0x20000, _is_ignored_format) + _mark_ranges(
        0xE0000, 0xE1000, _is_ignored_format
    )
    beyond = r"[\U00010000-\U0010ffff]"
    mark = rf"(?:[{bmp}]|(?={beyond})[{astral}])"
    fmt = rf"(?:[{bmp_fmt}]|(?={beyond})[{astral_fmt}])"
    a, letter = rf"(?:{_A}{mark}*+)", rf"(?:{_L}{mark}*+)"
    return _Marks(
        bmp_mark=re.compile(f"[{bmp}]"),
        astral_char=re.compile(beyond),
        astral_mark=re.compile(f"[{astral}]"),
        token=_token_pattern(a, letter),
        part=re.compile(rf"{a}+|[{_CJK}]+"),
        cluster=re.compile(rf"(?s:.)(?:{mark}|{fmt})*+"),
        bmp_format=re.compile(f"[{bmp_fmt}]"),
        astral_format=re.compile(f"[{astral_fmt}]"),
    )


_CJK_RUN = re.compile(rf"[{_CJK}]+")
_LETTERS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")

ELISION_ARTICLES = frozenset(
    [
        "l",
        "m",
        "t",
        "qu",
        "n",
        "s",
        "j",
        "d",
        "c",
        "jusqu",
        "quoiqu",
        "lorsqu",
        "puisqu",
        # Italian, beside c l m t s d above
        "all",
        "dall",
        "dell",
        "nell",
        "sull",
        "coll",
        "pell",
        "gl",
        "agl",
        "dagl",
        "degl",
        "negl",
        "sugl",
        "un",
        "v",
    ]
)
"""Articles elided before an apostrophe (``l'église`` → ``église``), compared ignoring case:
Lucene's ``FrenchAnalyzer.DEFAULT_ARTICLES`` (org.apache.lucene.analysis.fr) and the Italian
ones of ``ItalianAnalyzer.DEFAULT_ARTICLES`` (org.apache.lucene.analysis.it: ``c``, ``l``,
``all``, ``dall``, … ``v``, ``d``), as Lucene's ``ElisionFilter`` removes them."""

_FOLDS = dict(zip("ßæøœłđðþı", ["ss", "ae", "o", "oe", "l", "d", "d", "th", "i"], strict=True))
"""Letters that NFKD does not take apart but Lucene's ``ASCIIFoldingFilter`` folds (lowercase:
folding follows lowercasing)."""


@dataclass(frozen=True, slots=True)
class Term:
    """One term of a text: its indexed form and where it came from, ``[start, end)`` in
    characters of the analysed text."""

    text: str
    start: int
    end: int


class _Stemmer(Protocol):
    """What is used here of PyStemmer's ``Stemmer.Stemmer`` (the extension ships no types)."""

    def stemWord(self, word: str) -> str:
        """``word`` stemmed."""


@functools.cache
def _stemmer() -> _Stemmer:
    import Stemmer  # PyStemmer

    stemmer: _Stemmer = Stemmer.Stemmer("english")
    return stemmer


def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


@functools.cache
def _stemmed_stops() -> frozenset[str]:
    return frozenset(_stem(w) for w in STOP_WORDS)


@functools.lru_cache(maxsize=65536)
def _form(text: str) -> str | None:
    """A plain word's indexed form: stemmed when it is all letters, ``None`` for a stop word
    (cached: a text's words repeat, and so do a collection's)."""
    lower = text.lower().translate(_AS_APOSTROPHE)
    form = _stem(lower) if _LETTERS.fullmatch(lower) else lower
    if form in _stemmed_stops() or not form or len(form) > MAX_TERM_CHARS:
        return None
    return form


@functools.lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    """``ch`` folded to ASCII, a Greek letter to itself without its marks (:data:`_GREEK`), or
    ``ch`` itself when it has no ASCII form (see :func:`_fold`);
    a lone combining mark folds to nothing: Python lowercases ``İ`` (U+0130) to ``i`` and a
    combining dot above (U+0307), where Java's ``Character.toLowerCase``, which Lucene's
    ``LowerCaseFilter`` calls, gives ``i`` alone, so ``İstanbul`` folds to ``istanbul``."""
    if ch in _FOLDS:
        return _FOLDS[ch]
    bare = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    return bare if bare.isascii() or _GREEK.fullmatch(bare) else ch


_GREEK = re.compile("[\u0370-\u03ff\u1f00-\u1fff]")
"""A letter of the Greek and Coptic or Greek Extended blocks. A Greek letter folds to itself
without its accents and breathings (``ά`` → ``α``, ``ΐ`` → ``ι``), as Lucene's
``GreekLowerCaseFilter`` (org.apache.lucene.analysis.el) removes the tonos and dialytika:
Greek drops them in capitals (``ΑΘΗΝΑ`` is ``Αθήνα``) and many type without them. Other
scripts' letters with marks stay (Cyrillic ``й`` is not ``и``)."""


def _fold(lower: str) -> str:
    """A lowercased token with its letters folded to ASCII as Lucene's ``ASCIIFoldingFilter``
    does (org.apache.lucene.analysis.miscellaneous): a letter's NFKD decomposition without its
    combining marks when that is ASCII (``é`` → ``e``, ``ü`` → ``u``, ``ﬁ`` → ``fi``), else
    :data:`_FOLDS` (``ß`` → ``ss``); a Greek letter loses its accents (``ά`` → ``α``); a
    letter with no ASCII form (Cyrillic, CJK, Devanagari) stays, and so does a combining mark
    after it (a virama, a Hebrew point), which after a letter that folds goes with the
    letter's other marks."""
    if lower.isascii():
        return lower
    folded: list[str] = []
    for ch in lower:
        kept = ch.isascii() or (folded and not folded[-1].isascii() and unicodedata.combining(ch))
        folded.append(ch if kept else _fold_char(ch))
    return "".join(folded)


def _elided(raw: str) -> int:
    """How many leading characters of a word Lucene's ``ElisionFilter``
    (org.apache.lucene.analysis.util) removes: the article and the apostrophe before the rest
    when the part before the first apostrophe is one of :data:`ELISION_ARTICLES` (ignoring
    case), else 0 (``don't``, ``o'clock``)."""
    cut = raw.translate(_AS_APOSTROPHE).find("'")
    if cut > 0 and raw[:cut].lower() in ELISION_ARTICLES:
        return cut + 1
    return 0


_HALF_WIDTH_KANA = re.compile("[\uff66-\uff9f]")
_SOUND_MARKS = {"\uff9e": "\u309b", "\uff9f": "\u309c"}
"""The half-width voiced and semi-voiced sound marks and their full-width spacing forms."""


def _widened(run: str, start: int) -> list[tuple[str, int, int]]:
    """The characters of a CJK run, each with its offsets, half-width katakana (U+FF66–U+FF9F)
    made full-width as Lucene's ``CJKWidthFilter`` (org.apache.lucene.analysis.cjk) makes them:
    each its NFKC form (``ｶ`` → ``カ``, ``ｰ`` → ``ー``), a voiced or semi-voiced sound mark
    joined with the kana before it when they compose (``ｶﾞ`` → ``ガ``, spanning both), else
    its full-width spacing form (``゛``, ``゜``)."""
    chars: list[tuple[str, int, int]] = []
    for i, ch in enumerate(run):
        at = start + i
        if ch in _SOUND_MARKS:
            joined = chars and unicodedata.normalize(
                "NFC", chars[-1][0] + unicodedata.normalize("NFKC", ch)
            )
            if joined and len(joined) == 1:
                chars[-1] = (joined, chars[-1][1], at + 1)
                continue
            ch = _SOUND_MARKS[ch]
        elif _HALF_WIDTH_KANA.match(ch):
            ch = unicodedata.normalize("NFKC", ch)
        chars.append((ch, at, at + 1))
    return chars


def _bigrams(run: str, start: int) -> Iterator[tuple[str, int, int]]:
    """A CJK run's overlapping bigrams, as Lucene's ``CJKBigramFilter``
    (org.apache.lucene.analysis.cjk, ``outputUnigrams`` false) makes them: ``北京烤鸭`` →
    ``北京``, ``京烤``, ``烤鸭``; a lone character is its own term. Half-width katakana are
    made full-width first (:func:`_widened`: ``ｶﾞｲﾄﾞ`` gives the bigrams of ``ガイド``), as
    Lucene's ``CJKAnalyzer`` puts ``CJKWidthFilter`` before the bigrams."""
    if _HALF_WIDTH_KANA.search(run) is None:
        if len(run) == 1:
            yield run, start, start + 1
        for i in range(len(run) - 1):
            yield run[i : i + 2], start + i, start + i + 2
        return
    chars = _widened(run, start)
    if len(chars) == 1:
        yield chars[0]
    for (first, at, _), (second, _, end) in itertools.pairwise(chars):
        yield first + second, at, end


_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue"})
"""German's spelling of its umlauts without them (DIN 5007-2, and what a keyboard or a file
name without umlauts has): ``Müller`` is written ``Mueller``. Lucene's German analyzer meets
the two by folding both to ``muller`` (``GermanNormalizationFilter``, org.apache.lucene.analysis.de:
``ae``, ``oe``, ``ue`` → ``a``, ``o``, ``u``), which would fold English words too (``blue``,
``does``); here a word holding an umlaut gets its spelling with ``e`` as one more form
instead (:func:`_variants`), so only such words change."""


_SPELT_OUT = re.compile("ae|oe|ue")
_SPELT_IN = {"ae": "ä", "oe": "ö", "ue": "ü"}
MAX_SPELT_OUT = 4
"""Most ``ae``, ``oe``, ``ue`` of one word that :func:`spellings` tries one by one as umlauts
(2⁴ = 16 spellings); a word with more gets only all of them as umlauts or none."""


def spellings(word: str) -> list[str]:
    """``word`` as given and its other spellings that this analysis takes for the same word by
    its umlauts (:data:`_UMLAUTS`), lowercased, no repeats: for text matched by something other
    than these terms (Qdrant's full-text index of titles, which lowercases on its own) a query
    word is asked for in each. The word itself is not lowercased here: Python lowercases ``İ``
    to ``i`` and a combining dot, which such an index cuts off as a separate character. A
    word holding ``ä``, ``ö``, ``ü`` gets them spelt out (``müller`` →
    ``mueller``), as :func:`_variants` gives a document's word; one holding ``ae``, ``oe``,
    ``ue`` gets each choice of them as umlauts (``mueller`` → ``müller``; ``steuerbuero`` →
    ``steürbuero``, ``steuerbüro``, ``steürbüro``), the spellings a word spelt out could
    have come from (up to :data:`MAX_SPELT_OUT` of them, else all or none)."""
    lower = word.lower()
    forms = [lower, lower.translate(_UMLAUTS)]
    found = list(_SPELT_OUT.finditer(lower))
    choices = (
        [c for n in range(1, len(found) + 1) for c in itertools.combinations(found, n)]
        if len(found) <= MAX_SPELT_OUT
        else [tuple(found)]
    )
    for chosen in choices:
        spelt, at = [], 0
        for m in chosen:
            spelt += [lower[at : m.start()], _SPELT_IN[m.group()]]
            at = m.end()
        forms.append("".join(spelt) + lower[at:])
    return [word, *(form for form in dict.fromkeys(forms) if form != lower)]


def plain_apostrophes(text: str) -> str:
    """``text`` with every form of the apostrophe that this analysis reads as ``'``
    (:data:`_APOSTROPHES`: ``’``, ``‘``, ``ʼ``, ``′``, ``＇``, ``´``) written ``'``, the same
    length: for text matched by something other than these terms (Qdrant's full-text index of
    titles, whose word tokenizer keeps the letter ``ʼ`` in a word and cuts at ``'``)."""
    return text.translate(_AS_APOSTROPHE)


def _variants(lower: str) -> list[str]:
    """The other spellings of a lowercased token that has letters beyond ASCII, each to be
    analysed as a token at its place: folded to ASCII (:func:`_fold`: ``münchen`` →
    ``munchen``) and, for one holding a German umlaut, with the umlaut spelt out
    (:data:`_UMLAUTS`: ``muenchen``), the rest folded."""
    forms = [_fold(lower)]
    spelt = lower.translate(_UMLAUTS)
    if spelt != lower:
        forms.append(_fold(spelt))
    return forms


def _with_folded(
    form: str | None, raw: str, start: int, end: int, analyse: Callable[[str], str | None]
) -> Iterator[tuple[str, int, int]]:
    """``form`` of the token ``raw`` at ``[start, end)`` and, for each other spelling of
    ``raw`` (:func:`_variants`) that gives another term, ``analyse`` of it at the same
    offsets (``ASCIIFoldingFilter`` with ``preserveOriginal``: ``München`` → ``münchen``,
    ``munchen``; and ``muenchen``)."""
    if form is not None:
        yield form, start, end
    if raw.isascii():
        return
    seen = {form}
    for variant in _variants(raw.lower()):
        other = analyse(variant)
        if other not in seen:
            seen.add(other)
            if other is not None:
                yield other, start, end


@functools.lru_cache(maxsize=65536)
def _word_forms(raw: str) -> tuple[int, tuple[str, ...]]:
    """A plain word's elided characters (:func:`_elided`) and the terms of the rest: its
    form and its folded one (:func:`_with_folded`), every apostrophe read as ``'``
    (:data:`_APOSTROPHES`); cached as :func:`_form` is."""
    cut, rest = 0, raw
    if _APOSTROPHE.search(raw) is not None:
        cut = _elided(raw)
        rest = raw[cut:].translate(_AS_APOSTROPHE)
    return cut, tuple(form for form, _, _ in _with_folded(_form(rest), rest, 0, 0, _form))


def _whole(lower: str) -> str | None:
    """A compound's whole form (``il-6``; a Unicode hyphen, :data:`_HYPHENS`, as ``-``),
    ``None`` when too long."""
    whole = lower.translate(_AS_HYPHEN)
    return whole if len(whole) <= MAX_TERM_CHARS else None


_AS_HYPHEN = str.maketrans(dict.fromkeys(_HYPHENS, "-"))
_NOT_HYPHENATED = re.compile(r"[\d._]")
"""What a compound of words joined by hyphens alone lacks: a digit, ``.`` or ``_``."""
_HYPHEN = re.compile(f"[-{_HYPHENS}]")


def _joined(raw: str) -> str | None:
    """The word a compound of words joined by hyphens is without them (``E-Mail`` →
    ``EMail``, ``co-operate`` → ``cooperate``), as Lucene's ``WordDelimiterGraphFilter``
    with ``catenateWords`` gives it; ``None`` for a compound holding a digit, ``.`` or ``_``
    (``IL-6``, ``x86-64``, ``report.pdf``: what is typed without the hyphen there is rarely one
    word)."""
    if _NOT_HYPHENATED.search(raw) is not None:
        return None
    return _HYPHEN.sub("", raw)


def _scan(text: str) -> Iterator[tuple[str, int, int]]:
    """The terms of ``text`` in reading order (a whole compound before its parts, a token's
    own form before its folded one), each as ``(form, start, end)``, offsets in characters into
    ``text``; tuples, not :class:`Term`, because documents and snippets analyse every word of
    every chunk this way.

    Text holding combining marks is tokenised with them kept in their words (:class:`_Marks`)
    and read composed (NFC), so a word written decomposed meets the same word written
    composed; the offsets stay those of ``text``."""
    if text.isascii():
        return _tokens(text, _TOKEN, _PART)
    marks = _marked()
    if marks.format_in(text):
        return _recomposed(text, marks)
    if not marks.found_in(text):
        return _tokens(text, _TOKEN, _PART)
    if unicodedata.is_normalized("NFC", text):
        return _tokens(text, marks.token, marks.part)
    return _recomposed(text, marks)


def _recomposed(text: str, marks: _Marks) -> Iterator[tuple[str, int, int]]:
    """:func:`_tokens` of ``text`` composed (NFC) and without its format characters
    (:func:`_is_ignored_format`), one character and its marks at a time, with each term's offsets
    taken back to ``text``: a composed character spans the characters it was made of, and the
    format characters after it. A zero-width space that separates words (:func:`_separates`)
    is read as a space."""
    composed: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for m in marks.cluster.finditer(text):
        raw = m.group()
        cluster = marks.bmp_format.sub("", raw)
        if not cluster.isascii():
            cluster = marks.astral_format.sub("", cluster)
        for ch in unicodedata.normalize("NFC", cluster):
            composed.append(ch)
            starts.append(m.start())
            ends.append(m.end())
        if _ZERO_WIDTH_SPACE in raw and _separates(raw[0], text[m.end() : m.end() + 1]):
            composed.append(" ")  # a word break in Thai, Khmer, …
            starts.append(m.start())
            ends.append(m.end())
    for form, start, end in _tokens("".join(composed), marks.token, marks.part):
        yield form, starts[start], ends[end - 1]


def _tokens(
    text: str, token: re.Pattern[str], part: re.Pattern[str]
) -> Iterator[tuple[str, int, int]]:
    """:func:`_scan`'s terms of ``text`` by the patterns ``token`` (:data:`_TOKEN`) and
    ``part`` (:data:`_PART`)."""
    for m in token.finditer(text):
        raw, start, kind = m.group(), m.start(), m.lastgroup
        if kind == "cjk":
            yield from _bigrams(raw.lower(), start)
            continue
        if kind == "word":
            cut, forms = _word_forms(raw)
            for term in forms:
                yield term, start + cut, m.end()
            continue
        whole = _whole(raw.lower())
        yield from _with_folded(whole, raw, start, m.end(), _whole)
        if kind == "symbol":
            continue
        joined = _joined(raw) if kind == "joined" else None
        if joined is not None:
            for term, _, _ in _with_folded(_form(joined), joined, 0, 0, _form):
                yield term, start, m.end()
        for piece_match in part.finditer(raw):
            piece, at = piece_match.group(), start + piece_match.start()
            if _CJK_RUN.fullmatch(piece):
                yield from _bigrams(piece.lower(), at)
                continue
            form = _form(piece)
            if form is not None and form != whole:
                yield form, at, at + len(piece)
            for other, _, _ in _with_folded(None, piece, 0, 0, _form):
                if other not in (form, whole):
                    yield other, at, at + len(piece)


def terms(text: str) -> list[str]:
    """Just the terms of ``text`` (what the sparse vector counts), in order, repeats kept."""
    return [form for form, _, _ in _scan(text)]


def occurrences(text: str, wanted: set[str] | frozenset[str]) -> list[Term]:
    """The terms of ``text`` that are in ``wanted``, in reading order (a whole compound
    before its parts), with their offsets: the matches a snippet marks, found without
    building a :class:`Term` for every other word."""
    return [Term(form, start, end) for form, start, end in _scan(text) if form in wanted]


def _positions(text: str) -> Iterator[list[str]]:
    """The terms of ``text`` grouped by where they stand: a word's own form and its folded one
    (same offsets, next to each other) are one group, every other term a group of its own —
    the tokens Lucene puts at one position (``posIncrement`` 0)."""
    group: list[str] = []
    span = (-1, -1)
    for form, start, end in _scan(text):
        if (start, end) != span and group:
            yield group
            group = []
        group.append(form)
        span = (start, end)
    if group:
        yield group


def _counts(text: str) -> tuple[Counter[str], int]:
    """Each term's count in ``text`` and the text's length in positions (:func:`_positions`):
    a folded form does not lengthen the text, as Lucene's BM25 discounts overlapping tokens
    (``BM25Similarity`` with ``discountOverlaps``, its default)."""
    forms: list[str] = []
    length, span = 0, (-1, -1)
    for form, start, end in _scan(text):  # not _positions: every chunk is counted this way
        forms.append(form)
        if (start, end) != span:
            length += 1
            span = (start, end)
    return Counter(forms), length


def _shares(text: str) -> dict[str, float]:
    """Each term's count in a query, the terms of one position sharing its count (a word and
    its folded form weigh ½ each): together they weigh what one word does, as the one
    ``SynonymQuery`` Lucene's query builder makes of them. In reading order."""
    shares: dict[str, float] = {}
    for group in _positions(text):
        for term in group:
            shares[term] = shares.get(term, 0.0) + 1 / len(group)
    return shares


def term_id(term: str) -> int:
    """A term's sparse-vector index: ``abs(mmh3.hash(term))`` (murmur3, 32 bits, seed 0, as
    fastembed's ``Bm25.compute_token_id``), in ``0 … 2**31``."""
    return abs(mmh3.hash(term))


def document_vector(text: str) -> SparseVector:
    """The BM25 document vector of a chunk: per term, ``tf·(k1+1) / (tf + k1·(1 − b +
    b·len/avg_len))`` with ``len`` the chunk's term count, a word's folded form not counted
    (:func:`_counts`). Terms sharing an id (a hash collision) add up. Indices ascending."""
    counts, length = _counts(text)
    norm = K1 * (1 - B + B * length / AVG_LEN)
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        key = term_id(term)
        weights[key] = weights.get(key, 0.0) + tf * (K1 + 1) / (tf + norm)
    return _vector(weights)


def query_vector(text: str) -> SparseVector:
    """The BM25 query vector: each term's count in the query (so a repeated word weighs
    more; a word and its folded form ½ each), scored against documents with Qdrant's IDF
    modifier. Empty when the query has no
    terms (only stop words or punctuation). Indices ascending."""
    return _vector(_query_weights(text))


def _query_weights(text: str) -> dict[int, float]:
    """Term id → weight of the BM25 query of ``text``: each term's count in it, a word and
    its folded form sharing one (:func:`_shares`)."""
    weights: dict[int, float] = {}
    for term, count in _shares(text).items():
        key = term_id(term)
        weights[key] = weights.get(key, 0.0) + count
    return weights


def feedback_query_vector(
    query: str,
    feedback: Sequence[tuple[str, float]],
    *,
    terms_added: int = FEEDBACK_TERMS,
    weight: float = FEEDBACK_WEIGHT,
) -> SparseVector:
    """The BM25 query vector of ``query`` expanded by pseudo-relevance feedback, RM3-style
    (Lavrenko & Croft's relevance model, as Anserini's ``Rm3Reranker`` interpolates it):
    :func:`expanded_query_vector` of :func:`feedback_expansion`. With no feedback text it is
    :func:`query_vector` itself, and a query without terms stays empty (nothing to expand).
    Indices ascending."""
    expansion = feedback_expansion(query, feedback, terms_added=terms_added, weight=weight)
    return expanded_query_vector(query, expansion)


def expanded_query_vector(query: str, expansion: Mapping[str, float]) -> SparseVector:
    """:func:`query_vector` of ``query`` with each ``expansion`` term's weight added (term →
    weight, as :func:`feedback_expansion` gives them): a query term among them weighs the more
    for it. Indices ascending."""
    weights = _query_weights(query)
    for term, added in expansion.items():
        key = term_id(term)
        weights[key] = weights.get(key, 0.0) + added
    return _vector(weights)


def feedback_expansion(
    query: str,
    feedback: Sequence[tuple[str, float]],
    *,
    terms_added: int = FEEDBACK_TERMS,
    weight: float = FEEDBACK_WEIGHT,
) -> dict[str, float]:
    """The terms pseudo-relevance feedback adds to the BM25 query of ``query`` and the weight
    each adds (term → weight, the heaviest first, ties by the term); ``{}`` for a query
    without terms or no feedback text.

    ``feedback`` holds ``(text, score)`` pairs: the best chunk of each of the first pass's top
    documents and its score there (negative scores count as 0; if all are 0, every text counts
    alike). Each term ``w`` of those texts gets ``P(w|R) = Σ score_d · tf(w, d) / len(d)`` (``len``
    in positions, :func:`_counts`) over
    the texts, scores normalised to sum 1; the ``terms_added`` most probable terms (the query's
    own among them) are renormalised to sum 1 and weigh ``weight × (query term count)`` in all
    (a word and its folded form count once).
    """
    own = _shares(query)
    if not own:
        return {}
    scores = [max(0.0, score) for _, score in feedback]
    total = sum(scores)
    if total == 0:
        scores, total = [1.0] * len(feedback), float(len(feedback))
    relevance: defaultdict[str, float] = defaultdict(float)
    for (text, _), score in zip(feedback, scores, strict=True):
        counts, length = _counts(text)
        for term, tf in counts.items():
            relevance[term] += score / total * tf / length
    chosen = sorted(relevance, key=lambda t: (-relevance[t], t))[:terms_added]
    mass = sum(relevance[t] for t in chosen)
    query_length = sum(own.values())
    return {term: weight * query_length * relevance[term] / mass for term in chosen}


def _vector(weights: dict[int, float]) -> SparseVector:
    keys = sorted(weights)
    return SparseVector(indices=keys, values=[weights[k] for k in keys])
