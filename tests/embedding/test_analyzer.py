"""The BM25 analysis chain, one test per rule (ncindex.embedding.analyzer)."""

from __future__ import annotations

import math

import pytest

from ncindex.embedding.analyzer import (
    AVG_LEN,
    K1,
    STOP_WORDS,
    B,
    document_vector,
    expanded_query_vector,
    feedback_expansion,
    feedback_query_vector,
    occurrences,
    query_vector,
    spellings,
    term_id,
    terms,
)


def test_words_are_lowercased_and_stemmed() -> None:
    assert terms("Running Vitamins STUDIES") == ["run", "vitamin", "studi"]


def test_lucene_stop_set() -> None:
    assert len(STOP_WORDS) == 33
    assert terms("the cat and the hat") == ["cat", "hat"]
    assert terms("to be or not to be") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # the queries of issue 19 that had no BM25 term with the 1,333-word list
        ("computer research group", ["comput", "research", "group"]),
        ("work from home", ["work", "from", "home"]),
        ("test results", ["test", "result"]),
        ("C++", ["c++"]),
        ("C# vs F#", ["c#", "vs", "f#"]),
        ("high blood pressure", ["high", "blood", "pressur"]),
    ],
)
def test_content_words_are_kept(query: str, expected: list[str]) -> None:
    assert terms(query) == expected
    assert query_vector(query).indices


def test_stop_words_meet_after_stemming() -> None:
    # a word and its plural give the same term, whatever the stop set holds
    assert terms("system") == terms("systems") == ["system"]
    # and every form of a stop word is dropped alike ("being" stems to "be")
    assert terms("being") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("IL-6", ["il-6", "il", "6"]),
        ("COVID-19", ["covid-19", "covid", "19"]),
        ("UTF-8", ["utf-8", "utf", "8"]),
        ("x86-64", ["x86-64", "x86", "64"]),
        ("x86_64", ["x86_64", "x86", "64"]),
        ("version 2.1.0", ["version", "2.1.0", "2", "1", "0"]),
        ("report.pdf", ["report.pdf", "report", "pdf"]),
        ("state-of-the-art", ["state-of-the-art", "stateoftheart", "state", "art"]),
    ],
)
def test_joined_words_kept_whole_and_in_parts(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_sentence_end_is_not_a_join() -> None:
    assert terms("We use 2.1.0. Then") == ["we", "use", "2.1.0", "2", "1", "0"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("C++", ["c++"]),
        ("c#", ["c#"]),
        ("F# and g++", ["f#", "g++"]),
        ("C++11", ["c++11"]),
        ("issue#5", ["issu", "5"]),  # '#' followed by a word is not a language name
    ],
)
def test_symbol_suffixes(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_dot_names() -> None:
    assert terms("The .NET runtime") == [".net", "net", "runtim"]
    assert terms("edit (.gitignore)") == ["edit", ".gitignore", "gitignor"]


def test_email_addresses() -> None:
    assert terms("mail jane.doe@example.org today") == [
        "mail",
        "jane.doe@example.org",
        "jane",
        "doe",
        "exampl",
        "org",
        "today",
    ]


def test_digits_and_mixed_tokens_are_not_stemmed() -> None:
    assert terms("3D models") == ["3d", "model"]


def test_possessive_and_apostrophes() -> None:
    assert terms("Nextcloud’s files") == ["nextcloud", "file"]
    assert terms("don't") == ["don't"]


def test_offsets_point_into_the_text() -> None:
    text = "See IL-6 and COVID-19."
    found = occurrences(text, set(terms(text)))
    assert [t.text for t in found] == terms(text)
    for t in found:
        assert text[t.start : t.end].lower().replace("’", "'").startswith(t.text[:1])
    whole = next(t for t in found if t.text == "covid-19")
    assert text[whole.start : whole.end] == "COVID-19"
    assert occurrences(text, {"6", "covid"}) == [t for t in found if t.text in {"6", "covid"}]


def test_long_terms_are_dropped_but_their_parts_kept() -> None:
    assert terms("a" * 70 + "-b1") == ["b1"]


def test_query_term_frequency_is_counted() -> None:
    vec = query_vector("vitamin D vitamins")
    weights = dict(zip(vec.indices, vec.values, strict=True))
    assert weights[term_id("vitamin")] == 2.0
    assert weights[term_id("d")] == 1.0
    assert vec.indices == sorted(vec.indices)


def test_document_weights_are_bm25_tf() -> None:
    vec = document_vector("cell cell growth")
    weights = dict(zip(vec.indices, vec.values, strict=True))
    norm = K1 * (1 - B + B * 3 / AVG_LEN)
    assert math.isclose(weights[term_id("cell")], 2 * (K1 + 1) / (2 + norm))
    assert math.isclose(weights[term_id("growth")], (K1 + 1) / (1 + norm))
    assert document_vector("").indices == []


def test_term_ids_are_fastembeds() -> None:
    # abs(murmur3_32("vitamin", seed 0)), fastembed's Bm25.compute_token_id; plain words keep
    # the ids an index built by fastembed's Qdrant/bm25 has
    from fastembed.sparse.bm25 import Bm25

    for word in ("vitamin", "pressur", "c++"):
        assert term_id(word) == Bm25.compute_token_id(word)


def weights_of(vec) -> dict[int, float]:  # type: ignore[no-untyped-def]
    return dict(zip(vec.indices, vec.values, strict=True))


def test_feedback_adds_the_likeliest_terms_of_the_feedback() -> None:
    # P(w|R): doc 1 (score 3) "coral coral reef", doc 2 (score 1) "coral bleach"
    # coral 3/4·2/3 + 1/4·1/2 = 0.625, reef 3/4·1/3 = 0.25, bleach 1/4·1/2 = 0.125
    feedback = [("coral coral reef", 3.0), ("coral bleaching", 1.0)]
    vec = feedback_query_vector("reef fish", feedback, terms_added=2, weight=2.0)
    w = weights_of(vec)
    # query length 2, expansion mass 2 × 2 = 4 shared by the two likeliest terms
    assert math.isclose(w[term_id("coral")], 4 * 0.625 / 0.875)
    assert math.isclose(w[term_id("reef")], 1 + 4 * 0.25 / 0.875)  # a query term weighs more
    assert w[term_id("fish")] == 1.0  # query terms keep their counts
    assert term_id("bleach") not in w  # third likeliest, not among the two added
    assert vec.indices == sorted(vec.indices)


def test_the_expansion_is_the_terms_feedback_adds_the_heaviest_first() -> None:
    """What ``explain``'s ``feedback_terms`` names: the same terms and weights as the vector
    adds, the query's own among them (the search drops those), heaviest first."""
    feedback = [("coral coral reef", 3.0), ("coral bleaching", 1.0)]
    expansion = feedback_expansion("reef fish", feedback, terms_added=2, weight=2.0)
    assert list(expansion) == ["coral", "reef"]
    assert math.isclose(expansion["coral"], 4 * 0.625 / 0.875)
    assert expanded_query_vector("reef fish", expansion) == feedback_query_vector(
        "reef fish", feedback, terms_added=2, weight=2.0
    )
    assert feedback_expansion("the of", feedback) == {} == feedback_expansion("reef", [])


def test_feedback_without_scores_counts_each_text_alike() -> None:
    alike = feedback_query_vector("reef", [("coral", 0.0), ("kelp", -1.0)], terms_added=1)
    w = weights_of(alike)
    # coral and kelp tie at 1/2: the tie breaks by the term
    assert term_id("coral") in w and term_id("kelp") not in w


def test_feedback_leaves_nothing_to_expand_alone() -> None:
    assert feedback_query_vector("reef", []) == query_vector("reef")
    assert feedback_query_vector("reef", [("", 1.0)]) == query_vector("reef")
    assert feedback_query_vector("the of", [("coral reef", 1.0)]).indices == []


# --- en-3: accent folding, elision, CJK bigrams (Lucene's filters) -----------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Café", ["café", "cafe"]),
        ("Łódź", ["łódź", "lodz"]),
        ("Straße", ["straße", "strass"]),  # ß → ss, then stemmed (strasse → strass)
        ("Ærø Łódź œuvre", ["ærø", "aero", "łódź", "lodz", "œuvr", "oeuvr"]),
        (
            "café-crème",
            ["café-crème", "cafe-creme", "cafécrèm", "cafecrem", "café", "cafe", "crème", "creme"],
        ),
        ("Ελλάδα", ["ελλάδα", "ελλαδα"]),  # no ASCII form, but Greek loses its tonos (en-6)
        ("Москва", ["москва"]),  # no ASCII form: nothing added
        # Python lowercases İ to i + U+0307 (combining dot), Java (Lucene) to i alone
        ("İstanbul", ["i\u0307stanbul", "istanbul"]),
    ],
)
def test_accents_fold_with_the_original_kept(text: str, expected: list[str]) -> None:
    """Lucene's ASCIIFoldingFilter with preserveOriginal."""
    assert terms(text) == expected


def test_folding_meets_the_query_either_way() -> None:
    doc = set(document_vector("Wir fahren nach München zur Überweisung").indices)
    for query in ("munchen", "München", "MUNCHEN", "Uberweisung", "überweisung"):
        assert set(query_vector(query).indices) <= doc, query
    assert set(query_vector("München").indices) & set(document_vector("Munchen").indices)
    assert set(query_vector("istanbul").indices) <= set(document_vector("İSTANBUL").indices)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("l'église", ["église", "eglis"]),
        ("L’Église", ["église", "eglis"]),
        ("qu'il jusqu'ici", ["il", "ici"]),
        ("dell'arte", ["art"]),  # Italian: dell'
        ("don't o'clock", ["don't", "o'clock"]),  # not articles: the word stays whole
    ],
)
def test_elision(text: str, expected: list[str]) -> None:
    """Lucene's ElisionFilter with the French and Italian default articles."""
    assert terms(text) == expected


def test_elided_word_matches_the_bare_word() -> None:
    assert set(query_vector("église").indices) <= set(document_vector("J'aime l'église").indices)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("北京烤鸭很好吃", ["北京", "京烤", "烤鸭", "鸭很", "很好", "好吃"]),
        ("鸭", ["鸭"]),  # a lone character is its own term
        ("東京タワー", ["東京", "京タ", "タワ", "ワー"]),  # across Han and Katakana
        ("한국어 문서", ["한국", "국어", "문서"]),
        ("iPhone用户", ["iphon", "用户"]),  # the script change splits the run
        ("COVID-19患者", ["covid-19", "covid", "19", "患者"]),
        ("北京。上海", ["北京", "上海"]),  # CJK punctuation separates
    ],
)
def test_cjk_bigrams(text: str, expected: list[str]) -> None:
    """Lucene's CJKBigramFilter (outputUnigrams false)."""
    assert terms(text) == expected


def test_folded_and_bigram_terms_point_at_the_original_characters() -> None:
    text = "Wir essen in München 北京烤鸭, l'église."
    found = {t.text: text[t.start : t.end] for t in occurrences(text, {"munchen", "烤鸭", "eglis"})}
    assert found == {"munchen": "München", "烤鸭": "烤鸭", "eglis": "église"}


def test_plain_ascii_text_keeps_its_en2_terms() -> None:
    """What keeps an en-2 index answering English queries until it is rewritten."""
    text = "Don't index C++ and IL-6 at jane.doe@example.org: Nextcloud's .NET report.pdf 2.1.0"
    assert terms(text) == [
        "don't",
        "index",
        "c++",
        "il-6",
        "il",
        "6",
        "jane.doe@example.org",
        "jane",
        "doe",
        "exampl",
        "org",
        "nextcloud",
        ".net",
        "net",
        "report.pdf",
        "report",
        "pdf",
        "2.1.0",
        "2",
        "1",
        "0",
    ]


def test_a_word_and_its_folded_form_weigh_one_word() -> None:
    """At one position, as Lucene's SynonymQuery and BM25's discounted overlaps: the query
    shares the word's count between its forms, the document's length counts it once."""
    w = weights_of(query_vector("Café Hotel"))
    assert w[term_id("café")] == w[term_id("cafe")] == 0.5
    assert w[term_id("hotel")] == 1.0
    doc = weights_of(document_vector("Café Hotel"))
    norm = K1 * (1 - B + B * 2 / AVG_LEN)  # two positions, not three terms
    assert math.isclose(doc[term_id("cafe")], (K1 + 1) / (1 + norm))
    assert math.isclose(doc[term_id("hotel")], (K1 + 1) / (1 + norm))
    assert sum(feedback_expansion("Café", [("Café Hotel", 1.0)]).values()) == 1.0
    umlaut = weights_of(query_vector("München"))
    assert sorted(umlaut.values()) == pytest.approx([1 / 3] * 3)  # münchen, munchen, muenchen
    norm = K1 * (1 - B + B * 1 / AVG_LEN)  # one position, not three terms
    assert math.isclose(
        weights_of(document_vector("München"))[term_id("muenchen")], (K1 + 1) / (1 + norm)
    )


# --- en-4: combining marks stay in their words; words read composed (NFC) ---------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Devanagari vowel signs (Mc) and the virama (Mn): one term a word, no folded twin
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),
        # Hebrew points (Mn) inside the word
        ("שָׁלוֹם", ["שָׁלוֹם"]),
        # a mark beyond U+FFFF (Brahmi vowel sign U+11044), looked for in a class of its own
        ("𑀅𑀰𑁄𑀓", ["𑀅𑀰𑁄𑀓"]),
        # a decomposed accent (u + U+0308) is the composed word, folded form and all
        ("Mu\u0308nchen", ["münchen", "munchen", "muenchen"]),
        (
            "cafe\u0301-cre\u0300me",
            ["café-crème", "cafe-creme", "cafécrèm", "cafecrem", "café", "cafe", "crème", "creme"],
        ),
        # a mark with no precomposed letter stays; folding drops it with the accent
        ("q\u0308uestion", ["q\u0308uestion", "question"]),
    ],
)
def test_combining_marks_stay_in_their_words(text: str, expected: list[str]) -> None:
    """UAX #29 keeps a mark (Extend) with the letter before it; Python's \\w does not match
    marks, which split these words before en-4 (हिन्दी into ह, न, द; Mu\\u0308nchen into mu,
    nchen)."""
    assert terms(text) == expected


def test_decomposed_and_composed_text_meet() -> None:
    decomposed = "Die U\u0308berweisung nach Mu\u0308nchen, l\u2019e\u0301glise"
    composed = "Die Überweisung nach München, l’église"
    assert terms(decomposed) == terms(composed)
    assert document_vector(decomposed) == document_vector(composed)
    for query in ("münchen", "Munchen", "u\u0308berweisung", "eglise"):
        assert set(query_vector(query).indices) <= set(document_vector(decomposed).indices)


def test_decomposed_terms_point_at_the_characters_as_written() -> None:
    """A snippet marks the letters and their marks in the text as it is, not in its NFC."""
    text = "nach Mu\u0308nchen und e\u0301glise 北京烤鸭 ok"
    found = {t.text: text[t.start : t.end] for t in occurrences(text, {"munchen", "eglis", "烤鸭"})}
    assert found == {"munchen": "Mu\u0308nchen", "eglis": "e\u0301glise", "烤鸭": "烤鸭"}
    assert text[occurrences(text, {"ok"})[0].start :] == "ok"


# --- en-5: words are read without the format characters inside them ----------------------


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("Rech\u00adnung", "Rechnung"),  # a soft hyphen, as HTML's &shy; and PDFs have it
        ("Mu\u0308l\u00adler", "Müller"),  # decomposed and hyphenated at once
        ("mi\u200cxed", "mixed"),  # zero-width non-joiner
        ("Foo\u2060bar", "Foobar"),  # word joiner
        ("bud\u202eget", "budget"),  # a bidi override
        ("bud\U000e0020get", "budget"),  # a tag character, beyond U+FFFF
        ("Rech\u00adnung_2026.pdf", "Rechnung_2026.pdf"),  # a joined word and its parts
    ],
)
def test_format_characters_inside_a_word_are_ignored(text: str, word: str) -> None:
    """UAX #29's WB4 ignores Format characters between a word's letters; before en-5 they cut
    the word (``Rech\\u00adnung`` into ``rech``, ``nung``), so the word as typed did not find it."""
    assert terms(text) == terms(word)
    assert document_vector(text) == document_vector(word)
    assert set(query_vector(word).indices) <= set(document_vector(text).indices)


def test_a_zero_width_space_still_separates_words_written_without_spaces() -> None:
    """UAX #29 leaves U+200B out of Format: it marks word boundaries in Thai, Khmer, Lao and
    Myanmar text, and still does there (en-7), beside a letter of those scripts on either
    side."""
    assert terms("ภาษา\u200bไทย") == ["ภาษา", "ไทย"]
    assert terms("ភាសា\u200bខ្មែរ") == ["ភាសា", "ខ្មែរ"]
    assert terms("Thai\u200bไทย") == ["thai", "ไทย"]
    assert terms("ไทย\u200bThai") == ["ไทย", "thai"]


def test_format_terms_point_at_the_word_as_written() -> None:
    """A snippet marks the word with its soft hyphen, in the text as it is."""
    text = "Die Rech\u00adnung ist da"
    (found,) = occurrences(text, {"rechnung"})
    assert text[found.start : found.end] == "Rech\u00adnung"
    assert text[occurrences(text, {"da"})[0].start :] == "da"


# --- en-5: a German umlaut is also spelt out (Müller is Mueller) ---------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("München", ["münchen", "munchen", "muenchen"]),
        ("Überweisung", ["überweisung", "uberweisung", "ueberweisung"]),
        ("Ärzte", ["ärzte", "arzt", "aerzt"]),  # each form stemmed as a word
        ("Übergröße", ["übergröß", "ubergross", "uebergroess"]),  # ß folded in the spelt form
        (
            "Müller-Lüdenscheidt",
            [
                "müller-lüdenscheidt",
                "muller-ludenscheidt",
                "mueller-luedenscheidt",
                "müllerlüdenscheidt",  # joined (en-7)
                "mullerludenscheidt",
                "muellerluedenscheidt",
                "müller",
                "muller",
                "mueller",
                "lüdenscheidt",
                "ludenscheidt",
                "luedenscheidt",
            ],
        ),
        ("naïve blue", ["naïv", "naiv", "blue"]),  # only ä, ö, ü are spelt out
    ],
)
def test_umlauts_are_also_spelt_out(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


@pytest.mark.parametrize(
    ("written", "typed"),
    [("Herr Müller", "Mueller"), ("Herr Mueller", "Müller"), ("Die Ärzte", "Aerzte"),
     ("Küche", "kueche"), ("Göteborg", "Goeteborg")],
)  # fmt: skip
def test_a_word_with_an_umlaut_meets_it_spelt_out(written: str, typed: str) -> None:
    """Before en-5, ``Mueller`` found ``Müller`` by the dense half alone."""
    assert set(query_vector(typed).indices) & set(document_vector(written).indices)
    assert occurrences(written, set(terms(typed)))  # and the snippet marks it


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("Mueller", ["Mueller", "müller"]),
        ("Müller", ["Müller", "mueller"]),
        ("Steuerbuero", ["Steuerbuero", "steürbuero", "steuerbüro", "steürbüro"]),
        ("ÖLMÜLLER", ["ÖLMÜLLER", "oelmueller"]),
        ("İstanbul", ["İstanbul"]),  # not lowercased: Python gives i and U+0307,
        ("queueueueue", ["queueueueue", "qüüüüü"]),  # past MAX_SPELT_OUT: all or none
    ],
)
def test_spellings_are_the_umlaut_forms_terms_equate(word: str, expected: list[str]) -> None:
    """Each spelling :func:`spellings` gives shares a term with the word (what the title
    branch asks Qdrant's title index for, as BM25 meets them in a text)."""
    assert spellings(word) == expected
    for other in expected:
        assert set(terms(other)) & set(terms(word)), other


@pytest.mark.parametrize(
    ("written", "typed", "expected"),
    [
        ("ｶﾀｶﾅ", "カタカナ", ["カタ", "タカ", "カナ"]),
        ("カタカナ", "ｶﾀｶﾅ", ["カタ", "タカ", "カナ"]),
        ("ｶﾞｲﾄﾞ", "ガイド", ["ガイ", "イド"]),  # a sound mark joins the kana before it
        ("ﾔﾏﾀﾞ ﾀﾛｳ様", "ヤマダ", ["ヤマ", "マダ", "タロ", "ロウ", "ウ様"]),
        ("ｶﾞ", "ガ", ["ガ"]),  # one character once joined: its own term
        ("ﾞｶ", "゛カ", ["゛カ"]),  # a sound mark with nothing to join: its spacing form
    ],
)
def test_half_width_katakana_are_read_full_width(
    written: str, typed: str, expected: list[str]
) -> None:
    """Before en-6, ``ｶﾀｶﾅ`` (half-width, as bank statements and older systems write
    katakana) and ``カタカナ`` shared no term; Lucene's CJKAnalyzer widens them first
    (``CJKWidthFilter``). The snippet marks the characters as written."""
    assert terms(written) == expected
    assert set(query_vector(typed).indices) & set(document_vector(written).indices)
    found = occurrences(written, set(terms(typed)))
    assert found and all(written[t.start : t.end] for t in found)
    assert min(t.start for t in found) == 0


@pytest.mark.parametrize(
    ("written", "typed"),
    [("Αθήνα", "ΑΘΗΝΑ"), ("ΑΘΗΝΑ", "Αθήνα"), ("οδός", "οδος"), ("προϊόν", "ΠΡΟΙΟΝ"),
     ("Ἀθῆναι", "Αθηναι"), ("5 µg", "5 μg")],
)  # fmt: skip
def test_greek_words_meet_without_their_accents(written: str, typed: str) -> None:
    """Greek capitals are written without accents, and many type Greek without them: before
    en-6 ``ΑΘΗΝΑ`` and ``Αθήνα`` shared no term (Lucene's GreekLowerCaseFilter removes the
    tonos and dialytika). The micro sign folds to the Greek mu it stands for (NFKC)."""
    assert set(query_vector(typed).indices) & set(document_vector(written).indices)
    assert occurrences(written, set(terms(typed)))


def test_other_scripts_keep_their_marked_letters() -> None:
    """Only Greek loses its marks: Cyrillic ``й`` is a letter of its own, not ``и``."""
    assert terms("йод") == ["йод"]
    assert terms("Αθήνα") == ["αθήνα", "αθηνα"]


# --- en-7: a zero-width space, hyphenated words, every apostrophe -------------------------


@pytest.mark.parametrize(
    ("written", "typed"),
    [
        ("Rech\u200bnung", "Rechnung"),  # zero-width space, as <wbr> and PDFs leave it
        ("Rechnung", "Rech\u200bnung"),  # a pasted query with one
        ("Donau\u200bdampf\u200bschiff\u200bfahrt", "Donaudampfschifffahrt"),
        ("Mu\u0308l\u200bler", "Müller"),  # decomposed too
        ("\u200bRechnung\u200b", "Rechnung"),
        ("Rech\u200b\u00adnung", "Rechnung"),  # beside a soft hyphen
        ("Rech\u200cnung", "Rechnung"),  # zero-width non-joiner (en-5)
        ("Rech\u200dnung", "Rechnung"),  # zero-width joiner (en-5)
        ("Rech\u2060nung", "Rechnung"),  # word joiner (en-5)
        ("Rech\ufeffnung", "Rechnung"),  # byte-order mark (en-5)
        ("Rech\u00adnung", "Rechnung"),  # soft hyphen (en-5)
        ("می\u200cخواهم", "میخواهم"),  # Persian: the same letters with the non-joiner or without
    ],
)
def test_a_word_with_an_invisible_character_is_the_word_without(written: str, typed: str) -> None:
    """Text copied from web pages and PDFs carries zero-width spaces inside words; before en-7
    ``Rech\u200bnung`` was ``rech`` and ``nung``, which ``Rechnung`` did not meet. The other
    format characters were already ignored (en-5); Persian and Indic words keep meeting
    themselves, since the joiners go from the query as from the document."""
    assert terms(written) == terms(typed)
    assert document_vector(written) == document_vector(typed)
    assert set(query_vector(typed).indices) <= set(document_vector(written).indices)


def test_a_word_with_a_zero_width_space_is_marked_whole() -> None:
    """The snippet's match spans the word as written, the zero-width space inside it."""
    text = "Die Rech\u200bnung ist da"
    (found,) = occurrences(text, set(terms("Rechnung")))
    assert text[found.start : found.end] == "Rech\u200bnung"
    assert text[occurrences(text, {"da"})[0].start :] == "da"


@pytest.mark.parametrize(
    ("written", "typed"),
    [
        ("E-Mail", "email"),
        ("e-mail", "email"),
        ("email", "E-Mail"),
        ("email", "e-mail"),
        ("E-Mail", "e-mail"),
        ("E-Mails", "emails"),
        ("co-operate", "cooperation"),
        ("cooperate", "co-operate"),
        ("re-index", "reindex"),
        ("reindexing", "re-index"),
        ("E\u2011Mail", "email"),  # a non-breaking hyphen
        ("E\u2010Mail", "e-mail"),  # the Unicode hyphen
    ],
)
def test_a_hyphenated_word_meets_the_word_without_the_hyphen(written: str, typed: str) -> None:
    """German writes ``E-Mail``, English ``email`` and ``e-mail``; before en-7 ``email`` and
    ``E-Mail`` shared no term (``e-mail``, ``e``, ``mail`` against ``email``)."""
    assert set(query_vector(typed).indices) & set(document_vector(written).indices)


def test_a_hyphenated_word_is_joined_at_its_own_place() -> None:
    """The joined form stands where the compound's whole form does, as a folded form: a
    document's length counts them once, and in a query they share the compound's weight, so a
    hyphenated word weighs no more than before (Lucene scores tokens at one position so)."""
    assert terms("E-Mail") == ["e-mail", "email", "e", "mail"]
    assert terms("co-operate") == ["co-operate", "cooper", "co", "oper"]
    assert terms("E\u2011Mail") == terms("E-Mail")
    # not joined: compounds holding digits, dots or underscores
    assert terms("IL-6") == ["il-6", "il", "6"]
    assert terms("x86-64") == ["x86-64", "x86", "64"]
    assert terms("report.pdf") == ["report.pdf", "report", "pdf"]
    query = query_vector("e-mail")
    weights = dict(zip(query.indices, query.values, strict=True))
    assert weights == {
        term_id("e-mail"): 0.5,
        term_id("email"): 0.5,
        term_id("e"): 1.0,
        term_id("mail"): 1.0,
    }
    # three positions (e-mail and email, e, mail), each term once: the weights of a text of
    # three words, not of four
    doc = document_vector("E-Mail")
    assert len(doc.indices) == 4
    assert set(doc.values) == set(document_vector("one two three").values)
    assert set(doc.values) != set(document_vector("one two three four").values)


@pytest.mark.parametrize(
    "apostrophe", ["'", "\u2019", "\u2018", "\u02bc", "\u2032", "\uff07", "\u00b4"]
)
def test_every_apostrophe_is_the_same(apostrophe: str) -> None:
    """``O‘Neill`` (the quote turned the wrong way), ``OʼNeill`` (the modifier letter
    apostrophe), ``it´s`` (German keyboards) are the words written with ``'``; before en-7
    ``O‘Neill`` was ``o`` and ``neill``, ``itʼs`` ``itʼ``."""
    assert terms(f"O{apostrophe}Neill") == terms("O'Neill") == ["o'neil"]
    assert terms(f"don{apostrophe}t") == ["don't"]
    assert terms(f"it{apostrophe}s Peter{apostrophe}s") == terms("it's Peter's") == ["peter"]
    assert terms(f"l{apostrophe}église") == ["église", "eglis"]  # elided
    text = f"Frau O{apostrophe}Neill kommt"
    (found,) = occurrences(text, set(terms("O'Neill")))
    assert text[found.start : found.end] == f"O{apostrophe}Neill"
