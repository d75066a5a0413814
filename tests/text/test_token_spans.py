"""Token counts of substrings from one encoding of the whole text (``SubstringTokens``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Encoding, Tokenizer

from ncindex.embedding.models import ModelPaths, load_tokenizer
from ncindex.text import token_spans
from ncindex.text.token_spans import SubstringTokens

# what a word of BERT's tokenizer is made of, and what could make a piece tokenise differently
# from the same characters inside the text: accents and combining marks, final sigma, dotted
# capital I, CJK and Thai, emoji sequences, format and control characters, the tokenizer's
# own special tokens, and a word longer than WordPiece's 100 characters (one [UNK])
_pieces = st.one_of(
    st.text(min_size=1, max_size=8),
    st.sampled_from(
        [" ", "  ", "\n", "\n\n", "\t", ".", ",", "'", '"', "-", "_", "#", "$", "<", "(", ")"]
    ),
    st.sampled_from(["word", "tokenizer", "Σίσυφος", "ΣΑΣ", "İstanbul", "straße", "naïve"]),
    st.sampled_from(
        [
            "e\u0301",
            "\u0301",
            "\u0316",
            "\u200d",
            "\u200b",
            "\u00ad",
            "\x00",
            "\ufffd",
            "\U0001d165",
            "\u0f73",
        ]
    ),
    st.sampled_from(["東京大学", "한국어", "ภาษาไทย", "😀", "👍🏽", "👩\u200d💻", "🇩🇪"]),
    st.sampled_from(["[SEP]", "[CLS]", "[MASK]", "[UNK]", "##ing", "x" * 120]),
)
_texts = st.lists(_pieces, max_size=120).map("".join)


@pytest.fixture(scope="module")
def tokenizer(text_model_paths: ModelPaths) -> Tokenizer:
    return load_tokenizer(text_model_paths.dense_dir)


def _tokens(tokenizer: Tokenizer, piece: str) -> int:
    return len(tokenizer.encode(piece, add_special_tokens=False).ids)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_texts, seed=st.integers(0, 2**32))
def test_counts_equal_tokenising_each_piece(tokenizer: Tokenizer, text: str, seed: int) -> None:
    _check_counts(tokenizer, text, seed)


def _check_counts(tokenizer: Tokenizer, text: str, seed: int) -> None:
    count = SubstringTokens(tokenizer, text)
    rng = random.Random(seed)
    for _ in range(30):
        start = rng.randint(0, len(text))
        end = rng.randint(start, len(text))
        piece = text[start:end]
        assert count(piece) == _tokens(tokenizer, piece), (start, end)
    assert count("not in the text at all") == _tokens(tokenizer, "not in the text at all")


def test_pieces_at_word_edges_and_inside_words(tokenizer: Tokenizer) -> None:
    text = "Alpha beta, gamma. Delta epsilon — zeta eta theta. " * 50
    count = SubstringTokens(tokenizer, text)
    assert count(text[0:18]) == _tokens(tokenizer, "Alpha beta, gamma.")
    assert count(text[6:200]) == _tokens(tokenizer, text[6:200])
    # cut inside a word: "lpha" tokenises alone, differently from its place in "Alpha"
    assert count(text[1:18]) == _tokens(tokenizer, text[1:18])


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("\u0300\U0001d165", 1),  # grave (class 230) then musical stem (class 216, kept)
        ("a\u0301\U0001d165 b", 2),
        ("\u0f73\u0300\U0001d165", 2),  # Tibetan II decomposes to two marks
        ("\u0300\x1f\U0001d165", 1),  # the control character between is deleted first
        ("\u0300" + "\x1f" * 40 + "\U0001d165", 1),  # more of them than are looked through
    ],
)
def test_cut_before_a_mark_reordered_by_nfd(tokenizer: Tokenizer, text: str, start: int) -> None:
    # NFD puts the kept spacing mark before the dropped grave accent, so in the encoding of the
    # whole text the mark's token sits at the accent's place, before the cut; the piece after
    # the cut holds it (one [UNK]). Failed before the fix: counted 0.
    count = SubstringTokens(tokenizer, text)
    piece = text[start:]
    assert count(piece) == _tokens(tokenizer, piece)


class RecordingTokenizer:
    """The tokenizer, recording the length of each text given to ``encode`` (which holds the
    GIL throughout) and to ``encode_batch`` (which releases it)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self.holding: list[int] = []
        self.releasing: list[int] = []

    def encode(self, text: str, **kwargs: bool) -> Encoding:
        self.holding.append(len(text))
        return self._tokenizer.encode(text, **kwargs)

    def encode_batch(self, texts: list[str], **kwargs: bool) -> list[Encoding]:
        self.releasing.extend(len(text) for text in texts)
        return self._tokenizer.encode_batch(texts, **kwargs)

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokenizer, name)


def test_a_long_text_is_encoded_in_segments_that_release_the_gil(tokenizer: Tokenizer) -> None:
    # One encode of a 1.6 MB line held the GIL for 1.7 s, during which a search thread of the
    # same process (``ncindex up``) waited, and its encoding took 200 MB. Failed before the
    # fix: the whole text went to ``encode`` in one call.
    text = "Alpha beta, gamma. Delta epsilon zeta eta theta. " * 2_000  # 100,000 characters
    recording = RecordingTokenizer(tokenizer)
    count = SubstringTokens(recording, text)  # type: ignore[arg-type]
    assert recording.holding == []
    assert sum(recording.releasing) == len(text)
    assert max(recording.releasing) <= token_spans._SEGMENT + 16
    for start, end in [(0, 18), (32_760, 32_790), (50, 99_950), (65_530, 65_540)]:
        assert count(text[start:end]) == _tokens(tokenizer, text[start:end]), (start, end)
    assert recording.holding == []


@pytest.mark.parametrize(
    "text",
    [
        "東京大学の研究者は新しい方法を発表した。" * 5_000,  # no space: cut before an ideograph
        "QUJDRA+/x0" * 10_000,  # base64: cut before "+" or "/"
    ],
)
def test_a_text_without_spaces_is_encoded_in_segments(tokenizer: Tokenizer, text: str) -> None:
    # 400,000 CJK characters in one encoding took 230 MB and held the GIL 165 ms converting
    # it. Failed before the fix (one segment of the whole text).
    recording = RecordingTokenizer(tokenizer)
    count = SubstringTokens(recording, text)  # type: ignore[arg-type]
    assert max(recording.releasing) <= token_spans._SEGMENT + 16
    for start, end in [(0, 40), (32_760, 32_800), (40, 99_950)]:
        assert count(text[start:end]) == _tokens(tokenizer, text[start:end]), (start, end)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_texts, seed=st.integers(0, 2**32))
def test_counts_equal_tokenising_each_piece_in_short_segments(
    tokenizer: Tokenizer, text: str, seed: int
) -> None:
    # the same property with the text encoded a few characters (to the next space) at a time
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_spans, "_SEGMENT", 3)
        _check_counts(tokenizer, text, seed)


def test_another_tokenizer_tokenises_each_piece() -> None:
    # guard (passes on both): a tokenizer not BERT's is never counted from spans
    from tokenizers import models, pre_tokenizers

    other = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    count = SubstringTokens(other, "a b c a")
    assert [count("a b"), count("b c a"), count("zz")] == [2, 3, 1]
