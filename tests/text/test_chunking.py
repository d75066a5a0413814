"""Chunking: token-sized, structure-aware, with exact character offsets (DESIGN §8)."""

from __future__ import annotations

import itertools
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from semantic_text_splitter import MarkdownSplitter, TextSplitter
from tokenizers import Encoding, Tokenizer

from ncindex.embedding.models import load_tokenizer
from ncindex.settings import Settings
from ncindex.text.chunking import _LITERAL_LESS_THAN, _NOT_INLINE_MARKUP, Chunker

WORDS = [
    "the",
    "index",
    "keeps",
    "every",
    "note",
    "file",
    "and",
    "card",
    "in",
    "sync",
    "with",
    "the",
    "cloud",
    "while",
    "workers",
    "embed",
    "chunks",
    "of",
    "text",
    "into",
    "vectors",
    "search",
    "verifies",
    "each",
    "result",
    "against",
    "the",
    "server",
    "before",
    "it",
    "answers",
    "a",
    "query",
    "about",
    "projects",
    "budgets",
    "meetings",
    "travel",
    "recipes",
    "gardens",
    "invoices",
    "reports",
    "Grüße",
    "naïve",
    "café",
    "Zürich",
    "résumé",
    "東京",
    "наука",
    "emoji",
    "😀",
    "🚀",
    "👩\u200d💻",
]


def prose(rng: random.Random, paragraphs: int, sentences: tuple[int, int] = (2, 6)) -> str:
    out = []
    for _ in range(paragraphs):
        sents = []
        for _ in range(rng.randint(*sentences)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 18))]
            sents.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sents))
    return "\n\n".join(out)


def check_chunks(chunker: Chunker, text: str, chunks) -> None:
    """Every invariant a chunk list must meet."""
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert c.text.strip()  # never blank (edges are trimmed by Rust's notion of space)
        assert chunker.count_tokens(c.text) <= chunker.model_max_tokens
        if not c.text.startswith("#"):  # a heading attached to a chunk may exceed max_tokens
            assert chunker.count_tokens(c.text, special_tokens=False) <= chunker.max_tokens
    starts = [c.char_start for c in chunks]
    assert starts == sorted(starts)
    # nothing is lost: every non-whitespace character lies inside some chunk
    covered = bytearray(len(text))
    for c in chunks:
        covered[c.char_start : c.char_end] = b"\x01" * (c.char_end - c.char_start)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"characters outside every chunk at {missing[:10]}"


def test_empty_and_whitespace_give_no_chunks(chunker: Chunker) -> None:
    for text in ("", " ", "\n\n\t  \r\n", "\u3000\u00a0 "):
        assert chunker.chunk_text(text, markdown=False) == []
        assert chunker.chunk_text(text, markdown=True) == []


def test_short_text_is_one_chunk_with_offsets(chunker: Chunker) -> None:
    text = "  \n Grüße aus Zürich 😀 — a short note.\n\n"
    [chunk] = chunker.chunk_text(text, markdown=False)
    assert chunk.text == "Grüße aus Zürich 😀 — a short note."
    assert (chunk.char_start, chunk.char_end) == (4, 4 + len(chunk.text))


def test_long_prose_respects_token_limits_and_offsets(chunker: Chunker) -> None:
    text = prose(random.Random(7), 120)
    started = time.perf_counter()
    chunks = chunker.chunk_text(text, markdown=False)
    elapsed = time.perf_counter() - started
    assert len(chunks) > 20
    check_chunks(chunker, text, chunks)
    tokens = [chunker.count_tokens(c.text, special_tokens=False) for c in chunks]
    assert max(tokens) <= 200
    assert sum(tokens) / len(tokens) > 100  # chunks are filled, not fragments
    print(f"{len(text)} chars → {len(chunks)} chunks in {elapsed:.3f}s")


def test_overlap_between_neighbours(make_chunker) -> None:
    # one long paragraph: split at sentences, neighbours share up to 32 tokens of sentences
    text = prose(random.Random(3), 1, sentences=(150, 150))
    chunker = make_chunker(200, 32)
    chunks = chunker.chunk_text(text, markdown=False)
    check_chunks(chunker, text, chunks)
    shared = [
        chunker.count_tokens(text[b.char_start : a.char_end], special_tokens=False)
        for a, b in itertools.pairwise(chunks)
        if b.char_start < a.char_end
    ]
    assert len(shared) >= len(chunks) // 2
    assert max(shared) <= 32
    no_overlap = make_chunker(200, 0).chunk_text(text, markdown=False)
    assert all(b.char_start >= a.char_end for a, b in itertools.pairwise(no_overlap))


def test_no_overlap_across_whole_paragraphs(chunker: Chunker) -> None:
    # paragraphs longer than the overlap are never repeated: a chunk boundary between
    # paragraphs is a clean cut (semantic-text-splitter overlaps whole units of the level)
    text = prose(random.Random(3), 60, sentences=(6, 10))
    chunks = chunker.chunk_text(text, markdown=False)
    check_chunks(chunker, text, chunks)
    assert all(b.char_start >= a.char_end for a, b in itertools.pairwise(chunks))


def test_paragraph_boundaries_preferred(make_chunker) -> None:
    rng = random.Random(11)
    paragraphs = [prose(rng, 1, sentences=(3, 3)) for _ in range(12)]
    text = "\n\n".join(paragraphs)
    chunker = make_chunker(120, 0)
    chunks = chunker.chunk_text(text, markdown=False)
    assert len(chunks) > 1
    # each chunk starts at the start of a paragraph (they are all shorter than the limit)
    para_starts = {text.index(p) for p in paragraphs}
    assert all(c.char_start in para_starts for c in chunks)


def test_markdown_sections_start_chunks(make_chunker) -> None:
    rng = random.Random(5)
    sections = [f"## Section {i}\n\n{prose(rng, 2, sentences=(3, 4))}" for i in range(8)]
    text = "# Title\n\n" + "\n\n".join(sections)
    chunker = make_chunker(200, 0)
    chunks = chunker.chunk_text(text, markdown=True)
    check_chunks(chunker, text, chunks)
    assert len(chunks) >= 4
    assert all(c.text.startswith("#") for c in chunks)


def test_title_heading_is_attached_to_the_first_chunk(make_chunker) -> None:
    rng = random.Random(11)
    body = prose(rng, 1, sentences=(30, 30))  # one paragraph longer than a chunk
    text = f"# Lighthouse maintenance plan\n\n{body}"
    chunker = make_chunker(200, 32)
    chunks = chunker.chunk_text(text, markdown=True)
    check_chunks(chunker, text, chunks)
    assert len(chunks) >= 2
    assert chunks[0].char_start == 0 and chunks[0].text.startswith("# Lighthouse")
    assert chunker.count_tokens(chunks[0].text, special_tokens=False) > len("Lighthouse") // 4
    assert not any(c.text.strip() == "# Lighthouse maintenance plan" for c in chunks)
    # without attaching, the markdown splitter leaves the title as a chunk of its own
    bare = Chunker(
        chunker._tokenizer,
        max_tokens=200,
        overlap_tokens=32,
        model_max_tokens=256,
        attach_headings=False,
    ).chunk_text(text, markdown=True)
    assert bare[0].text == "# Lighthouse maintenance plan"
    assert len(bare) == len(chunks) + 1


def test_markdown_paragraph_is_not_cut_at_its_quotes_or_amounts(chunker: Chunker) -> None:
    # a note of one paragraph longer than a chunk, with apostrophes and a quoted word (French
    # elision too), amounts of money and comparisons: semantic-text-splitter's markdown parse
    # made each straight quote and "<" a text node of its own, and two dollar signs inline math,
    # and cut there ("Parkinson'" | "'s disease.", "and US" | "$42", "(p <" | "< 0.001)"),
    # inside words and sentences, leaving the quoted "90-90-90" as a chunk alone; cut at
    # sentences like the text splitter, it is not ("x<y" still may be: "<y" could open a tag)
    rng = random.Random(21)
    sentences = [
        "Parkinson's disease isn't rare, and the patients' carers don't rest.",
        'The "90-90-90" targets of the "treat all" plan weren\'t met.',
        "L'équipe d'Annecy n'a pas fini l'été.",
        "Lunch cost $12 and the taxi $30, so the whole trip came to US$42 in the end.",
        "Risk fell by 25% (p < 0.001) and by 23% (p <0.05) in both arms.",
    ]
    body = " ".join(
        rng.choice(sentences) if i % 2 else prose(rng, 1, sentences=(1, 1)) for i in range(40)
    )
    text = f"# Parkinson's notes\n\n{body}"
    chunks = chunker.chunk_text(text, markdown=True)
    check_chunks(chunker, text, chunks)
    assert len(chunks) >= 3
    for c in chunks:
        assert c.char_start == 0 or not text[c.char_start - 1].isalnum(), c.text[:30]
        assert c.char_end == len(text) or not text[c.char_end].isalnum(), c.text[-30:]
        assert chunker.count_tokens(c.text, special_tokens=False) > 20, c.text
    # the chunks end where the text splitter's do: at sentences
    assert all(c.text.endswith((".", "?", "!")) for c in chunks)


def test_heading_too_long_to_attach_stays_alone(make_chunker) -> None:
    chunker = make_chunker(200, 0)
    body = prose(random.Random(12), 1, sentences=(30, 30))
    heading = "# " + " ".join(["lighthouse"] * 120)  # ~120 tokens: 120 + a full chunk > 254
    text = f"{heading}\n\n{body}"
    chunks = chunker.chunk_text(text, markdown=True)
    check_chunks(chunker, text, chunks)
    assert all(chunker.count_tokens(c.text) <= chunker.model_max_tokens for c in chunks)


def test_chunk_tokens_256_still_fits_with_special_tokens(make_chunker) -> None:
    chunker = make_chunker(256, 32)
    assert chunker.max_tokens == 254  # 256 minus [CLS] and [SEP]
    text = prose(random.Random(9), 80)
    chunks = chunker.chunk_text(text, markdown=False)
    check_chunks(chunker, text, chunks)
    assert max(chunker.count_tokens(c.text) for c in chunks) <= 256


def test_unbreakable_text_is_split_at_characters(chunker: Chunker) -> None:
    # no spaces, no sentences: one "word" of 5,000 CJK characters, one token each
    text = "東京大学" * 1250
    chunks = chunker.chunk_text(text, markdown=False)
    assert len(chunks) > 20
    check_chunks(chunker, text, chunks)


def test_from_settings_uses_settings_sizes(model_dir) -> None:
    chunker = Chunker.from_settings(
        Settings(model_dir=model_dir, chunk_tokens=64, chunk_overlap_tokens=8)
    )
    assert (chunker.max_tokens, chunker.overlap_tokens, chunker.model_max_tokens) == (64, 8, 256)
    text = prose(random.Random(1), 20)
    chunks = chunker.chunk_text(text, markdown=False)
    check_chunks(chunker, text, chunks)
    assert max(chunker.count_tokens(c.text, special_tokens=False) for c in chunks) <= 64


def test_bad_sizes_rejected(make_chunker) -> None:
    with pytest.raises(ValueError):
        make_chunker(32, 32)


def test_a_truncating_tokenizer_is_rejected(text_model_paths) -> None:
    # tokenizer.json as shipped truncates at 128 tokens and pads: counted from one truncated
    # encoding, a 100,000-character text came out as 3 chunks, one of 61,720 characters.
    # Failed before the fix (no error).
    shipped = Tokenizer.from_file(str(text_model_paths.dense_dir / "tokenizer.json"))
    with pytest.raises(ValueError, match="truncates or pads"):
        Chunker(shipped, max_tokens=200, overlap_tokens=32, model_max_tokens=256)


# --- property: offsets hold for any unicode text ----------------------------------------------

_pieces = st.one_of(
    st.text(min_size=1, max_size=12),  # any unicode (no surrogates): CJK, RTL, combining marks
    st.sampled_from(WORDS),
    st.sampled_from(["\n", "\n\n", " ", "  ", "\t", "# ", "## ", "- ", "* ", "```", "> ", ". "]),
    st.sampled_from(["😀", "👩‍💻", "🇩🇪", "e\u0301", "\u200d", "\ufeff", "\r\n", "\u2028"]),
)
_texts = st.lists(_pieces, max_size=300).map("".join)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=_texts, markdown=st.booleans())
def test_offsets_property(make_chunker, text: str, markdown: bool) -> None:
    chunker = make_chunker(16, 4)  # small chunks so that most examples split
    chunks = chunker.chunk_text(text, markdown=markdown)
    if not text.strip():
        assert chunks == []
    check_chunks(chunker, text, chunks)


# --- the splitter sizes candidates from one encoding of the text ------------------------------


@pytest.fixture(scope="module")
def tokenizer(text_model_paths) -> Tokenizer:
    return load_tokenizer(text_model_paths.dense_dir)


class CountingTokenizer:
    """The chunker's tokenizer, counting the characters it is asked to encode."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self.chars = 0

    def encode(self, text: str, **kwargs: bool) -> Encoding:
        self.chars += len(text)
        return self._tokenizer.encode(text, **kwargs)

    def encode_batch(self, texts: list[str], **kwargs: bool) -> list[Encoding]:
        self.chars += sum(len(text) for text in texts)
        return self._tokenizer.encode_batch(texts, **kwargs)

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokenizer, name)


@pytest.mark.parametrize("markdown", [False, True])
def test_characters_tokenised_grow_linearly_with_one_long_line(
    tokenizer: Tokenizer, markdown: bool
) -> None:
    # A paragraph on one line (a .txt file, a format=flowed mail) gives the splitter no
    # boundary above sentences; it tokenised each candidate chunk from the chunk's start,
    # 15-23 characters per character of text and more the longer the text. Now the text is
    # encoded once (the markdown heading check encodes a merged heading and chunk as well).
    # Fails on the old code: its splitter tokenised in Rust, the counter saw nothing.
    counting = CountingTokenizer(tokenizer)
    chunker = Chunker(counting, max_tokens=200, overlap_tokens=32, model_max_tokens=256)  # type: ignore[arg-type]
    read = []
    for paragraphs in (60, 240):  # about 30,000 and 120,000 characters
        text = " ".join(prose(random.Random(paragraphs), paragraphs).split())
        counting.chars = 0
        chunks = chunker.chunk_text(text, markdown=markdown)
        assert len(chunks) >= paragraphs // 3
        read.append(counting.chars / len(text))
    assert all(1 <= per_char < 1.1 for per_char in read), read


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=_texts, markdown=st.booleans(), sizes=st.sampled_from([(16, 4), (40, 0), (24, 23)]))
def test_chunks_are_those_of_the_splitter_tokenising_each_candidate(
    make_chunker, tokenizer: Tokenizer, text: str, markdown: bool, sizes: tuple[int, int]
) -> None:
    # guard (passes on the old code, which was this reference): counting from one encoding
    # gives the chunks of semantic-text-splitter's own tokenizer sizer, cut for cut
    chunker = make_chunker(*sizes)
    kind = MarkdownSplitter if markdown else TextSplitter
    reference = kind.from_huggingface_tokenizer(
        tokenizer, chunker.max_tokens, overlap=sizes[1], trim=True
    )
    read = _LITERAL_LESS_THAN.sub("%", text.translate(_NOT_INLINE_MARKUP)) if markdown else text
    expected = [(s, s + len(p)) for s, p in reference.chunk_indices(read) if p.strip()]
    chunks = chunker.chunk_text(text, markdown=markdown)
    if markdown:  # headings-only chunks merged into the next: compare the cuts the splitter made
        assert {c.char_end for c in chunks} <= {end for _, end in expected}
        chunks = Chunker(
            tokenizer,
            max_tokens=sizes[0],
            overlap_tokens=sizes[1],
            model_max_tokens=chunker.model_max_tokens,
            attach_headings=False,
        ).chunk_text(text, markdown=True)
    assert [(c.char_start, c.char_end) for c in chunks] == expected
