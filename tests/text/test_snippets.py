"""Snippets: escaped, marked, balanced, and the best window (DESIGN §9)."""

from __future__ import annotations

import html
import re

import pytest
import unicodedata2
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ncindex.embedding.analyzer import occurrences, terms
from ncindex.text.snippets import (
    clean_text,
    make_snippet,
    plain_snippet,
    query_terms,
    snippet,
)

TAG = re.compile(r"</?mark>")


def visible(snippet: str) -> str:
    """What a reader sees: our tags removed, entities decoded."""
    return html.unescape(TAG.sub("", snippet))


def marked(snippet: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", snippet)]


def assert_safe(snippet: str) -> None:
    """Only our own balanced, unnested <mark> tags; no other markup can survive."""
    tags = TAG.findall(snippet)
    assert tags == ["<mark>", "</mark>"] * (len(tags) // 2)
    rest = TAG.sub("", snippet)
    assert "<" not in rest and ">" not in rest
    assert '"' not in rest and "'" not in rest
    # every & starts an entity html.escape writes
    assert re.fullmatch(r"(?:[^&]|&(?:amp|lt|gt|quot|#x27);)*", rest, flags=re.S)


def test_marks_matches_case_insensitively_on_word_boundaries() -> None:
    out = make_snippet("The Budget was concatenated; budget-wise, BUDGETS rose.", "budget")
    assert_safe(out)
    assert marked(out) == ["Budget", "budget", "BUDGETS"]  # stems match, 'concatenated' not
    assert "con<mark>" not in out


def test_stemming_like_bm25() -> None:
    out = make_snippet("We were indexing files; the index was indexed.", "Indexes")
    assert marked(out) == ["indexing", "index", "indexed"]


def test_stopwords_in_query_are_not_marked() -> None:
    out = make_snippet("the cat and the hat", "the cat")
    assert marked(out) == ["cat"]
    # a query of stop words only has no BM25 term, so nothing is marked
    assert marked(make_snippet("to be or not to be", "to be")) == []


def test_query_terms() -> None:
    assert query_terms("The Running of the BULLS, running!") == ["run", "bull"]
    assert query_terms("") == []
    assert query_terms("<script>") == ["script"]


def test_xss_in_text_stays_escaped() -> None:
    text = 'Click <script>alert("x")</script> or <img src=x onerror=alert(1)> for the report'
    out = make_snippet(text, "report script")
    assert_safe(out)
    assert "&lt;<mark>script</mark>&gt;" in out
    assert visible(out) == text


def test_xss_in_query_stays_escaped() -> None:
    text = "Quarterly numbers for the onerror review"
    for query in ['<img src=x onerror="alert(1)">', "</mark><script>", "&lt;mark&gt;"]:
        out = make_snippet(text, query)
        assert_safe(out)
        assert visible(out) == text


def test_mark_tags_in_the_body_do_not_unbalance() -> None:
    text = "Before <mark>fake</mark> and </mark> stray <mark> open; the real term is budget."
    out = make_snippet(text, "budget mark")
    assert_safe(out)
    assert "&lt;<mark>mark</mark>&gt;" in out
    assert visible(out) == text


def _clean_char_by_char(text: str) -> str:
    """What :func:`clean_text` gives, one character at a time: whitespace controls become
    spaces, characters of the stripped categories go, whitespace runs collapse."""
    kept = "".join(
        " " if ch in "\t\n\r\x0b\x0c" else ch
        for ch in text
        if ch in "\t\n\r\x0b\x0c" or unicodedata2.category(ch) not in {"Cc", "Cf", "Cs", "Co", "Cn"}
    )
    return re.sub(r"\s+", " ", kept).strip()


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(exclude_categories=()), max_size=80))
@example("\x00\x1c\x1f\x7f\x85\u2028\xa0 a\ud800\ue000\U000e0001\u0378 b")
def test_clean_text_drops_each_stripped_character(text: str) -> None:
    assert clean_text(text) == _clean_char_by_char(text)


def test_control_and_invisible_characters_removed() -> None:
    text = "budget\x00 plan\u202e reversed\u200b zero\x1b[31m red\ufeff\ue000 end\ud800"
    out = make_snippet(text, "budget")
    assert_safe(out)
    assert visible(out) == "budget plan reversed zero[31m red end"
    assert clean_text("a\n\n\tb\r\nc") == "a b c"


def test_a_snippet_keeps_the_line_breaks_of_its_text() -> None:
    """A snippet made every run of whitespace one space, so a note's "* eggs" list item could
    not be told from the "2 * 3" of prose, nor a "# " heading from a "#" in a sentence: each
    is Markdown only at the start of a line (CommonMark 0.31 §5.2, §4.2). A run of whitespace
    holding a line break (LF, CR or CRLF) is now one "\n" (two where it holds a blank line,
    see test_a_snippet_keeps_a_paragraph_break); any other run is one space."""
    text = "# Shopping\r\n\r\n* eggs  \n* milk\r* oil \t for 2 * 3 lamps\n\n\nEnd"
    shown = snippet(text, "oil")
    assert shown.plain == "# Shopping\n\n* eggs\n* milk\n* oil for 2 * 3 lamps\n\nEnd"
    assert [shown.plain[m.start : m.end] for m in shown.matches] == ["oil"]
    # a window cut inside a line: no break at its edges, the words whole
    long = "\n".join(f"line {i} of the list" for i in range(40)) + "\n* the oil lamp\n" * 2
    cut = snippet(long, "oil", max_chars=40).plain
    assert cut == "…list\n* the oil lamp\n\n* the oil lamp"  # the text repeats "…\n"
    assert clean_text(text) == "# Shopping * eggs * milk * oil for 2 * 3 lamps End"


def test_a_snippet_keeps_a_paragraph_break() -> None:
    """A blank line became one "\n", so a paragraph's end read as a soft line break and its
    last backslash as a hard one (CommonMark 0.31 §4.8, §6.7). A run of whitespace holding two
    line breaks or more (a blank line, or several: at most one is kept) is now "\n\n"; the
    cut edges keep one break beside their ellipsis."""
    text = "First ends in \\\r\n \r\n\n\t\nSecond lamp para\nline two\n\nThird"
    assert snippet(text, "lamp").plain == "First ends in \\\n\nSecond lamp para\nline two\n\nThird"
    cut = snippet("alpha beta gamma\n\nlamp oil here\n\nomega psi", "oil", max_chars=18)
    assert cut.plain == "…\nlamp oil here\n…"
    assert clean_text(text) == "First ends in \\ Second lamp para line two Third"


def test_a_markdown_snippet_keeps_its_code_lines_indentation() -> None:
    """A snippet dropped every line's indentation, so a note's indented code block (CommonMark
    0.31.2 §4.4: four columns, after a blank line) read as prose, and a fenced block's code lost
    its layout. A ``markdown`` snippet keeps the indentation of an indented block's lines and of
    a fenced block's (a tab to the next multiple of 4 columns); a list item's, a heading's or a
    paragraph's continuation line's goes as before, and a plain text's all go."""
    note = (
        "Run this lamp check:\n\n    lamp --check\n\tlamp --all\n  \n    done\n"
        "para\n    continued\n  * item\n```sh\n  if x:\n\t  go\n```\n   # Head"
    )
    assert snippet(note, "lamp", markdown=True).plain == (
        "Run this lamp check:\n\n    lamp --check\n    lamp --all\n\n    done\n"
        "para\ncontinued\n* item\n```sh\n  if x:\n      go\n```\n# Head"
    )
    assert snippet(note, "lamp").plain.startswith("Run this lamp check:\n\nlamp --check\nlamp")
    # a fence indented as code opens nothing; a cut before an indented line keeps it
    code = "intro words here\n\n    ```\n    lamp one\n\nafter"
    assert (
        snippet(code, "one", max_chars=30, markdown=True).plain
        == "…\n    ```\n    lamp one\n\nafter"
    )


def test_a_markdown_texts_first_line_keeps_its_code_indentation() -> None:
    """The text's first line lost its indentation: a chunk opening with an indented code block
    (the markdown splitter keeps it, ncindex/text/chunking.py) showed its first line as prose
    and the lines after it as code, though the reader took the first line for code (CommonMark
    0.31.2 §4.4: an indented block may start the text). It keeps it now, in a window cut after
    it too; a title's indentation (no Markdown), one of a line under four columns and a
    plain text's still go."""
    code = "    first lamp\n    second\n\n"
    assert snippet(code + "para", "lamp", markdown=True).plain == code + "para"
    long = code + "para words here " * 10
    assert snippet(long, "lamp", max_chars=40, markdown=True).plain == code + "para words…"
    assert snippet(code, "lamp").plain == "first lamp\nsecond"
    assert snippet("  * item lamp\nnext", "lamp", markdown=True).plain == "* item lamp\nnext"
    card = snippet("    T\n\n    code lamp", "lamp", title=5, markdown=True)
    assert (card.plain, card.title_chars) == ("T\n\n    code lamp", 1)
    assert snippet("    \t ", "lamp", markdown=True).plain == ""


def test_an_indented_line_right_after_a_closing_fence_is_code() -> None:
    """A fenced block's closing line leaves no paragraph open, so an indented line right after
    it starts an indented code block (CommonMark 0.31.2 §4.4, §4.5; markdown-it-py 4.3 renders
    ``"```\\nx\\n```\\n    y"`` as two ``<pre>``). It was read as a paragraph's continuation
    and lost its indentation; a line after an indented fence (no fence) still does."""
    note = "```\ncode\n```\n    indented lamp\n    more\nafter"
    assert snippet(note, "lamp", markdown=True).plain == note
    tilde = "~~~~\nx\n~~~~~\n      deeper lamp"
    assert snippet(tilde, "lamp", markdown=True).plain == tilde
    prose = "para\n    ```\n    not code lamp"  # a paragraph's lines: no fence, no code
    assert snippet(prose, "lamp", markdown=True).plain == "para\n```\nnot code lamp"


def test_a_markdown_snippet_cut_inside_a_fenced_block_reopens_it() -> None:
    """A window starting inside a fenced code block whose opening line it cut off read as
    prose up to the block's closing fence, which then read as an opening one (CommonMark 0.31.2
    §4.5), so the code showed its Markdown read and the prose after it raw. A ``markdown``
    snippet starts with the block's fence on a line of its own then ("````\n…"), counted in
    ``max_chars``; a window starting after the block, or in a plain text, does not."""
    note = (
        "Some words before the block. " * 4
        + "\n````python\n"
        + "".join(f"x{i} = *lamp*\n" for i in range(20))
        + "````\nAfter it the oil\n"
    )
    shown = snippet(note, "lamp", max_chars=60, markdown=True)
    assert shown.plain.startswith("````\n…")  # its first line cut off: the fence again
    assert len(shown.plain) <= 60
    assert {shown.plain[m.start : m.end] for m in shown.matches} == {"lamp"}
    tail = snippet(note, "oil", max_chars=40, markdown=True).plain
    assert tail.startswith("````\n…") and tail.endswith("````\nAfter it the oil")
    assert snippet(note, "lamp", max_chars=60).plain.startswith("…")
    after = snippet(note + "more prose " * 20, "oil", max_chars=30, markdown=True).plain
    assert after == "…it the oil\nmore prose…"  # after the block: no fence
    tilde = "a b c d e f g\n~~~\n" + "lamp code\n" * 9 + "~~~"
    assert snippet(tilde, "lamp", max_chars=30, markdown=True).plain.startswith("~~~\n…")


@pytest.mark.parametrize("max_chars", [14, 15, 16])
def test_a_reopened_fence_longer_than_the_first_one_found_stays_in_max_chars(
    max_chars: int,
) -> None:
    """The room a re-opened fence takes was the fence of the first window's block; the smaller
    window made for it can start in another block, here one whose fence is longer (the two
    ``lamp`` fit in it, the best window of the smaller budget), and its fence was written in
    the room of the shorter: ``"~~~~~~~~~~\\n…\\nlamp…"``, 18 characters for ``max_chars`` 14
    to 16. Found by a fuzz of fences, tabs and CRLF against the ``max_chars`` contract."""
    note = "~~~~~~~~~~\nlamp xxxxxx lamp\n~~~~~~~~~~\n\n```\nyy oil zz lamp\n```"
    shown = snippet(note, "oil lamp", max_chars=max_chars, markdown=True).plain
    assert len(shown) <= max_chars
    assert not shown.startswith("~~~~~~~~~~\n…")  # not the fence of a block it is not in


def test_a_deck_cards_title_opens_no_fenced_block() -> None:
    """A Deck card's text is ``"{title}\\n\\n{description}"``, its title shown as written (Deck
    shows it as plain text, its description as Markdown); a title such as ``"``` release"`` was
    read as a fence opening, so the description's snippet started with an invented ``"```\\n…"``
    and the page showed its prose as code, and a window inside a long title of fences got a
    re-opened fence counted as the title's characters."""
    title = "``` release"
    card = title + "\n\n" + "Some prose about the oil lamp and the wick. " * 6
    shown = snippet(card, "wick", max_chars=40, title=len(title), markdown=True)
    assert shown.plain.startswith("…") and shown.title_chars == 0
    fences = "~~~~~~~~ x" * 3
    inside = snippet(fences + "\n\nthe oil lamp", "x", max_chars=20, title=30, markdown=True)
    assert inside.plain.startswith("…") and inside.title_chars == len(inside.plain)
    code = "T\n\n```\n" + "code lamp\n" * 10 + "```"  # the description's own block: still
    assert snippet(code, "lamp", max_chars=30, title=1, markdown=True).plain.startswith("```\n…")


def test_an_indented_fence_line_re_opens_no_block() -> None:
    """``"    ```"`` indented four columns is no fence (CommonMark 0.31.2 §4.5: 0-3 spaces):
    after a paragraph's line it continues the paragraph, at the text's start it is an indented
    code block's line (§4.4). The snippet drops a prose line's indentation, and the re-opened
    fence was read from that cleaned text, so a window after such a line started with an
    invented ``"```\\n…"``: the page showed prose as code."""
    prose = "and then the lamp glows bright. " * 5
    for text in ("Run this:\n    ```\n" + prose, "    ```\n" + prose):
        assert snippet(text, "glows", max_chars=40, markdown=True).plain.startswith("…")
    cut = "prose prose prose\n```\n\n" + "code lamp\n" * 3  # a real one, a blank line after it
    assert snippet(cut, "lamp", max_chars=22, markdown=True).plain.startswith("```\n…")


def test_a_cut_at_a_line_break_keeps_it() -> None:
    """A window cut where a line starts dropped the line break, so "…* oil lamp" could be a
    list item or the "2 * 3" of prose (CommonMark 0.31 §5.2: a bullet opens a line), and the
    search page could not tell. The break is kept beside the ellipsis, "…\n* oil lamp", the
    last word dropped for it when the window is full (unless that drops a match); a break
    where the window ends stays too when it fits ("lamp\n…": a backslash before it is a hard
    line break, §6.7). A cut inside a line has no break at its edge, and the matches' offsets
    stay on their words."""
    text = "alpha beta gamma delta\n* oil lamp here and more words\nnext line"
    expected = {
        11: "…\n* oil…",  # full: "…* oil…", and the break could not fit besides
        14: "…\n* oil lamp…",
        32: "…delta\n* oil lamp here and…",  # cut inside a line
    }
    for max_chars, plain in expected.items():
        shown = snippet(text, "oil", max_chars=max_chars)
        assert shown.plain == plain and len(plain) <= max_chars
        assert [plain[m.start : m.end] for m in shown.matches] == ["oil"]
    tail = snippet("one two three\nfour\nfive six seven eight", "three", max_chars=18).plain
    assert tail == "…two three\nfour\n…"
    # a window holding its whole budget drops a word for the break ("qq"), never a match
    full = "xx yy\nlamp oil zz\nqq rr"
    assert snippet(full, "oil", max_chars=16).plain == "…\nlamp oil zz\n…"
    assert snippet(full, "lamp", max_chars=6).plain == "…lamp…"


def test_window_follows_the_matches_with_ellipses() -> None:
    filler = "lorem ipsum dolor sit amet " * 40  # 1,080 characters without matches
    text = filler + "the invoice from Lisbon was paid " + filler
    out = make_snippet(text, "Lisbon invoice", max_chars=120)
    assert_safe(out)
    assert out.startswith("…") and out.endswith("…")
    assert marked(out) == ["invoice", "Lisbon"]
    assert len(visible(out)) <= 120
    inner = visible(out).strip("…")
    assert inner in clean_text(text)
    assert not inner.startswith(("orem", "psum", "olor", "met")), "cut inside a word"


def test_densest_window_wins() -> None:
    one = "budget " + "filler words here " * 30
    many = "budget meeting about budget and the travel budget "
    text = one + many + "filler words here " * 30
    out = make_snippet(text, "budget travel", max_chars=80)
    assert marked(out).count("budget") == 3 and "travel" in marked(out)


def test_edges_have_no_ellipsis() -> None:
    start = make_snippet("budget " + "x y z " * 100, "budget", max_chars=50)
    assert start.startswith("<mark>budget</mark>") and start.endswith("…")
    end = make_snippet("x y z " * 100 + "final budget", "budget", max_chars=50)
    assert end.endswith("<mark>budget</mark>") and end.startswith("…")
    short = make_snippet("a short budget note", "budget")
    assert short == "a short <mark>budget</mark> note"


def test_no_match_shows_the_start() -> None:
    out = make_snippet("alpha beta gamma " * 50, "zeta", max_chars=40)
    assert out.startswith("alpha beta") and out.endswith("…")
    assert "<mark>" not in out and len(visible(out)) <= 40


def test_tiny_and_empty() -> None:
    assert make_snippet("", "x") == ""
    assert make_snippet("\x00\u200b ", "x") == ""
    out = make_snippet("abcdefghij", "abcdefghij", max_chars=3)
    assert len(visible(out)) <= 3
    assert_safe(out)


_chars = st.one_of(
    st.characters(),
    st.sampled_from(
        [*"<>&\"' \n\tmark/", "<mark>", "</mark>", "&amp;", "\x00", "\u202e", "\n```", "\n    "]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(
        st.one_of(_chars, st.sampled_from(["budget ", "Budget", "the ", "cat", "cats "])),
        max_size=200,
    ).map("".join),
    query=st.lists(
        st.one_of(_chars, st.sampled_from(["budget", "cat ", "the ", " "])), max_size=12
    ).map("".join),
    max_chars=st.integers(1, 300),
    markdown=st.booleans(),
)
@example(
    text="0'0", query="0'0", max_chars=3, markdown=False
)  # a token with inner punctuation is one term
@example(text="è0", query="e0", max_chars=3, markdown=False)  # met through the folded term only
@example(
    text="a\ufadab", query="\ufada", max_chars=3, markdown=False
)  # an unassigned CJK code point
@example(
    text="budget \U0003134b0", query="\U0003134b", max_chars=5, markdown=False
)  # one after a space
@example(
    text="0\n\n0", query="", max_chars=3, markdown=False
)  # a paragraph break is two characters
def test_snippet_properties(text: str, query: str, max_chars: int, markdown: bool) -> None:
    out = make_snippet(text, query, max_chars=max_chars, markdown=markdown)
    assert_safe(out)
    seen = visible(out)
    assert len(seen) <= max(max_chars, 1)
    body = clean_text(text)
    # clean_text's text but for its line breaks, each a "\n" (two for a blank line, then a
    # code line's indentation) where clean_text has a space, and a re-opened fence's line
    reopened = re.match(r"(`{3,}|~{3,})\n(?=…)", seen) if markdown else None
    inner = seen[reopened.end() if reopened else 0 :].removeprefix("…").removesuffix("…")
    # (and the text's first line's indentation, where it is code)
    assert re.sub(r"\n\n? *", " ", inner).lstrip(" ") in body
    if len(snippet(text, query, max_chars=len(text) + 1, markdown=markdown).plain) <= max_chars:
        assert re.sub(r"\n\n? *", " ", seen).lstrip(" ") == body
    terms = set(query_terms(query))
    for word in marked(out):
        # one token as the analyzer cuts them (technical tokens such as IL-6 or 0'0 keep
        # their inner punctuation)
        assert word and not any(c.isspace() for c in word)
        # the marked word's stem, or its accent-folded form (the analyzer emits both: è0 →
        # è0, e0), is a query term
        assert set(query_terms(word)) & terms


_MARKDOWN_PIECES = ["```", "~~~", "``````````", "~~~~~~~~", "```py", "budget", "x", " ", "    "]
_MARKDOWN_PIECES += ["\t", "\n", "\n\n", "\r\n", "\r", "<b>", "&", "\\", "*", "#"]


@settings(max_examples=500, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_MARKDOWN_PIECES), max_size=40),
    max_chars=st.integers(1, 40),
    title=st.integers(0, 40),
)
def test_a_markdown_snippet_of_fences_tabs_and_line_endings_keeps_its_contract(
    pieces: list[str], max_chars: int, title: int
) -> None:
    """Fences of both kinds and lengths, info strings, tabs, CR and CRLF line endings and a
    title, in a small budget: at most ``max_chars`` characters (a re-opened fence included),
    safe HTML, and its matches where ``plain_snippet`` reads them."""
    text = "".join(pieces)
    shown = snippet(text, "budget", max_chars=max_chars, title=min(title, len(text)), markdown=True)
    assert len(shown.plain) <= max_chars
    out = shown.html()
    assert_safe(out)
    assert plain_snippet(out) == (shown.plain, [(m.start, m.end) for m in shown.matches])
    assert shown.title_chars <= len(shown.plain)


def test_folded_query_marks_the_word_as_written() -> None:
    """``munchen`` meets ``München`` through the folded term (analyzer en-3); the mark covers
    the original characters."""
    assert make_snippet("Treffen in München.", "munchen") == "Treffen in <mark>München</mark>."
    assert make_snippet("l'église", "eglise") == "l&#x27;<mark>église</mark>"


def test_cjk_bigrams_mark_their_characters_as_one_run() -> None:
    """A CJK query's overlapping bigrams make one mark over the characters they cover."""
    assert make_snippet("北京烤鸭很好吃", "烤鸭") == "北京<mark>烤鸭</mark>很好吃"
    assert make_snippet("北京烤鸭很好吃", "北京烤鸭") == "<mark>北京烤鸭</mark>很好吃"


@pytest.mark.parametrize(
    ("text", "query", "expected"),
    [
        # a zero-width space inside a word does not separate it for BM25 (analyzer en-7), so
        # Rechnung finds Rech\u200bnung and marks it whole, and Rech finds nothing there
        ("Die Rech\u200bnung kam", "Rech", "Die Rechnung kam"),
        ("Die Rech\u200bnung kam", "Rechnung", "Die <mark>Rechnung</mark> kam"),
        # a pasted query with a zero-width space is the word without it, as BM25 reads it
        ("Die Rechnung kam", "Rech\u200bnung", "Die <mark>Rechnung</mark> kam"),
        # a hyphenated word meets the word without the hyphen (en-7), and is marked whole
        ("Schick mir eine E-Mail", "email", "Schick mir eine <mark>E-Mail</mark>"),
        ("Send me an email", "e-mail", "Send me an <mark>email</mark>"),
        # so does a word with any apostrophe (en-7)
        ("Frau O\u2018Neill kam", "O'Neill", "Frau <mark>O\u2018Neill</mark> kam"),
        # a control or private-use character inside a word separates too
        ("Die Rech\x00nung kam", "Rech", "Die <mark>Rech</mark>nung kam"),
        ("Die Rech\ue000nung kam", "nung", "Die Rech<mark>nung</mark> kam"),
        # a soft hyphen does not (analyzer en-5): the word is marked whole, without it
        ("Die Rech\u00adnung kam", "Rechnung", "Die <mark>Rechnung</mark> kam"),
        ("Die Rech\u00ad\u200b nung\u00ad kam", "nung", "Die Rech <mark>nung</mark> kam"),
    ],
)
def test_marks_the_words_bm25_matched_across_invisible_characters(
    text: str, query: str, expected: str
) -> None:
    """The snippet analysed its text after cleaning, which joined ``Rech\\u200bnung`` into
    ``Rechnung``: a search for ``Rech`` that BM25 matched there showed nothing marked, and
    one for ``Rechnung`` that BM25 did not match showed the word marked. It now marks the
    analyzer's own matches of the text as indexed, at their places in the cleaned text."""
    assert make_snippet(text, query) == expected


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["Rech", "nung", "Müller", " ", "\u200b", "\u00ad", "\x00", "\ue000",
                         "\u200d", "\n", "IL-6", ".NET", "C++", "北京", "\u0308"]),
        max_size=30,
    ).map("".join),
    query=st.sampled_from(["Rech", "nung", "Rechnung", "Mueller", "il", "IL-6", ".net", "c++",
                           "北京", "Rech\u200bnung"]),
)  # fmt: skip
def test_marks_exactly_the_terms_the_analyzer_matches(text: str, query: str) -> None:
    """Shown whole, a snippet marks the words where the analyzer finds the query's terms in
    the text it indexed (``ncindex.embedding.analyzer.occurrences``), and only those: each
    mark is a match, and each match is in a mark (a compound's part in the compound's)."""
    shown = snippet(text, query, max_chars=10_000)
    found = occurrences(text, set(terms(query)))
    assert {m.term for m in shown.matches} <= {t.text for t in found}
    words = [set(terms(shown.plain[m.start : m.end])) for m in shown.matches]
    for t in found:
        assert any(t.text in word for word in words), t


def test_a_character_assigned_after_pythons_unicode_is_kept() -> None:
    """Python 3.11's ``unicodedata`` is Unicode 14: an emoji of Unicode 15 (U+1FA77, pink
    heart) was unassigned to it and dropped from every snippet. Characters are classified in
    ``unicodedata2``'s newest database now; one still unassigned there goes."""
    assert make_snippet("Love \U0001fa77 pink", "pink") == "Love \U0001fa77 <mark>pink</mark>"
    assert make_snippet("Love \U000e0080 pink", "pink") == "Love <mark>pink</mark>"


CARD = "# Crane \U0001fa77 *winch*"  # a Deck card's title: its "#" and "*" are its words


@pytest.mark.parametrize(
    ("text", "query", "max_chars", "plain", "title_chars"),
    [
        # shown whole: the title, then its body on a line of its own
        (f"{CARD}\n\n**oil** it", "oil", 240, f"{CARD}\n\n**oil** it", 17),
        # what cleaning drops or collapses in the title is not counted
        ("Foo\ufeff*Mom*  \U0001fa77\n\n**Buy** a lamp", "lamp", 240,
         "Foo*Mom* \U0001fa77\n\n**Buy** a lamp", 10),
        # cut inside the title: all of it title, both ellipses
        (f"one two {CARD} three four five\n\nbody " + "x " * 200, "winch", 14,
         "…\U0001fa77 *winch*…", 11),
        # cut inside the title, ending at its end: the line break and the cut after it are not
        (f"one two {CARD} three\n\nbody " + "x " * 200, "winch", 20,
         "…\U0001fa77 *winch* three\n…", 16),
        # starting inside the title, ending in the body
        (f"one two three {CARD}\n\n**oil** " + "x " * 200, "winch oil", 30,
         "…\U0001fa77 *winch*\n\n**oil** x x x…", 10),
        # starting past the title
        (f"{CARD}\n\n" + "x " * 200 + "**oil** it", "oil", 20, "…x x x x **oil** it", 0),
    ],
)  # fmt: skip
def test_a_snippet_says_how_many_of_its_characters_are_the_title(
    text: str, query: str, max_chars: int, plain: str, title_chars: int
) -> None:
    """A Deck card's snippet begins with its title (its text is ``"{title}\\n\\n{body}"``),
    which the search page shows as written while it reads the body as Markdown; the page
    re-did the server's cleaning to find where the title ended, and failed where the two
    disagreed. The snippet says it: its first ``title_chars`` characters (code points; a
    ``…`` cutting the title counted with it)."""
    title = text.split("\n\n")[0]
    shown = snippet(text, query, max_chars=max_chars, title=len(title))
    assert (shown.plain, shown.title_chars) == (plain, title_chars)


@settings(max_examples=300, deadline=None)
@given(
    title=st.lists(st.sampled_from(["winch", "*a*", "#", " ", "  ", "\ufeff", "\U0001fa77", "x"]),
                   max_size=12).map("".join),
    body=st.lists(st.sampled_from(["winch", "oil", " ", "\n", "* b"]), max_size=40).map("".join),
    query=st.sampled_from(["winch", "oil", "b"]),
    max_chars=st.integers(3, 40),  # room for the ellipses
)  # fmt: skip
def test_a_snippets_title_is_the_titles_cleaned_text(
    title: str, body: str, query: str, max_chars: int
) -> None:
    """Whatever the window, the snippet's first ``title_chars`` characters are the title's
    cleaned text (or a piece of it, between the ellipses of cuts inside it), followed by a
    line break or the end (or a cut's ``…``); a window that starts at the text's start starts
    with the whole title."""
    text = f"{title}\n\n{body}".strip()
    cut = len(title.strip()) if text.startswith(title.strip()) else 0
    shown = snippet(text, query, max_chars=max_chars, title=cut)
    head, rest = shown.plain[: shown.title_chars], shown.plain[shown.title_chars :]
    assert head.strip("…") in clean_text(title)
    assert rest in ("", "…") or rest.startswith("\n") or not head  # "…": cut at the title's end
    if head and not shown.plain.startswith("…") and not head.endswith("…"):
        assert head == clean_text(title)
