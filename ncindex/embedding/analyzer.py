"""The English analysis chain of the BM25 half: text → terms → BM25 sparse vectors (issue 19).

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
``ncindex reindex`` (README, "Changing the BM25 analyzer").
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import mmh3

from ncindex.store.port import SparseVector

ANALYZER_VERSION = "en-2"
"""The analysis chain's version (``en-1`` was fastembed's ``Qdrant/bm25`` with the 1,333-word
``stop-words`` list). Stored in each point's ``analyzer`` payload field."""

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

# One token per match; the named group says which rule matched. Order matters: the longest
# forms first. [^\W_] is a letter or digit (any script). The runs are possessive (*+, ++):
# what follows each run can never be a character of it, so giving characters back could not
# make a rule match, and a plain word is not re-scanned character by character for an "@",
# "++" or "-" it lacks (the same tokens as the plain quantifiers, about a fifth faster).
_TOKEN = re.compile(
    r"""
    (?P<email>[^\W_][\w.+-]*+@[^\W_][\w-]*+(?:\.[^\W_][\w-]*+)+)
  | (?P<symbol>[^\W\d_][^\W_]*+(?:\+\+\d*|\#)(?![\w+#]))
  | (?P<dotname>(?<![^\s(\[{"'“‘])\.[^\W\d_][^\W_]*+)
  | (?P<joined>[^\W_]++(?:[-._][^\W_]++)+)
  | (?P<word>[^\W_]++(?:['’][^\W_]++)*)
    """,
    re.VERBOSE,
)
_PART = re.compile(r"[^\W_]+")
_LETTERS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


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
    lower = text.lower().replace("’", "'")
    form = _stem(lower) if _LETTERS.fullmatch(lower) else lower
    if form in _stemmed_stops() or not form or len(form) > MAX_TERM_CHARS:
        return None
    return form


def _scan(text: str) -> Iterator[tuple[str, int, int]]:
    """The terms of ``text`` in reading order (a whole compound before its parts), each as
    ``(form, start, end)``, offsets in characters into ``text``; tuples, not :class:`Term`,
    because documents and snippets analyse every word of every chunk this way."""
    for m in _TOKEN.finditer(text):
        raw = m.group()
        if m.lastgroup == "word":
            form = _form(raw)
            if form is not None:
                start = m.start()
                yield form, start, start + len(raw)
            continue
        start = m.start()
        whole = raw.lower()
        if len(whole) <= MAX_TERM_CHARS:
            yield whole, start, m.end()
        if m.lastgroup == "symbol":
            continue
        for part in _PART.finditer(raw):
            form = _form(part.group())
            if form is not None and form != whole:
                yield form, start + part.start(), start + part.end()


def terms(text: str) -> list[str]:
    """Just the terms of ``text`` (what the sparse vector counts), in order, repeats kept."""
    return [form for form, _, _ in _scan(text)]


def occurrences(text: str, wanted: set[str] | frozenset[str]) -> list[Term]:
    """The terms of ``text`` that are in ``wanted``, in reading order (a whole compound
    before its parts), with their offsets: the matches a snippet marks, found without
    building a :class:`Term` for every other word."""
    return [Term(form, start, end) for form, start, end in _scan(text) if form in wanted]


def term_id(term: str) -> int:
    """A term's sparse-vector index: ``abs(mmh3.hash(term))`` (murmur3, 32 bits, seed 0, as
    fastembed's ``Bm25.compute_token_id``), in ``0 … 2**31``."""
    return abs(mmh3.hash(term))


def document_vector(text: str) -> SparseVector:
    """The BM25 document vector of a chunk: per term, ``tf·(k1+1) / (tf + k1·(1 − b +
    b·len/avg_len))`` with ``len`` the chunk's term count. Terms sharing an id (a hash
    collision) add up. Indices ascending."""
    counts = Counter(terms(text))
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / AVG_LEN)
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        key = term_id(term)
        weights[key] = weights.get(key, 0.0) + tf * (K1 + 1) / (tf + norm)
    return _vector(weights)


def query_vector(text: str) -> SparseVector:
    """The BM25 query vector: each term's count in the query (so a repeated word weighs
    more), scored against documents with Qdrant's IDF modifier. Empty when the query has no
    terms (only stop words or punctuation). Indices ascending."""
    return _vector(_query_weights(text))


def _query_weights(text: str) -> dict[int, float]:
    """Term id → weight of the BM25 query of ``text``: each term's count in it."""
    weights: dict[int, float] = {}
    for term, count in Counter(terms(text)).items():
        key = term_id(term)
        weights[key] = weights.get(key, 0.0) + float(count)
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
    alike). Each term ``w`` of those texts gets ``P(w|R) = Σ score_d · tf(w, d) / len(d)`` over
    the texts, scores normalised to sum 1; the ``terms_added`` most probable terms (the query's
    own among them) are renormalised to sum 1 and weigh ``weight × (query term count)`` in all.
    """
    own = Counter(terms(query))
    if not own:
        return {}
    scores = [max(0.0, score) for _, score in feedback]
    total = sum(scores)
    if total == 0:
        scores, total = [1.0] * len(feedback), float(len(feedback))
    relevance: defaultdict[str, float] = defaultdict(float)
    for (text, _), score in zip(feedback, scores, strict=True):
        counts = Counter(terms(text))
        length = sum(counts.values())
        for term, tf in counts.items():
            relevance[term] += score / total * tf / length
    chosen = sorted(relevance, key=lambda t: (-relevance[t], t))[:terms_added]
    mass = sum(relevance[t] for t in chosen)
    query_length = sum(own.values())
    return {term: weight * query_length * relevance[term] / mass for term in chosen}


def _vector(weights: dict[int, float]) -> SparseVector:
    keys = sorted(weights)
    return SparseVector(indices=keys, values=[weights[k] for k in keys])
