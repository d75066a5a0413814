"""Structure-aware chunking sized in the dense model's tokens (DESIGN §8).

Text is split recursively at the coarsest boundary that fits — headings and sections
(markdown), blank-line paragraphs, lines, sentences, words, and characters only as a last
resort — by ``semantic-text-splitter`` (``MarkdownSplitter`` for markdown, ``TextSplitter``
otherwise), which measures candidate chunks in the dense model's own ``tokenizers`` tokens,
counted by :class:`~ncindex.text.token_spans.SubstringTokens` from one encoding of the whole
text (the splitter's own sizer tokenised each candidate: 15–23 characters read per character
of a paragraph on one line). Sizes are tokens, not characters: all-MiniLM-L6-v2 reads at most
256 tokens (including its ``[CLS]``/``[SEP]``), so a chunk sized in characters could lose half
its text in the dense vector.

Every :class:`~ncindex.documents.Chunk` carries character offsets into the text it was cut
from, ``text[chunk.char_start:chunk.char_end] == chunk.text``. semantic-text-splitter's
``chunk_indices`` returns the start as a *character* offset in its Python binding (0.33; its
Rust API counts bytes) — the tests check it with non-ASCII text and emoji, and
:meth:`Chunker.chunk_text` checks it at run time as well.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from semantic_text_splitter import MarkdownSplitter, TextSplitter

from ncindex.documents import Chunk
from ncindex.embedding.models import load_tokenizer, model_max_tokens, ready_model
from ncindex.text.token_spans import SubstringTokens

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ncindex.settings import Settings


_ATX_HEADING = re.compile(r"^#{1,6}(\s|$)")

# What the markdown splitter reads in place of straight quotes and dollar signs: one character
# each, as the chunk offsets need, one token each to the MiniLM tokenizer as the originals, and
# no markdown. semantic-text-splitter parses markdown with pulldown-cmark's ``Options::all()``
# (benbrandt/text-splitter ``src/splitter/markdown.rs``, ``MarkdownSplitter::parse``), which
# turns on smart punctuation and math: every ``'`` and ``"`` becomes a text node of its own, and
# two ``$`` in a paragraph ("US$45.8 … US$48.7") an inline math node; such nodes are an *inline*
# level, which the splitter prefers to sentences and words. A paragraph too long for one chunk
# was then cut at its apostrophes — "Parkinson'" | "'s disease." — leaving chunks that end and
# start inside words (and a quoted word such as ``"90-90-90"`` as a chunk of its own, matching
# any query by meaning), or at an amount of money. A ``<`` is a text node of its own too, so
# "25% (p < 0.001)" was cut at it: one that cannot open HTML, a comment or an autolink (CommonMark
# 0.31 §6.5, §6.6: those need a letter, ``/``, ``!`` or ``?`` right after it) is read as ``%``.
_NOT_INLINE_MARKUP = str.maketrans({"'": "\u2019", '"': "\u201d", "$": "%"})
_LITERAL_LESS_THAN = re.compile(r"<(?![A-Za-z/!?])")


class Chunker:
    """Cuts text into overlapping chunks of at most ``max_tokens`` model tokens.

    ``tokenizer`` is the dense model's ``tokenizers.Tokenizer``; its truncation and padding must
    be off (:func:`ncindex.embedding.models.load_tokenizer` gives such a one, as does
    ``Embedder.tokenizer``; ``ValueError`` otherwise: counted from a truncated encoding, the
    text past the limit would weigh nothing). ``max_tokens`` counts the chunk's own tokens; it
    is lowered if needed so that a chunk plus the model's special tokens fits in
    ``model_max_tokens`` (the model's input limit). ``overlap_tokens`` is the largest overlap
    between neighbouring chunks, tokens; it must be below the effective ``max_tokens``
    (``ValueError`` otherwise). The overlap is made of whole units of the level being split
    (sentences of a long paragraph, say), so neighbours cut between paragraphs longer than the
    overlap share nothing. With ``attach_headings`` (markdown only), a chunk made only of
    headings is merged into the chunk after it when the result fits ``model_max_tokens``; such a
    chunk may then exceed ``max_tokens`` by the heading's length. Thread-safe (each call builds
    its own splitter).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        max_tokens: int,
        overlap_tokens: int,
        model_max_tokens: int,
        attach_headings: bool = True,
    ) -> None:
        if tokenizer.truncation is not None or tokenizer.padding is not None:
            raise ValueError("the tokenizer truncates or pads: load it with load_tokenizer")
        specials = tokenizer.num_special_tokens_to_add(is_pair=False)
        capacity = min(max_tokens, model_max_tokens - specials)
        if capacity < 1:
            raise ValueError(f"no room for text: max_tokens {max_tokens}, model {model_max_tokens}")
        if not 0 <= overlap_tokens < capacity:
            raise ValueError(f"overlap_tokens {overlap_tokens} must be in [0, {capacity})")
        self._tokenizer = tokenizer
        self.max_tokens = capacity
        self.overlap_tokens = overlap_tokens
        self.model_max_tokens = model_max_tokens
        self.attach_headings = attach_headings

    @classmethod
    def from_settings(cls, settings: Settings) -> Chunker:
        """A chunker for ``settings.dense_model`` in ``settings.model_dir``, sized by
        ``chunk_tokens`` and ``chunk_overlap_tokens``. The model's input limit is the
        ``model_max_length`` of its ``tokenizer_config.json``. The packaged default model is
        built there when its files are missing, as the embedder does
        (:func:`~ncindex.embedding.models.ready_model`); for another model that raises
        :class:`~ncindex.embedding.models.ModelError` naming the folder."""
        # ``ncindex extract --chunks`` meets this before any embedder, and said only that
        # tokenizer_config.json had no model_max_length
        dense_dir = ready_model(settings.model_dir, settings.dense_model).dense_dir
        return cls.from_model_dir(
            dense_dir,
            max_tokens=settings.chunk_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            model_max_tokens=model_max_tokens(dense_dir),
        )

    @classmethod
    def from_model_dir(
        cls,
        dense_dir: Path,
        *,
        max_tokens: int,
        overlap_tokens: int,
        model_max_tokens: int,
        attach_headings: bool = True,
    ) -> Chunker:
        """A chunker using the tokenizer in ``dense_dir`` (see :class:`Chunker` for the sizes)."""
        return cls(
            load_tokenizer(dense_dir),
            max_tokens=max_tokens,
            overlap_tokens=overlap_tokens,
            model_max_tokens=model_max_tokens,
            attach_headings=attach_headings,
        )

    def chunk_text(self, text: str, *, markdown: bool) -> list[Chunk]:
        """Split ``text`` into chunks, in order, indexed from 0.

        ``markdown`` selects the markdown-aware splitter (headings, lists, code blocks as
        boundaries). Chunks carry character offsets into ``text``; leading and trailing
        whitespace is trimmed from each chunk. Empty or whitespace-only text gives ``[]``.
        The markdown splitter reads the text with its straight quotes replaced by curly ones
        and its dollar signs and literal ``<`` by ``%`` (``_NOT_INLINE_MARKUP``,
        ``_LITERAL_LESS_THAN``), so that it never cuts at a quote, an amount or a comparison;
        the chunks hold the text as given.
        """
        if not text.strip():
            return []
        read = text
        if markdown:
            read = _LITERAL_LESS_THAN.sub("%", text.translate(_NOT_INLINE_MARKUP))
        tokens = SubstringTokens(self._tokenizer, read)
        # a splitter per text: its sizer knows the text's encoding (building one is cheap)
        kind = MarkdownSplitter if markdown else TextSplitter
        splitter = kind.from_callback(
            tokens, self.max_tokens, overlap=self.overlap_tokens, trim=True
        )
        chunks: list[Chunk] = []
        for start, piece in splitter.chunk_indices(read):
            end = start + len(piece)
            if read[start:end] != piece:  # would mean the binding switched to byte offsets
                raise RuntimeError(f"chunk offsets do not match the text at {start}")
            if piece.strip():
                chunks.append(Chunk(len(chunks), text[start:end], start, end))
        if markdown and self.attach_headings:
            chunks = self._attach_headings(text, chunks)
        return chunks

    def _attach_headings(self, text: str, chunks: list[Chunk]) -> list[Chunk]:
        """Merge each chunk made only of markdown headings into the chunk after it, when the
        merged chunk still fits the model's input (``model_max_tokens`` with special tokens).

        The markdown splitter cuts a section too long for one chunk at its heading, so a
        note's title (its first line) would otherwise be a chunk of a few tokens, and no
        chunk of the body would carry it — measured on SciFact in benchmarks/RESULTS.md.
        Merged chunks are contiguous slices of ``text``, so offsets stay exact.
        """
        out: list[Chunk] = []
        carry: Chunk | None = None
        for chunk in chunks:
            if carry is not None:
                merged = text[carry.char_start : chunk.char_end]
                if self.count_tokens(merged) <= self.model_max_tokens:
                    chunk = Chunk(0, merged, carry.char_start, chunk.char_end)
                else:
                    out.append(carry)
                carry = None
            if _headings_only(chunk.text):
                carry = chunk
            else:
                out.append(chunk)
        if carry is not None:
            out.append(carry)
        return [Chunk(i, c.text, c.char_start, c.char_end) for i, c in enumerate(out)]

    def count_tokens(self, text: str, *, special_tokens: bool = True) -> int:
        """Number of model tokens in ``text``, with the special tokens by default (what the
        dense model reads; compare with ``model_max_tokens``)."""
        return len(self._tokenizer.encode(text, add_special_tokens=special_tokens).ids)


def _headings_only(text: str) -> bool:
    """Whether every non-blank line of ``text`` is an ATX markdown heading (``#`` … ``######``
    followed by a space or the line's end)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(lines) and all(_ATX_HEADING.match(line) for line in lines)
