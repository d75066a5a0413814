"""The search path: one filtered hybrid query, grouping, verify-on-read, snippets (DESIGN §9).

1. Validate the filters (:mod:`ncindex.search.filters`) before anything costs a request.
2. Embed the query: dense and BM25 sparse. In ``hybrid`` mode a dense failure degrades to
   a sparse-only answer (``degraded``); ``dense``/``sparse`` modes use one half.
   With both halves fused by DBSF, the BM25 query is expanded by pseudo-relevance feedback:
   the first ranking (step 3's) lends the terms of its ``bm25_feedback_docs`` best documents
   that hold a word of the query (RM3, :func:`~ncindex.embedding.analyzer.feedback_query_vector`;
   a document the dense half alone ranked high would fill the expansion with its own words —
   an invoice's numbers for ``invitation.eml`` — and come first on BM25 alone); the BM25
   branch is then asked again with the expanded query and fused anew with the dense branch
   already in hand.
   Since that first ranking only picks the feedback documents, its BM25 branch is asked only
   ``bm25_feedback_first_depth`` deep (a BM25 branch walking its posting lists stops pruning
   them later for a deeper top).
   RRF searches are not expanded: with RRF, feedback lost on SciFact (benchmarks/RESULTS.md,
   "Fusion tuning").
3. One ranking: a BM25 branch over the candidate pool and a dense one over
   ``dense_prefetch_share`` of it (:class:`Pool`; the whole pool when it runs alone), each
   asked once with the same filter (so filters apply before fusion) and fused by RRF or DBSF
   in the process (:mod:`ncindex.search.fusion`, Qdrant's arithmetic; ties by point id).
   The ranking is read ``limit × CHUNKS_PER_DOC`` chunk hits at a time, as deep as
   verification needs to fill the page (at most ``MAX_ROUNDS`` over-fetched pages of
   ``limit × search_overfetch × CHUNKS_PER_DOC``), the documents of each slice not yet seen
   verified next. The branches return ids and scores alone; a point id names its document
   (:func:`~ncindex.documents.point_document`), so a slice is grouped without reading a
   payload (a point of an earlier id scheme has its ``doc_key`` read with the slice), and
   the whole payloads (stage ``payloads``) are read for each batch about to be verified, so
   a search reads ten or so payloads, not the hundreds of hits' (reading payloads was a
   large part of the query: benchmarks/RESULTS.md, Scale).
4. Group by document (one result per document, its best chunk; :func:`group_key`), ties by
   the group's key; a document met again under another key (an old and a new version whose
   ids were written under two schemes) is passed over once its payload shows its ``doc_key``.
   A candidate whose point is gone when its payload is read (a rewrite deleted the old version
   since the ranking) is read from its document's next hit in the slice (``_Documents``).
5. Verify candidates as the searching user, in rank order, only as many as the page needs.
   A candidate dropped, or found elsewhere than indexed, is handed to ``on_stale`` (the app
   enqueues a re-check, which evicts it or brings its place up to date). One whose check
   failed transiently is kept (fail-open), kept without its text, or left out, as
   ``NCINDEX_UNVERIFIED_RESULTS`` says (``SearchService._verify_into``), and marked
   ``verified: false``.
6. ``score_threshold`` (relative, see :class:`SearchRequest`) and an absolute ``min_score``
   cut the ranked list; snippets come from the best chunk: escaped, matches marked (built
   while the batch's checks are in flight).
7. Only with ``explain``: each result's rank and raw score in each branch that was fused
   (:class:`Explain`), from the branches already asked, the query's terms in its snippet and
   the feedback expansion's terms in its chunk (a BM25 match may come from those alone).

Scores are the fusion's own: RRF (k = :data:`~ncindex.store.schema.RRF_K`, 10) sums
``1 / (rank + 10)`` over the two branches; DBSF sums per-branch scores normalised as
``(score − (μ − 3σ)) / 6σ`` (not clipped, so an outlier scores above 1 and a fused score can
pass 2.0). Neither is a cosine similarity.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import structlog
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    WithJsonSchema,
    field_validator,
)
from qdrant_client import models

from ncindex.documents import (
    DocRef,
    DocType,
    opening_title,
    path_key,
    point_document,
    principal,
)
from ncindex.embedding import analyzer
from ncindex.embedding.embedder import Embedder
from ncindex.errors import (
    ChunkOutOfRange,
    DocumentNotFound,
    InputError,
    SearchUnavailable,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.search.facets import counted_values
from ncindex.search.filter_fields import MAX_SECONDS, PATH_SPELLINGS, TIME_PATTERN
from ncindex.search.filters import (
    HTTP_LISTINGS,
    Leaf,
    Listings,
    Node,
    build_filter,
    field_verdict,
    other_spellings,
    path_verdict,
    request_tree,
    selecting_nothing,
    title_compounds,
    title_word,
    tree_dict,
    with_title_words,
)
from ncindex.search.fusion import fuse
from ncindex.search.links import open_link
from ncindex.search.verify import TagMembership, VerificationCounts, VerifyOnRead
from ncindex.settings import Settings
from ncindex.sources.base import Checked, Verdict
from ncindex.sources.eligibility import Eligibility
from ncindex.store.port import Fusion, Hit, PointRecord, SparseVector, VectorStore
from ncindex.store.queries import acl_condition, first_chunks
from ncindex.strict_json import WHOLE_NUMBER
from ncindex.text.snippets import Match, Snippet, snippet

log = structlog.get_logger(__name__)

MAX_ROUNDS = 3
"""Over-fetched pages of the fused ranking read at most, when verification drops leave the
page short."""

MAX_LIMIT = 100
"""Most results one search answers (``limit``)."""

MAX_CONTEXT_WINDOW = 20
"""Largest number of chunks on each side of a chunk that the context endpoint and the MCP
``fetch`` tool return."""

MAX_CHUNK_INDEX = 1_000_000
"""Largest ``chunk_index`` a caller may name (the context endpoint, the MCP ``fetch`` tool)."""

MAX_DOC_ID_CHARS = 256
"""Longest ``doc_id`` a caller may name (the context endpoint, the MCP ``fetch`` tool)."""

DOC_ID_PATTERN = (
    r"^[^/\x00-\x20\x7f-\xa0\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u1680"
    r"\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ue000-\uf8ff\ufeff\ufff9-\ufffb]+$"
)
"""The ``doc_id`` strings a caller may name (one regular expression for the server,
``re.fullmatch``, and the OpenAPI document, ECMA-262): no ``/`` and none of whitespace
(Python's ``str.isspace`` and ECMA-262's ``\\s`` alike), C0 and C1 controls, or the format
and private-use characters of the Basic Multilingual Plane (Unicode categories Cf, Co: soft
hyphen, zero-width spaces and joiners, bidi marks and overrides, byte order mark, …).
Unassigned code points and those beyond that plane pass it (an ECMA-262 class without the
``u`` flag cannot name them) and, no document's id holding one, are answered ``not_found``."""


def checked_doc_id(doc_id: str, field: str) -> str:
    """``doc_id`` as a caller named it (the context endpoint's path, the MCP ``fetch`` tool's
    ``id`` or ``doc_id``), unchanged when it can be a document's id; raises
    :class:`~ncindex.errors.InputError` (``invalid_value`` on ``field``) when it is empty,
    longer than :data:`MAX_DOC_ID_CHARS` characters, does not match :data:`DOC_ID_PATTERN`
    (a ``/``, whitespace, a control or invisible format character: no document's id holds
    one, they are Nextcloud's numeric ids, ``"208"``; a ``"208 "`` was looked up and answered
    ``not_found``, which told the caller the id was right and the document gone) or is not
    valid Unicode (a lone surrogate)."""
    if not doc_id or len(doc_id) > MAX_DOC_ID_CHARS or "/" in doc_id:
        raise InputError("invalid_value", field, "not a document id")
    if not re.fullmatch(DOC_ID_PATTERN, doc_id):
        raise InputError(
            "invalid_value", field, "not a document id: it holds whitespace or a control character"
        )
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("invalid_value", field, "not valid Unicode") from None
    return doc_id


CHUNKS_PER_DOC = 4
"""Chunk hits fetched per wanted document (several chunks of one document often rank close)."""

MAX_FETCH = 1000
"""Most chunk hits read in one round."""

MAX_POOL = 3000
"""Most candidates per prefetch branch."""

TITLE_BRANCH_MAX_WORDS = 8
"""Longest query, in words, that the title branch is asked for: a longer one is a sentence,
not a name, and each of its words costs the branch an estimate."""

TITLE_BRANCH_MAX_POINTS = 5000
"""Most chunks the title branch scores: when the engine estimates that more belong to
documents whose title holds every word of the query, the branch is skipped — words in that
many titles single no file out, and scoring every such chunk costs more than the dense branch
does (a scratch measurement on Qdrant Edge, 100,000 points of random vectors, each titled:
the dense branch 12–17 ms at the median, the title branch 0.1–1.5 ms on words in 0–140 titles,
30–34 ms on a word in every title; the estimate 0.05 ms)."""

ROUND_FIELDS = ("doc_key",)
"""The payload fields read for the hits a round groups whose ids name no document (points of
the earlier id scheme: :func:`~ncindex.documents.point_document`); grouping needs no more, and
the whole payloads are read for the candidates about to be verified."""

FILTER_NODE_REF = "#/components/schemas/FilterNode"
"""Where the OpenAPI document defines the filter tree (see ``search_api.openapi``)."""

Mode = Literal["hybrid", "dense", "sparse"]
TimeValue = Annotated[
    StrictInt | StrictFloat | str,
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "number", "minimum": -MAX_SECONDS, "maximum": MAX_SECONDS},
                {"type": "string", "pattern": TIME_PATTERN},
            ]
        }
    ),
]
"""A point in time as ``POST /v1/search`` takes it (checked by
:func:`~ncindex.search.filters.request_tree`): Unix seconds, at most :data:`MAX_SECONDS`
either side of 1970, or an RFC 3339 string matching :data:`TIME_PATTERN` (naive: UTC); the
JSON Schema says exactly that."""

BoardTitle = Annotated[
    str | None,
    Field(
        description="Deck cards: the title of the card's board, as Nextcloud gave it to the "
        "check of this request (so a board renamed since the card was indexed shows its name "
        "now, and a card moved to another board since names that board); null for other types "
        "and for a card not confirmed during this request."
    ),
]
"""A Deck card's board title, as a search result, the context endpoint and MCP ``fetch``
give it: :class:`~ncindex.sources.base.Checked`'s ``board_title``, from the board GET of
the card's check (:meth:`~ncindex.sources.deck_card.DeckCardSource.settle`)."""

StackTitle = Annotated[
    str | None,
    Field(
        description="Deck cards: the title of the card's stack (list) on its board, as "
        "`board_title`; null for other types and for a card not confirmed during this request."
    ),
]
"""A Deck card's stack title, as :data:`BoardTitle`."""

BoardId = Annotated[
    str | None,
    Field(
        description="Deck cards: the id of the card's board as the index has it, the value "
        "the `board_id` filter matches (to find the other cards of this board); null for "
        "other types."
    ),
]
"""A Deck card's board id, as a search result, the context endpoint and MCP ``fetch`` give
it: the index's payload (``board_id``, a string: :mod:`ncindex.sources.deck_card`), what the
``board_id`` filter matches."""

StackId = Annotated[
    str | None,
    Field(
        description="Deck cards: the id of the card's stack as the index has it, the value "
        "the `stack_id` filter matches; null for other types."
    ),
]
"""A Deck card's stack id, as :data:`BoardId`."""

FeedId = Annotated[
    str | None,
    Field(
        description="News items: the id of the item's feed as the index has it, the value "
        "the `feed_id` filter matches; null for other types."
    ),
]
"""A News item's feed id, as :data:`BoardId` (:mod:`ncindex.sources.news_item`)."""


@dataclass(frozen=True)
class Pool:
    """Candidates per branch of one search (each branch is asked once; with feedback the
    BM25 one twice, first ``bm25_feedback_first_depth`` deep, then expanded over the pool):
    ``sparse`` (BM25) is the pool, ``dense`` its ``dense_prefetch_share`` (at least 1) when
    both halves are fused. At scale the dense half's cost grows with its depth (its HNSW
    beam is at least as wide: :meth:`~ncindex.store.layout.CollectionLayout.beam`), and so
    does the BM25 half's where it walks its posting lists (a filter letting most points
    through): it stops pruning them later for a deeper top; where the filter's points are
    scanned, depth costs little (benchmarks/RESULTS.md, Scale)."""

    dense: int
    sparse: int

    @classmethod
    def for_fetch(cls, settings: Settings, fetch: int, *, fused: bool = True) -> Pool:
        """The pool of a search reading ``fetch`` chunk hits a round: ``max(prefetch_limit,
        fetch × MAX_ROUNDS)``, at most :data:`MAX_POOL`, so every round reads the same
        ranking. Unless ``fused`` (the dense half answers alone: ``dense`` mode, or a query
        with no BM25 terms) the dense prefetch is the whole pool, since every hit then comes
        from it."""
        sparse = min(MAX_POOL, max(settings.prefetch_limit, fetch * MAX_ROUNDS))
        return cls.shared(sparse, settings.dense_prefetch_share if fused else 1.0)

    @classmethod
    def shared(cls, sparse: int, share: float) -> Pool:
        """A BM25 prefetch ``sparse`` deep and a dense one ``share`` of it, rounded up, at
        least 1; the product is rounded to 6 decimals first, so 0.55 × 360 is 198, not 199."""
        return cls(dense=max(1, math.ceil(round(sparse * share, 6))), sparse=sparse)


class SearchRequest(BaseModel):
    """Body of ``POST /v1/search``. Different filter parameters are AND-ed; list parameters
    are any-of; every filter is validated against ``GET /v1/filters``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=1000, description="What to look for.")
    limit: Annotated[StrictInt, Field(ge=1, le=MAX_LIMIT), WHOLE_NUMBER] | None = Field(
        None,
        description=f"How many results, 1–{MAX_LIMIT} (default: the server's setting "
        "`NCINDEX_SEARCH_DEFAULT_LIMIT`). There is no next page (no offset or cursor): for "
        "more, search again with a larger `limit`.",
    )
    doc_types: list[DocType] | None = Field(
        None,
        min_length=1,
        max_length=16,
        description="Only these document types (any of; at least one: leave it out for all).",
    )
    modified_after: TimeValue | None = Field(
        None,
        description="Only documents modified at or after this time: RFC 3339 (naive ⇒ UTC) "
        "or Unix seconds.",
    )
    modified_before: TimeValue | None = Field(
        None,
        description="Only documents modified before this time: RFC 3339 (naive ⇒ UTC) or "
        "Unix seconds. Must not be earlier than `modified_after`.",
    )
    path_prefixes: list[str] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only documents at or under one of these paths, in the caller's own view "
        f"(from its root; no `.` or `..` segments; {PATH_SPELLINGS}); strict: `/Projects` never "
        "matches `/Projects-old`. At least one: leave it out for everywhere.",
    )
    tags: list[str] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only documents carrying one of these system tags (at least one: leave it "
        "out for any).",
    )
    category: str | None = Field(None, max_length=1024, description="Only notes of this category.")
    mime_types: list[str] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only files of one of these MIME types, whole (`text/plain`; no `text/*`; "
        "at least one: leave it out for any).",
    )
    filter: Annotated[
        dict[str, Any] | None,
        WithJsonSchema(
            {
                "anyOf": [
                    {"$ref": FILTER_NODE_REF},
                    {"type": "null"},
                ]
            }
        ),
    ] = Field(
        None,
        description="A boolean filter tree (RCP/1 §8): `{and: [...]}`, `{or: [...]}`, "
        "`{not: {...}}` nodes and `{field, op, value}` leaves; fields and operators as "
        "listed by `GET /v1/filters`; a node with any other key is refused. Leave it out (or "
        "null) for no filter; an empty `{}` is refused.",
    )
    mode: Mode | None = Field(
        None,
        description="Which rankings answer: `hybrid` (the default; null too) fuses meaning "
        "(dense) and words (BM25); `sparse` is words alone, so a query none of whose words "
        "occurs in a document answers no results; `dense` is meaning alone (RCP/1 `mode`).",
    )
    fusion: Literal["rrf", "dbsf"] | None = Field(
        None,
        description="How the dense and sparse rankings are fused; default: the server's "
        "NCINDEX_FUSION (dbsf).",
    )
    score_threshold: StrictFloat | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Relative cut-off: keep only results whose fused score is at least this "
        "fraction of the best result's score (0.8 ⇒ within 20 % of the best). Fused scores "
        "are not similarities, so a relative cut-off works the same for both fusions.",
    )

    explain: StrictBool | None = Field(
        False,
        description="Give each result an `explain` object: its rank and raw score in the dense, "
        "the sparse (BM25) and, when it ran, the title branch, the fused score, the matched "
        "query terms with their offsets in the snippet, the filters applied and when it was "
        "verified. Asks the store nothing more (the ranks are those of the branches fused). "
        "False or null: no `explain`.",
    )

    @field_validator("explain")
    @classmethod
    def _null_is_false(cls, value: bool | None) -> bool:
        # null is "left out", as for every other optional parameter: a tool caller (an LLM
        # whose tool schema makes every property required and nullable) sends it so
        return bool(value)

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("contains a NUL character")
        if not any(c.isprintable() and not c.isspace() for c in value):
            raise ValueError("must contain a printable non-space character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("is not valid Unicode (lone surrogate)") from None
        return value

    def filter_tree(self) -> Node | None:
        """All filter parameters as one validated tree; raises ``FilterError``."""
        return request_tree(
            doc_types=[t.value for t in self.doc_types] if self.doc_types else None,
            modified_after=self.modified_after,
            modified_before=self.modified_before,
            path_prefixes=self.path_prefixes,
            tags=self.tags,
            category=self.category,
            mime_types=self.mime_types,
            filter=self.filter,
        )


class BranchRank(BaseModel):
    """Where a result's chunk stood in one branch on its own."""

    rank: int = Field(description="1-based rank among the branch's prefetch candidates.")
    score: float = Field(description="The branch's own score: cosine (dense) or BM25 (sparse).")


class MatchedTerm(BaseModel):
    """A query term found in the snippet."""

    term: str = Field(description="The analysed term (stemmed, lower case).")
    start: int = Field(description="Offset in characters into the snippet's plain text.")
    end: int = Field(description="End (exclusive), characters.")


class FeedbackTerm(BaseModel):
    """A term pseudo-relevance feedback added to the BM25 query, found in a result's chunk."""

    term: str = Field(description="The analysed term (stemmed, lower case).")
    word: str = Field(description="Its first occurrence in the result's chunk, as written.")


class Explain(BaseModel):
    """Why a result is where it is (only with ``explain: true``)."""

    dense: BranchRank | None = Field(
        description="Rank and cosine in the dense branch; null if not among its candidates "
        "(or the dense half did not run)."
    )
    sparse: BranchRank | None = Field(
        description="Rank and BM25 score in the sparse branch (in a hybrid DBSF search, of "
        "the query expanded by feedback terms, as fused); null if not among its candidates (no "
        "term of that query in the chunk)."
    )
    title: BranchRank | None = Field(
        None,
        description="Rank and cosine in the title branch: the chunks of documents whose title "
        "holds every word of the query, ranked by the dense vector; null if its title does not "
        "(or the branch did not run: not hybrid, or `NCINDEX_TITLE_BRANCH` off).",
    )
    fused_score: float = Field(description="The score the fusion gave (the result's `score`).")
    matched_terms: list[MatchedTerm] = Field(
        description="Query terms in the snippet, offsets into its plain text (the snippet "
        "without its `<mark>` tags and with entities unescaped)."
    )
    feedback_terms: list[FeedbackTerm] = Field(
        description="Terms the BM25 query was expanded with by feedback (taken from the best "
        "results of a first ranking, not typed in the query) that occur in the result's chunk, "
        "so they count in its `sparse` score, the most weighted first; a BM25 match may come "
        "from these alone. Empty when the search was not expanded (RRF, one half alone, "
        "`NCINDEX_BM25_FEEDBACK_DOCS` 0) or the result has no BM25 rank."
    )
    filters: dict[str, Any] = Field(
        description="The filters applied, as one normalised tree (`{}` for none); the "
        "caller's own access filter is always applied besides."
    )
    verified_at: float | None = Field(
        description="Unix seconds when Nextcloud confirmed the caller may read it; null when "
        "it was kept unconfirmed (a transient error, or a type without a verifier)."
    )


class SearchResult(BaseModel):
    """One document in a response: its best chunk's position and an HTML snippet of it."""

    doc_type: str = Field(description="note, file, deck_card or news_item.")
    doc_id: str = Field(description="The document's id within its type.")
    title: str
    score: float = Field(
        description="The fused rank score of the best chunk (RRF or DBSF fusion of the dense "
        "and BM25 branches): higher is better, comparable only within one search; not a "
        "similarity, not bounded to 0–1. With DBSF it also depends on `limit`: each branch's "
        "scores are normalised over its candidates, whose number grows with the page."
    )
    snippet: str = Field(
        description="HTML: escaped text, matches in `<mark>`, each run of whitespace one "
        "space or, where it held a line break, one `\\n` (two, `\\n\\n`, where it held a blank "
        "line: a paragraph's end; kept beside the `…` of a cut made there, `…\\n* item`); a "
        "note's, a Deck card's and a Markdown file's code lines keep their indentation, and "
        "one cut inside a fenced code block it cut the opening line of starts with that "
        "block's fence on a line of its own (`` ```\\n… ``); empty when `verified` is false "
        "and the server withholds unconfirmed text (NCINDEX_UNVERIFIED_RESULTS=hide_text)."
    )
    snippet_title_chars: int = Field(
        ge=0,
        description="How many of the first characters of the snippet's plain text (the "
        "snippet without its `<mark>` tags, entities unescaped), counted in Unicode code "
        "points as `explain` offsets are (U+1FA77 🩷 counts one, where JavaScript's "
        "`length` counts two UTF-16 units), are the document's title, which a Deck card's "
        "and a News item's indexed text "
        'opens with (`"{title}\\n\\n{body}"`): a `…` where the snippet cuts the title '
        "counts with it, and the body, if shown, follows on a new line. 0 when the snippet "
        "starts past the title (a later chunk, a window further on), for notes and files "
        "(whose text is their own), and when the text is withheld (see `snippet`).",
    )
    char_start: int | None = Field(
        description="Start of the best chunk in the document's extracted text, characters; "
        "null when the text is withheld (see `snippet`)."
    )
    char_end: int | None = Field(
        description="End (exclusive) of the best chunk, characters; null when the text is "
        "withheld (see `snippet`)."
    )
    chunk_index: int = Field(description="0-based index of the best chunk in the document.")
    modified_at: int = Field(description="When the document last changed, Unix seconds.")
    verified: bool = Field(
        True,
        description="Nextcloud confirmed during this search that the caller may read it. "
        "False: its check failed transiently (counted in `verification.errors`) or its type "
        "has no verifier (`verification.unverified`), and it is shown unconfirmed — the "
        "caller may have lost access (NCINDEX_UNVERIFIED_RESULTS decides what is shown of it).",
    )
    path: str | None = Field(None, description="Path in the caller's own view (files, notes).")
    owner: str | None = Field(
        None,
        description="Nextcloud user id of the document's owner (a file shared with the "
        "caller: whoever owns it; null on external storage or in a group folder; a News "
        "item: the caller), as the `owner` filter takes it.",
    )
    board_title: BoardTitle = None
    stack_title: StackTitle = None
    board_id: BoardId = None
    stack_id: StackId = None
    feed_id: FeedId = None
    url: str | None = Field(None, description="Link (news items).")
    open_url: str | None = Field(
        None,
        description="Opens the document in Nextcloud's web UI: a file's permalink, the note "
        "in Notes, the card in Deck, a news item's article; null when none is known.",
    )
    explain: Explain | None = Field(
        None, description="Only with `explain: true` in the request; absent otherwise."
    )
    _text: str = PrivateAttr(default="")
    _point_id: str = PrivateAttr(default="")
    _matches: list[Match] = PrivateAttr(default_factory=list)
    _verified_at: float | None = PrivateAttr(default=None)

    @property
    def doc_key(self) -> str:
        """``"{doc_type}:{doc_id}"``."""
        return f"{self.doc_type}:{self.doc_id}"

    @property
    def text(self) -> str:
        """The best chunk's plain text (not part of the JSON body)."""
        return self._text


class Verification(BaseModel):
    """How the candidates fared against Nextcloud."""

    checked: int = Field(description="Candidates checked with Nextcloud as the caller.")
    kept: int = Field(
        description="Of those, the ones the checks kept: the results, and any `withheld`."
    )
    dropped: int = Field(description="Gone for the caller (deleted, unshared, unreadable).")
    ineligible: int = Field(
        0,
        description="Still readable, but the index rules (globs, MIME types, required and "
        "excluded tags) exclude them now; dropped and evicted.",
    )
    errors: int = Field(
        description="Transient failures (Nextcloud unreachable, a 5xx, an answer of the wrong "
        "shape); those candidates were kept unconfirmed (`verified: false`), or left out with "
        "NCINDEX_UNVERIFIED_RESULTS=drop (`withheld`)."
    )
    unverified: int = Field(
        description="No verifier for the type; kept unconfirmed as `errors` are."
    )
    withheld: int = Field(
        0,
        description="Unconfirmed candidates (`errors`, `unverified`) left out of the results "
        "(NCINDEX_UNVERIFIED_RESULTS=drop); counted in `kept` too, as their checks kept them.",
    )


class SearchHint(BaseModel):
    """Why a search found nothing, where a filter value is why: beside a successful, empty
    answer (the search was well formed), never instead of it."""

    code: Literal["selects_nothing"] = Field(
        description="`selects_nothing`: the value selects none of the indexed documents the "
        "caller can read (as one nobody has would: others' documents are not looked at)."
    )
    field: str = Field(
        description="Where the value sits in the request, as an error's `field` names it: "
        "`path_prefixes[0]`, `category`, `filter.and[1].value`; a list's own name when none "
        "of its values selects anything."
    )
    detail: str = Field(description="The value(s), in words, and how to list the caller's.")


class SearchResponse(BaseModel):
    """A page of results with the verification counts, ``degraded`` (the dense half failed,
    the answer is sparse-only), stage timings in milliseconds and, for an empty answer,
    ``hints`` naming the filter values that select nothing."""

    results: list[SearchResult]
    verification: Verification
    degraded: bool
    model: str = Field(description="The dense model whose collection answered.")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    hints: list[SearchHint] = Field(
        default_factory=list,
        description="Only when `results` is empty: each `tags`, `category` or "
        "`path_prefixes` value (or such a `filter` leaf, or an `owner` or exact `path` one, "
        "that must hold) that selects none of the indexed documents the caller can read; "
        "then each tag or category under an `or`, or beside a value of its list that is "
        "held, that the caller's documents hold only in another case or Unicode form (the "
        "detail names their spelling; where the value must hold, that is an `invalid_value` "
        "error instead). Empty otherwise.",
    )
    _candidates: int = PrivateAttr(default=0)

    @property
    def candidates(self) -> int:
        """Chunk hits read from the store."""
        return self._candidates

    def as_dict(self) -> dict[str, Any]:
        """The JSON body (a result's ``explain`` key only when it has one)."""
        body = self.model_dump(mode="json")
        for result in body["results"]:
            if result.get("explain") is None:
                result.pop("explain", None)
        return body


class ContextChunk(BaseModel):
    """One chunk of a document: plain text (not HTML) and its offsets."""

    chunk_index: int
    text: str
    char_start: int
    char_end: int


class ContextResponse(BaseModel):
    """Chunks ``chunk_index - window … chunk_index + window`` of a document."""

    doc_type: str
    doc_id: str
    title: str
    path: str | None = None
    board_title: BoardTitle = None
    stack_title: StackTitle = None
    board_id: BoardId = None
    stack_id: StackId = None
    feed_id: FeedId = None
    url: str | None = None
    chunk_count: int
    chunks: list[ContextChunk]


PLACE_FIELDS = ("board_title", "stack_title", "board_id", "stack_id", "feed_id")
"""The fields that place a Deck card on its board and stack, and a News item in its feed, in a
search result, a context answer and MCP ``fetch``'s metadata (:func:`_place`)."""


def _place(payload: dict[str, Any], checked: Checked) -> dict[str, Any]:
    """:data:`PLACE_FIELDS` of a document: the titles its check gave (``checked``: a Deck card's
    board and stack as the searching user reads them now), the ids as the index holds them
    (``payload``); ``None`` where the document has none."""
    return {
        "board_title": checked.board_title,
        "stack_title": checked.stack_title,
        "board_id": payload.get("board_id"),
        "stack_id": payload.get("stack_id"),
        "feed_id": payload.get("feed_id"),
    }


def _new_path(payload: dict[str, Any], user: str, checked: Checked) -> str | None:
    """The path a candidate verified as ``checked`` has for ``user`` now, when it is not the
    indexed one (moved, its event not yet processed or lost); else ``None``."""
    path = checked.path
    return path if path is not None and path != (payload.get("paths") or {}).get(user) else None


def _moved(payload: dict[str, Any], user: str, checked: Checked) -> bool:
    """Whether a candidate verified as ``checked`` is no longer where the index has it: at
    another path (:func:`_new_path`), or placed elsewhere (``checked.moved_to``: a Deck card
    in another stack)."""
    return checked.moved_to is not None or _new_path(payload, user, checked) is not None


def _moved_out(payload: dict[str, Any], user: str, checked: Checked, tree: Node | None) -> bool:
    """Whether a candidate verified as ``checked`` has moved since it was indexed to where the
    filter ``tree`` excludes it: its new path (:func:`_new_path`) fails the tree's path leaves
    (:func:`~ncindex.search.filters.path_verdict`), or the place its check found it in
    (``checked.moved_to``) fails the tree's leaves of those fields
    (:func:`~ncindex.search.filters.field_verdict`)."""
    path = _new_path(payload, user, checked)
    if path is not None and path_verdict(tree, path) is False:
        return True
    return checked.moved_to is not None and field_verdict(tree, checked.moved_to) is False


def _title_filter(store: VectorStore, flt: Any, query: str) -> Any:
    """The title branch's filter, ``flt`` AND the title holds every word of ``query``
    (:func:`~ncindex.search.filters.with_title_words`), or ``None`` when the branch is not
    worth asking: a query of more than :data:`TITLE_BRANCH_MAX_WORDS` words (a sentence, not a
    name; a compound such as ``E-Mail`` one word); a word no title holds (of a compound, neither
    its joined form nor one of its parts: the engine's estimate of each word alone, which is its
    posting list's length: Qdrant scans every point for a word its index has never seen, 1.5
    ms on 100,000, where a known word's match is read from the index); or more than
    :data:`TITLE_BRANCH_MAX_POINTS` chunks estimated to match (an estimate of 0 is not taken
    for none: Qdrant's estimate of several words multiplies their shares). One estimate per
    word (and per compound's joined form) and one in all, 0.05–0.1 ms each on 100,000 points
    (the measurement of :data:`TITLE_BRANCH_MAX_POINTS`). Raises ``StoreUnavailable``."""
    compounds = title_compounds(query)
    if not compounds or len(compounds) > TITLE_BRANCH_MAX_WORDS:
        return None

    def none_holds(word: str) -> bool:
        return store.count(models.Filter(must=[title_word(word)]), exact=False) == 0

    if any(
        none_holds("".join(parts)) and (len(parts) == 1 or any(map(none_holds, parts)))
        for parts in compounds
    ):
        return None
    titled = with_title_words(flt, query)
    return titled if store.count(titled, exact=False) <= TITLE_BRANCH_MAX_POINTS else None


def group_key(hit: Hit) -> str:
    """The document ``hit`` belongs to, as grouping knows it: the document part of its point id
    (:func:`~ncindex.documents.point_document`) or, for an id of the earlier scheme, its
    payload's ``doc_key`` (``KeyError`` if the payload lacks it: read :data:`ROUND_FIELDS`
    first, :func:`keyed`)."""
    return point_document(hit.id) or hit.payload["doc_key"]


def group_hits(hits: list[Hit], key: Callable[[Hit], str] | None = None) -> list[Hit]:
    """Best hit per document (``key``, by default :func:`group_key`), ordered by score
    (descending), ties by the key."""
    key_of = key or group_key
    best: dict[str, Hit] = {}
    for hit in hits:
        k = key_of(hit)
        if k not in best or hit.score > best[k].score:
            best[k] = hit
    return sorted(best.values(), key=lambda h: (-h.score, key_of(h)))


def keyed(store: VectorStore, hits: list[Hit]) -> list[Hit]:
    """``hits`` (no payload) ready for :func:`group_hits`: a hit whose id names its document as
    it is; the ``doc_key`` (:data:`ROUND_FIELDS`) read, in one request, for those whose ids do
    not, any of them deleted since the ranking left out. Raises ``StoreUnavailable``."""
    legacy = {h.id for h in hits if point_document(h.id) is None}
    if not legacy:
        return hits
    read = store.retrieve(list(legacy), ROUND_FIELDS)
    return [
        Hit(h.id, h.score, read[h.id]) if h.id in legacy else h
        for h in hits
        if h.id not in legacy or "doc_key" in read.get(h.id, {})
    ]


def selects(store: VectorStore, user: str, leaf: Leaf) -> bool:
    """Whether ``leaf`` alone selects an indexed document ``user`` can read: one point read
    (payload ``doc_key`` only) through the ``acl`` condition, as every search filters
    (:func:`~ncindex.search.filters.build_filter`), so it tells nothing of the documents
    ``user`` cannot read. Raises ``StoreUnavailable``."""
    return next(store.scroll(build_filter(user, leaf), ("doc_key",), page_size=1), None) is not None


class SearchService:
    """Runs searches. ``live()`` gives the store and embedder of the live model, asked once per
    search so a model switch (``ncindex reindex``) takes effect between searches, never inside
    one. ``on_stale(user, ref)`` is called for every candidate verification found the index
    wrong about: dropped, or found at another path or in another place than indexed (the app
    enqueues a re-check, which evicts it or brings its path and place up to date)."""

    def __init__(
        self,
        settings: Settings,
        live: Callable[[], tuple[VectorStore, Embedder]],
        on_stale: Callable[[str, DocRef], None] | None = None,
    ) -> None:
        self.settings = settings
        self.live = live
        self.on_stale = on_stale
        self.verifier = VerifyOnRead(
            settings.verify_concurrency, eligibility=Eligibility.from_settings(settings)
        )

    def search(
        self,
        client: NextcloudClient,
        request: SearchRequest,
        *,
        mode: Mode | None = None,
        min_score: float | None = None,
        tree: Node | None = None,
        listings: Listings = HTTP_LISTINGS,
    ) -> SearchResponse:
        """Search as ``client.user`` (resolved).

        ``mode`` (default: ``request.mode``, else ``hybrid``) picks the halves (``hybrid``
        degrades to sparse when the dense half fails);
        ``min_score`` drops results whose fused score is below it (absolute, RCP
        ``minScore``); ``tree`` is the already validated filter (default: parsed from
        ``request``). Raises ``FilterError`` for bad filters, ``SearchUnavailable`` when the
        query cannot be embedded, ``StoreUnavailable`` if the store fails and
        ``NextcloudAuthError`` if the caller's credentials fail during verification, or
        when no answer of Nextcloud's showed them accepted and its OCS then refuses them
        (:meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`: a credential from the
        cache whose search asked Nextcloud nothing, or a Bearer token only an app's
        ``#[CORS]`` API was asked about).
        A search that finds nothing says why when a filter value is: with a ``tags`` or
        ``category`` leaf that must hold and whose values the caller's documents hold only in
        another case or Unicode form it raises ``FilterError`` naming the stored spelling (a
        likely typo with a definite fix; its values read as ``list_values`` reads them,
        :func:`~ncindex.search.facets.counted_values`), else it answers the empty list with
        ``hints`` naming each ``tags``, ``category``, ``owner``, ``path_prefix`` or ``path``
        value that must hold and selects none of the caller's indexed documents
        (:func:`~ncindex.search.filters.selecting_nothing`; one single-point read per such
        value, :func:`selects`), then each such other spelling under an ``or`` or beside a
        stored value of its list (:func:`~ncindex.search.filters.other_spellings`); all name
        the way ``listings`` (the caller's surface) lists the field's values. A search that
        found something asks neither.
        """
        assert client.user is not None
        user = client.user
        if tree is None:
            tree = request.filter_tree()
        flt = build_filter(user, tree)
        limit = request.limit or self.settings.search_default_limit
        timings: dict[str, float] = {}
        started = time.perf_counter()
        store, embedder = self.live()
        # tag membership: fetched once per search, starting now (beside the embedding and query)
        membership = self.verifier.membership(client)
        mode = mode or request.mode or "hybrid"
        dense, sparse, degraded = self._embed(embedder, request.query, mode)
        timings["embed"] = (time.perf_counter() - started) * 1000
        fusion = Fusion(request.fusion or self.settings.fusion)
        fetch = min(MAX_FETCH, limit * self.settings.search_overfetch * CHUNKS_PER_DOC)
        fused = dense is not None and sparse is not None and bool(sparse.indices)
        pool = Pool.for_fetch(self.settings, fetch, fused=fused)
        branches, ranking, expansion = self._rank(
            store, request.query, dense, sparse, flt, pool, fusion, timings
        )
        counts = VerificationCounts()
        cut = _Cutoff(request.score_threshold, min_score)
        results: list[SearchResult] = []
        documents = _Documents()
        read = 0
        timings["verify"] = timings["payloads"] = 0.0
        # the ranking is read a slice at a time (grouped then: keyed), as deep as the page's
        # verification needs, at most MAX_ROUNDS over-fetched pages
        step = limit * CHUNKS_PER_DOC
        # a cached credential no check confirms in time is asked about beside them (not after)
        with client.confirming_early():
            for start in range(0, min(len(ranking), MAX_ROUNDS * fetch), step):
                t0 = time.perf_counter()
                hits = keyed(store, ranking[start : start + step])
                timings["query"] += (time.perf_counter() - t0) * 1000
                read = start + step
                candidates = documents.slice(hits)
                t0, before = time.perf_counter(), timings["payloads"]
                exhausted = self._verify_into(
                    client, store, request.query, limit, candidates, results, counts, cut,
                    membership, timings, tree, documents,
                )  # fmt: skip
                reading = timings["payloads"] - before
                timings["verify"] += (time.perf_counter() - t0) * 1000 - reading
                if exhausted or len(results) >= limit:
                    break
        client.confirm()  # a credential revoked since it was cached is 401 (none asked: it is now)
        results.sort(key=lambda r: (-r.score, r.doc_key))
        hints: list[tuple[str, str]] = []
        if not results:  # a filter value the caller's documents do not hold found nothing
            spelt = other_spellings(
                tree,
                lambda f: [str(v["value"]) for v in counted_values(store, client, f)],
                listings,
            )
            hints = selecting_nothing(tree, lambda leaf: selects(store, user, leaf), listings)
            hints += spelt
        if request.explain and results:
            t0 = time.perf_counter()
            self._explain(results, branches, tree, expansion)
            timings["explain"] = (time.perf_counter() - t0) * 1000
        timings["total"] = (time.perf_counter() - started) * 1000
        response = SearchResponse(
            results=results,
            verification=Verification(**counts.as_dict()),
            degraded=degraded,
            model=embedder.model_name,
            timings_ms={k: round(v, 2) for k, v in timings.items()},
            hints=[SearchHint(code="selects_nothing", field=f, detail=d) for f, d in hints],
        )
        response._candidates = min(read, len(ranking))
        return response

    def _embed(
        self, embedder: Embedder, query: str, mode: Mode
    ) -> tuple[list[float] | None, SparseVector | None, bool]:
        dense: list[float] | None = None
        sparse: SparseVector | None = None
        if mode in ("hybrid", "sparse"):
            try:
                sparse = embedder.embed_query_sparse(query)
            except Exception as exc:
                log.warning("sparse_embed_failed", error=str(exc))
                if mode == "sparse":
                    raise SearchUnavailable(f"sparse embedding failed: {exc}") from exc
        if mode in ("hybrid", "dense"):
            try:
                dense = embedder.embed_query_dense(query)
            except Exception as exc:
                log.warning("dense_embed_failed", error=str(exc))
                if mode == "dense" or sparse is None:
                    raise SearchUnavailable(f"dense embedding failed: {exc}") from exc
        if dense is None and sparse is None:
            raise SearchUnavailable("the query could not be embedded")
        return dense, sparse, mode == "hybrid" and dense is None

    def _rank(
        self,
        store: VectorStore,
        query: str,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: Any,
        pool: Pool,
        fusion: Fusion,
        timings: dict[str, float],
    ) -> tuple[dict[str, list[Hit]], list[Hit], tuple[str, ...]]:
        """The search's ranking: each branch that runs asked once (``dense`` over
        ``pool.dense``, ``sparse`` — unless it has no terms — over ``pool.sparse``; both with
        the filter ``flt``; in a hybrid search with ``title_branch`` on, ``title``: the dense
        vector over ``pool.dense`` of the chunks that ``flt`` lets through and whose
        document's title holds every word of ``query``
        (:func:`_title_filter`: not asked when no title can hold them, or too many do); hits
        carrying no payload), fused in the process
        (:func:`~ncindex.search.fusion.fuse`). A hybrid DBSF search asks its first BM25
        branch only ``bm25_feedback_first_depth`` deep (that ranking only picks the feedback
        documents), then expands the BM25 query by feedback (:meth:`_feedback`) and asks the
        BM25 branch again with it over ``pool.sparse``, fusing it with the dense branch
        already in hand. Returns the branches as fused (``"dense"``,
        ``"sparse"``: what ``explain`` ranks in), the ranking, best first, and the terms the
        expansion added that are not the query's own, the most weighted first (empty without
        feedback). ``timings``
        gains ``query`` (ms: the branches and their fusion) and, when feedback ran,
        ``feedback`` (ms: what the expansion added). Raises ``StoreUnavailable``."""
        t0 = time.perf_counter()
        docs = self.settings.bm25_feedback_docs
        has_terms = sparse is not None and bool(sparse.indices)
        feedback = fusion is Fusion.DBSF and docs > 0 and dense is not None and has_terms
        first = min(pool.sparse, self.settings.bm25_feedback_first_depth)
        branches: dict[str, list[Hit]] = {}
        if dense is not None:
            branches["dense"] = store.branch(dense=dense, flt=flt, limit=pool.dense, fields=())
        if sparse is not None and has_terms:
            branches["sparse"] = store.branch(
                sparse=sparse, flt=flt, limit=first if feedback else pool.sparse, fields=()
            )
        if self.settings.title_branch and dense is not None and has_terms:
            titled = _title_filter(store, flt, query)
            if titled is not None:
                branches["title"] = store.branch(
                    dense=dense, flt=titled, limit=pool.dense, fields=()
                )
        ranking = fuse(list(branches.values()), fusion)
        timings["query"] = (time.perf_counter() - t0) * 1000
        if not feedback:
            return branches, ranking, ()
        assert sparse is not None
        t0 = time.perf_counter()
        expansion = self._feedback(store, query, ranking[: docs * CHUNKS_PER_DOC], docs)
        if expansion is not None or first < pool.sparse:
            # the expanded query, or — no feedback document left (deleted since the ranking)
            # — the query's own terms again, now as deep as the pool
            branches["sparse"] = store.branch(
                sparse=sparse if expansion is None else expansion.vector, flt=flt,
                limit=pool.sparse, fields=(),
            )  # fmt: skip
            ranking = fuse(list(branches.values()), fusion)
        timings["feedback"] = (time.perf_counter() - t0) * 1000
        return branches, ranking, () if expansion is None else expansion.added

    @staticmethod
    def _feedback(store: VectorStore, query: str, top: list[Hit], docs: int) -> _Expansion | None:
        """The BM25 query of ``query`` expanded by pseudo-relevance feedback
        (:func:`~ncindex.embedding.analyzer.feedback_expansion`, the vector as
        :func:`~ncindex.embedding.analyzer.feedback_query_vector` makes it) from the best ``docs``
        documents among the ``top`` hits of the first ranking that hold a term of ``query`` in
        one of those hits' chunks (each document's best chunk; their ``doc_key`` and ``text``
        read here), or ``None`` when none is left (deleted since the ranking, or none holds a
        query term). Documents, not chunks: keeping only the chunks holding a query term cost
        SciFact's hybrid DBSF nDCG@10 0.0021; keeping their documents left SciFact's and NPL's
        figures as they were, and skipping feedback for queries of one or two words did worse
        on queries cut to two words (2026-12-06).

        The feedback documents are the first ranking's candidates, so they match the caller's
        ``acl`` in the index but are not yet verified with Nextcloud: a document unshared
        since its last sync can lend terms to the query (never text to the response) until
        a re-check evicts it. Raises ``StoreUnavailable`` if the store fails."""
        own = set(analyzer.terms(query))
        payloads = store.retrieve([h.id for h in top], ("doc_key", "text"))
        read = [Hit(h.id, h.score, payloads[h.id]) for h in top if h.id in payloads]
        matching = {
            h.payload["doc_key"] for h in read if _holds_any(h.payload.get("text") or "", own)
        }
        # grouped by the doc_key read: a document held under both id schemes counts once
        best = group_hits(
            [h for h in read if h.payload["doc_key"] in matching],
            key=lambda h: h.payload["doc_key"],
        )
        if not best:
            return None
        feedback = [(h.payload.get("text") or "", h.score) for h in best[:docs]]
        expansion = analyzer.feedback_expansion(query, feedback)
        return _Expansion(
            vector=analyzer.expanded_query_vector(query, expansion),
            added=tuple(t for t in expansion if t not in own),
        )

    def _verify_into(
        self,
        client: NextcloudClient,
        store: VectorStore,
        query: str,
        limit: int,
        candidates: list[Hit],
        results: list[SearchResult],
        counts: VerificationCounts,
        cut: _Cutoff,
        membership: TagMembership | None,
        timings: dict[str, float],
        tree: Node | None,
        documents: _Documents,
    ) -> bool:
        """Verify ``candidates`` (ranked, grouped: ``documents.slice``) into ``results`` until
        ``limit``, reading the whole payloads of each batch first (:meth:`_Documents.read`;
        ``timings``'s ``payloads``, ms, grows by the time that takes); ``True`` when the
        cut-off ended the ranking (no later round can add anything). A candidate moved since
        it was indexed (another verified path, or a check that found it placed elsewhere) is
        passed over when where it is now fails the filter ``tree`` (:func:`_moved_out`; logged
        ``moved_out_of_filter``, and still counted ``kept``: its check kept it); kept or not,
        it is re-checked (``on_stale``) so the index learns where it is.

        A candidate kept unconfirmed (its check failed transiently: ``ERROR``; or its type has
        no verifier: ``UNVERIFIED``) is what ``settings.unverified_results`` says: ``show``n
        whole (fail-open, DESIGN §9), shown without its text (``hide_text``:
        :meth:`_result`), or left out (``drop``, counted ``withheld``, still ``kept``, as
        moved-out ones are, and the page refilled as for drops); either way ``verified`` is
        false. This is the one place the searches of the API, the search page, RCP/1 and
        MCP decide it."""
        assert client.user is not None
        pending = list(candidates)
        exhausted = False
        while pending and len(results) < limit:
            above = [h for h in pending if cut.keeps(h.score)]
            exhausted = exhausted or len(above) < len(pending)
            need = limit - len(results)
            batch, pending = above[:need], above[need:]
            if not batch:
                break
            t0 = time.perf_counter()
            batch = documents.read(store, batch)
            timings["payloads"] += (time.perf_counter() - t0) * 1000
            checks = self.verifier.start(client, [h.payload for h in batch], membership)
            shown = _snippets_meanwhile(batch, query, client.user)
            verdicts = checks.verdicts(counts)
            checked_at = time.time()
            for hit, checked, snip in zip(batch, verdicts, shown, strict=True):
                dropped = checked.verdict in (Verdict.DROPPED, Verdict.INELIGIBLE)
                if (dropped or _moved(hit.payload, client.user, checked)) and self.on_stale:
                    self.on_stale(client.user, DocRef.parse(hit.payload["doc_key"]))
                if dropped:
                    continue
                if _moved_out(hit.payload, client.user, checked, tree):
                    log.info(
                        "moved_out_of_filter", doc_key=hit.payload["doc_key"], user=client.user
                    )
                    continue
                confirmed = checked.verdict is Verdict.KEPT
                policy = self.settings.unverified_results
                if not confirmed and policy == "drop":
                    counts.withheld += 1
                    continue
                cut.saw(hit.score)
                if not cut.keeps(hit.score):
                    exhausted = True
                    continue
                text = confirmed or policy == "show"
                indexed = _indexed_path(hit.payload, client.user)
                path = checked.path or indexed
                if _is_markdown(hit.payload, path) != _is_markdown(hit.payload, indexed):
                    # renamed to or from .md since it was indexed: read as its name is now
                    snip = _hit_snippet(hit.payload, query, path)
                result = self._result(hit, snip, client.user, checked, text=text)
                result.verified = confirmed
                result._verified_at = checked_at if confirmed else None
                results.append(result)
        return exhausted

    @staticmethod
    def _explain(
        results: list[SearchResult],
        branches: dict[str, list[Hit]],
        tree: Node | None,
        expansion: tuple[str, ...],
    ) -> None:
        """Fill each result's :class:`Explain` from the ``branches`` the search fused (each
        result's rank and raw score in each) and the ``expansion`` terms feedback added to its
        BM25 query (those in a BM25-ranked result's chunk: what its sparse score counted
        besides the query's own terms)."""
        ranks: dict[str, dict[str, BranchRank]] = {"dense": {}, "sparse": {}, "title": {}}
        for name, hits in branches.items():
            ranks[name] = {
                h.id: BranchRank(rank=i, score=round(h.score, 6)) for i, h in enumerate(hits, 1)
            }
        filters = tree_dict(tree)
        for r in results:
            sparse = ranks["sparse"].get(r._point_id)
            r.explain = Explain(
                dense=ranks["dense"].get(r._point_id),
                sparse=sparse,
                title=ranks["title"].get(r._point_id),
                fused_score=r.score,
                matched_terms=[
                    MatchedTerm(term=m.term, start=m.start, end=m.end) for m in r._matches
                ],
                feedback_terms=_feedback_terms(r._text, expansion) if sparse else [],
                filters=filters,
                verified_at=r._verified_at,
            )

    def _result(
        self, hit: Hit, shown: Snippet, user: str, checked: Checked, *, text: bool
    ) -> SearchResult:
        """The result of a candidate kept by its check (``checked``), its path the one the
        check found or the indexed one, a Deck card's board and stack titles the check's (their
        ids, and a News item's feed id, the index's: what the filters on them match).
        Unless ``text``, nothing of its chunk's text is in it — no snippet, offsets, chunk text
        or matched terms (an unconfirmed result under NCINDEX_UNVERIFIED_RESULTS=hide_text);
        its title, path and links are kept."""
        p = hit.payload
        result = SearchResult(
            doc_type=p["doc_type"],
            doc_id=p["doc_id"],
            title=p.get("title") or "",
            score=round(hit.score, 6),
            snippet=shown.html() if text else "",
            snippet_title_chars=shown.title_chars if text else 0,
            char_start=p["char_start"] if text else None,
            char_end=p["char_end"] if text else None,
            chunk_index=p["chunk_index"],
            modified_at=p["modified_at"],
            path=checked.path or _indexed_path(p, user),
            owner=p.get("owner"),
            **_place(p, checked),
            url=p.get("url"),
            open_url=open_link(
                self.settings.nextcloud_url, p["doc_type"], p["doc_id"], p.get("url")
            ),
        )
        result._point_id = hit.id
        if text:
            result._text = p.get("text") or ""
            result._matches = shown.matches
        return result

    def documents_at(self, user: str, path: str) -> list[DocRef]:
        """The documents ``user`` can read that the index has at ``path`` (normalised, in
        ``user``'s view: :func:`~ncindex.search.filters.caller_path`), the most recently
        indexed first (greatest ``indexed_at`` of a first chunk; then by key): the first
        chunks whose ``acl`` names ``user`` and whose ``file_path`` holds ``"{user}:{path}"``
        (the keys a ``path`` filter matches). The index's word, which may trail a move: the
        caller verifies what it reads (:meth:`context`). Raises ``StoreUnavailable``."""
        flt = first_chunks(
            acl_condition(user),
            models.FieldCondition(
                key="file_path", match=models.MatchValue(value=path_key(user, path))
            ),
        )
        newest: dict[DocRef, int] = {}
        for p in self.live()[0].scroll(flt, ["doc_type", "doc_id", "indexed_at"], page_size=16):
            ref = DocRef(DocType(p["doc_type"]), p["doc_id"])
            newest[ref] = max(newest.get(ref, 0), int(p.get("indexed_at") or 0))
        return sorted(newest, key=lambda r: (-newest[r], r.key))

    def holds_folder(self, user: str, path: str) -> bool:
        """Whether the index has a document ``user`` can read below ``path`` (normalised, in
        ``user``'s view), so that ``path`` is a folder of ``user``'s as the index has it:
        one first chunk whose ``folder_ancestors`` hold ``"{user}:{path}"``, read from the
        index alone. Raises ``StoreUnavailable``."""
        flt = first_chunks(
            acl_condition(user),
            models.FieldCondition(
                key="folder_ancestors", match=models.MatchValue(value=path_key(user, path))
            ),
        )
        return next(iter(self.live()[0].scroll(flt, ["doc_key"], page_size=1)), None) is not None

    def context(
        self, client: NextcloudClient, ref: DocRef, chunk_index: int, window: int
    ) -> ContextResponse:
        """Chunks ``chunk_index ± window`` of ``ref``'s current version, after checking that
        ``client.user`` can read it: the index must list the user in ``acl`` and the
        document's verifier must keep it. A Deck card's ``board_title``/``stack_title`` are
        that check's, as a search result's (its board GET, which the check makes anyway);
        its ``board_id``/``stack_id`` (a News item's ``feed_id``) the index's.

        Raises :class:`DocumentNotFound` when either check fails (a verifier drop also calls
        ``on_stale``), ``NextcloudAuthError`` when no answer of Nextcloud's showed the
        credential accepted and its OCS then refuses it (a drop that was an app's refusal of
        a Bearer token: :meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`); one kept where
        the index does not have it (moved: another path, or placed elsewhere, :func:`_moved`)
        is answered with the path the check gave and handed to ``on_stale`` too, as a search
        hands it, so the index learns where it is.
        ``ChunkOutOfRange`` when ``chunk_index`` is past the last chunk,
        ``SearchUnavailable`` when Nextcloud cannot confirm it (fail-closed: content is only
        shown once verified) and ``StoreUnavailable`` if the store fails.
        """
        assert client.user is not None
        user = client.user
        points = [
            p
            for p in self.live()[0].document_points(ref.key)
            if principal(user) in (p.payload.get("acl") or [])
        ]
        if not points:
            raise DocumentNotFound(ref.key)
        current = _current_version(points)
        head = current[0].payload
        counts = VerificationCounts()
        (checked,) = self.verifier.check(client, [head], counts)
        if checked.verdict in (Verdict.DROPPED, Verdict.INELIGIBLE):
            client.confirm()  # a credential revoked since it was cached is 401, not a 404
            if self.on_stale is not None:
                self.on_stale(user, ref)
            raise DocumentNotFound(ref.key)
        if checked.verdict is not Verdict.KEPT:
            raise SearchUnavailable(f"could not verify {ref.key} with Nextcloud")
        if self.on_stale is not None and _moved(head, user, checked):
            self.on_stale(user, ref)
        count = int(head.get("chunk_count") or len(current))
        if chunk_index >= len(current):
            raise ChunkOutOfRange(f"chunk_index {chunk_index} is past the last chunk ({count - 1})")
        lo, hi = max(0, chunk_index - window), min(len(current), chunk_index + window + 1)
        return ContextResponse(
            doc_type=ref.doc_type.value,
            doc_id=ref.doc_id,
            title=head.get("title") or "",
            path=checked.path or (head.get("paths") or {}).get(user),
            **_place(head, checked),
            url=head.get("url"),
            chunk_count=count,
            chunks=[
                ContextChunk(
                    chunk_index=int(p.payload["chunk_index"]),
                    text=p.payload.get("text") or "",
                    char_start=int(p.payload["char_start"]),
                    char_end=int(p.payload["char_end"]),
                )
                for p in current[lo:hi]
            ],
        )

    def close(self) -> None:
        """Stop the verification pool."""
        self.verifier.close()


class _Documents:
    """The documents a search's rounds have met: the group keys (:func:`group_key`) of the
    slices read, the ``doc_key`` of each candidate read for verification, and the current
    slice's hits of each document, best first, so that a candidate whose point is gone by
    the time its payload is read (its old version deleted by a rewrite since the ranking) is
    read from its document's next hit in the slice instead."""

    def __init__(self) -> None:
        self._groups: set[str] = set()
        self._doc_keys: set[str] = set()
        self._hits: dict[str, list[Hit]] = {}

    def slice(self, hits: list[Hit]) -> list[Hit]:
        """The best hit of each document among a round's ``hits`` (ready for grouping:
        :func:`keyed`) that no earlier slice held (:func:`group_hits`'s order)."""
        self._hits = {}
        for hit in sorted(hits, key=lambda h: (-h.score, h.id)):
            self._hits.setdefault(group_key(hit), []).append(hit)
        best = [h for h in group_hits(hits) if group_key(h) not in self._groups]
        self._groups.update(group_key(h) for h in best)
        return best

    def read(self, store: VectorStore, batch: list[Hit]) -> list[Hit]:
        """``batch`` (candidates of the current slice) with their whole payloads, in order.
        A candidate whose point is gone is replaced by its document's best hit of the slice
        still stored (the document's other hits read in one more request), or — none left —
        passed over, and may come back with a later slice's hits. A document whose
        ``doc_key`` an earlier candidate had (one text held under two id schemes) is passed
        over. Raises ``StoreUnavailable``."""
        payloads = store.retrieve([h.id for h in batch])
        spare = [
            o.id
            for h in batch
            if h.id not in payloads
            for o in self._hits.get(group_key(h), ())
            if o.id != h.id
        ]
        if spare:
            payloads.update(store.retrieve(spare))
        read: list[Hit] = []
        for hit in batch:
            kept = self._hits.get(group_key(hit), [hit])  # the hit itself first
            stored = next((h for h in kept if h.id in payloads), None)
            if stored is None:
                self._groups.discard(group_key(hit))
                continue
            doc_key = payloads[stored.id]["doc_key"]
            if doc_key not in self._doc_keys:
                self._doc_keys.add(doc_key)
                read.append(Hit(stored.id, stored.score, payloads[stored.id]))
        return read


class _Cutoff:
    """The score floor: ``min_score`` (absolute) and ``threshold × best kept score``."""

    def __init__(self, threshold: float | None, min_score: float | None) -> None:
        self.threshold = threshold
        self.floor = -math.inf if min_score is None else min_score
        self.best: float | None = None

    def saw(self, score: float) -> None:
        if self.best is None or score > self.best:
            self.best = score

    def keeps(self, score: float) -> bool:
        if score < self.floor:
            return False
        if self.threshold and self.best is not None:
            return score >= self.threshold * self.best
        return True


@dataclass(frozen=True, slots=True)
class _Expansion:
    """A BM25 query expanded by feedback: its ``vector`` and the terms ``added`` to the
    query's own, the most weighted first."""

    vector: SparseVector
    added: tuple[str, ...]


def _holds_any(text: str, terms: set[str]) -> bool:
    """Whether ``text`` (a chunk's) holds at least one of the BM25 ``terms`` (a query's,
    :func:`~ncindex.embedding.analyzer.terms`): whether the query's BM25 branch can match it."""
    return bool(analyzer.occurrences(text, terms))


def _feedback_terms(text: str, expansion: tuple[str, ...]) -> list[FeedbackTerm]:
    """The ``expansion`` terms found in a chunk's ``text`` (what its BM25 vector counts: the
    same analysis), in ``expansion``'s order, each with its first occurrence as written."""
    first: dict[str, str] = {}
    for t in analyzer.occurrences(text, frozenset(expansion)):
        first.setdefault(t.text, text[t.start : t.end])
    return [FeedbackTerm(term=term, word=first[term]) for term in expansion if term in first]


def _snippets_meanwhile(batch: list[Hit], query: str, user: str) -> list[Snippet]:
    """The snippet of each hit's chunk for ``query``, read as its indexed path for ``user``
    names it (:func:`_hit_snippet`), built while the batch's checks are in
    flight in the verifier's threads. After each one the thread yields the interpreter
    (``time.sleep(0)``): a thread waiting for it otherwise waits out the switch interval (5
    ms, ``sys.getswitchinterval``) behind this loop before it can send its request or read
    its answer, which made the overlap slower than building the snippets after the checks
    (benchmarks/RESULTS.md, Scale)."""
    shown = []
    for hit in batch:
        shown.append(_hit_snippet(hit.payload, query, _indexed_path(hit.payload, user)))
        time.sleep(0)
    return shown


def _hit_snippet(payload: dict[str, Any], query: str, path: str | None) -> Snippet:
    """The snippet of a point's chunk for ``query``, its text read as Markdown when the
    document is at ``path`` (:func:`_is_markdown`)."""
    text = payload.get("text") or ""
    title = _title_chars(payload, text)
    return snippet(text, query, title=title, markdown=_is_markdown(payload, path))


def _indexed_path(payload: dict[str, Any], user: str) -> str | None:
    """The path the index has for a point's document in ``user``'s view (``None``: none)."""
    path: str | None = (payload.get("paths") or {}).get(user)
    return path


def _title_chars(payload: dict[str, Any], text: str) -> int:
    """How many of the first characters of a point's chunk ``text`` are its document's title
    (:func:`~ncindex.documents.opening_title`; the chunk starts ``char_start`` characters into
    the document's text, so a chunk that starts inside a long title holds the rest of it): 0
    for a chunk that starts past the title. Also 0 for a text that does not start with that
    title, which is not expected (a payload's title and text come from one document): then
    no body's words are given out as a title."""
    title = opening_title(payload["doc_type"], payload.get("title") or "")
    rest = title[int(payload.get("char_start") or 0) :][: len(text)]
    return len(rest) if rest and text.startswith(rest) else 0


def _is_markdown(payload: dict[str, Any], path: str | None) -> bool:
    """Whether a chunk's text is Markdown, as the search page reads it (search_api/static/
    app.js showText, by the result's doc_type and ``path``): a note's (:mod:`ncindex.sources.note`:
    a note is a Markdown file), a Deck card's (its description, which Deck renders as Markdown:
    nextcloud/deck src/components/card/Description.vue), a file's at a ``path`` (the
    searching user's, the result's: a share's recipient names it in their own view, nextcloud/
    server apps/files_sharing/lib/SharedMount.php ``moveMount``, and a file can be renamed
    since it was indexed) named ``.md``/``.markdown``."""
    if payload.get("doc_type") in ("note", "deck_card"):
        return True
    return (path or "").lower().endswith((".md", ".markdown"))


def _current_version(points: list[PointRecord]) -> list[PointRecord]:
    """The points of the newest version (a new version is written before the old one is
    deleted, so two may briefly coexist), one per ``chunk_index`` and ordered by it; a chunk
    held twice (one text written under both id schemes until the clean-up deletes the older
    points) is the point whose id names its document (:func:`~ncindex.documents.point_document`)."""
    newest = max(points, key=lambda p: p.payload.get("indexed_at") or 0)
    version = newest.payload.get("content_hash")
    chunks: dict[int, PointRecord] = {}
    for p in points:
        if p.payload.get("content_hash") != version:
            continue
        index = int(p.payload.get("chunk_index") or 0)
        if index not in chunks or point_document(p.id) is not None:
            chunks[index] = p
    return [chunks[i] for i in sorted(chunks)]
