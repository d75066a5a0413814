"""E-mails whose plain body is ``format=flowed`` (RFC 3676), written by hand as Thunderbird
(``format=flowed``, DelSp absent: the soft break after a space the text has) and Apple Mail
(``format=flowed; delsp=yes``, quoted-printable) send them: read back into paragraphs, quote
levels kept, space-stuffing removed, the signature separator on its own line; a fixed body
as it was. Before, each soft line break stayed a hard one: the body was indexed, chunked and
shown at the sender's wrap width."""

from __future__ import annotations

import html
import re
from email.message import MIMEPart

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ncindex.text import mail
from ncindex.text.chunking import Chunker
from ncindex.text.extract import extract_text
from ncindex.text.flowed import unflow
from ncindex.text.snippets import make_snippet

_HEADERS = (
    "From: Alice Example <alice@example.org>\r\n"
    "To: Bob Example <bob@example.org>\r\n"
    "Subject: Re: Harbour rota\r\n"
    "Date: Tue, 01 Dec 2026 09:30:00 +0000\r\n"
    "MIME-Version: 1.0\r\n"
)
_HEADING = (
    "# Re: Harbour rota\n\nFrom: Alice Example <alice@example.org>\n"
    "To: Bob Example <bob@example.org>\nDate: Tue, 01 Dec 2026 09:30:00 +0000\n\n"
)

#: A reply as Thunderbird writes it: soft breaks after the text's own spaces, a line
#: beginning "From " space-stuffed, two quote levels, and a signature.
THUNDERBIRD_REPLY = (
    _HEADERS + "User-Agent: Mozilla Thunderbird\r\n"
    "Content-Type: text/plain; charset=UTF-8; format=flowed\r\n"
    "Content-Transfer-Encoding: 8bit\r\n\r\n"
    "Hi Bob,\r\n"
    "\r\n"
    "Thanks for the rota. I can take the Friday night shift at the harbour \r\n"
    "if Rui swaps with me on Sunday; the ferry timetable changes that week \r\n"
    "anyway.\r\n"
    " From what I remember, the crane inspection is due on the 14th.\r\n"
    "\r\n"
    "On 01.12.26 08:10, Bob Example wrote:\r\n"
    "> Could someone cover Friday night? The pilot boat needs two people on \r\n"
    "> board and Rui is away.\r\n"
    ">\r\n"
    ">> Rui Costa wrote:\r\n"
    ">> I am away from Thursday to Saturday, back for the Sunday morning \r\n"
    ">> tide.\r\n"
    ">\r\n"
    "> Thanks, Bob\r\n"
    "\r\n"
    "-- \r\n"
    "Alice Example\r\n"
    "Harbour office, Pier 3\r\n"
)
THUNDERBIRD_TEXT = _HEADING + (
    "Hi Bob,\n"
    "\n"
    "Thanks for the rota. I can take the Friday night shift at the harbour if Rui swaps "
    "with me on Sunday; the ferry timetable changes that week anyway.\n"
    "From what I remember, the crane inspection is due on the 14th.\n"
    "\n"
    "On 01.12.26 08:10, Bob Example wrote:\n"
    "> Could someone cover Friday night? The pilot boat needs two people on board and Rui "
    "is away.\n"
    ">\n"
    ">> Rui Costa wrote:\n"
    ">> I am away from Thursday to Saturday, back for the Sunday morning tide.\n"
    ">\n"
    "> Thanks, Bob\n"
    "\n"
    "--\n"  # (the extraction strips trailing white space: each line's, and the text's)
    "Alice Example\n"
    "Harbour office, Pier 3"
)


def _read(message: str) -> str:
    result = extract_text(
        message.encode(), mime_type="message/rfc822", filename="m.eml", max_chars=10**6
    )
    assert result.markdown and not result.truncated
    return result.text


def test_a_flowed_reply_is_read_in_paragraphs_with_its_quote_levels_and_signature() -> None:
    """Thunderbird's reply: each paragraph one line (the spaces it broke after kept, DelSp
    absent), the stuffing before "From " removed, each quoted paragraph behind its level's
    ``>`` characters, the "-- " separator and the signature's lines fixed. Failed before:
    every line of the body as sent."""
    assert _read(THUNDERBIRD_REPLY) == THUNDERBIRD_TEXT


#: Apple Mail's encoding: ``delsp=yes``, the soft break's space added after the text's
#: own one (RFC 3676 §4.2) or inside a word too long for a line, quoted-printable.
APPLE_MAIL = (
    _HEADERS + "Content-Type: text/plain; charset=utf-8; format=flowed; delsp=yes\r\n"
    "Content-Transfer-Encoding: quoted-printable\r\n\r\n"
    "The winter timetable is on the list archive: =20\r\n"
    "https://lists.example.org/harbour/2026-December/=20\r\n"
    "winter-timetable.html =E2=80=94 the 18:40 ferry now stops at the =20\r\n"
    "island pier.\r\n"
    "\r\n"
    "=E6=B8=AF=E3=81=AE=E5=BD=93=E7=9B=B4=E8=A1=A8=E3=82=92=20\r\n"
    "=E9=80=81=E3=82=8A=E3=81=BE=E3=81=99=E3=80=82\r\n"
)


@pytest.mark.parametrize(
    ("delsp", "body"),
    [
        (
            "; delsp=yes",
            "The winter timetable is on the list archive: "
            "https://lists.example.org/harbour/2026-December/winter-timetable.html — the 18:40 "
            "ferry now stops at the island pier.\n\n港の当直表を送ります。",
        ),
        (
            "",  # DelSp absent is "no" (RFC 3676 §4.1): every soft break's space kept
            "The winter timetable is on the list archive:  "
            "https://lists.example.org/harbour/2026-December/ winter-timetable.html — the 18:40 "
            "ferry now stops at the  island pier.\n\n港の当直表を 送ります。",
        ),
    ],
)
def test_delsp_yes_deletes_the_space_of_each_soft_break(delsp: str, body: str) -> None:
    """With ``delsp=yes`` the space before each soft break is the sender's, not the text's:
    the URL and the Japanese sentence are whole again, and the words broken after their
    own space keep one. Failed before: the URL and the sentence split across lines."""
    assert _read(APPLE_MAIL.replace("; delsp=yes", delsp)) == _HEADING + body


def test_an_improperly_flowed_line_ends_its_paragraph_at_a_quote_level_or_signature() -> None:
    """RFC 3676's three exceptions (§4.1): a flowed line before a change of quote depth
    ("quote-depth wins", §4.5) or before a signature separator ends its paragraph, and so
    does the end of the body; a line of one or more spaces is flowed; the separator is
    found quoted and stuffed too. Parameter names and values are not case-sensitive."""
    message = (
        _HEADERS + "Content-Type: text/plain; Format=Flowed; DelSp=No\r\n\r\n"
        "> The dredger arrives on Monday and \r\n"
        "> stays a week. \r\n"
        ">> Who pays for the berth? \r\n"
        ">> The port or the contractor?\r\n"
        "> -- \r\n"
        "> Bob\r\n"
        "Agreed, the port \r\n"
        "   \r\n"
        "pays. \r\n"
        "-- \r\n"
        "Alice \r\n"
        "Pier 3 "
    )
    assert _read(message) == _HEADING + (
        "> The dredger arrives on Monday and stays a week.\n"
        ">> Who pays for the berth? The port or the contractor?\n"
        "> --\n"
        "> Bob\n"
        "Agreed, the port   pays.\n"
        "--\n"
        "Alice Pier 3"
    )


@pytest.mark.parametrize("content_type", ["text/plain; charset=UTF-8", "text/plain; format=fixed"])
def test_a_fixed_body_keeps_its_line_breaks_and_spaces(content_type: str) -> None:
    """A body without ``format=flowed`` (or ``format=fixed``) is read as it was: each line
    as sent, the space-stuffed one's leading space and the quote marks as they are (the
    extraction strips lines' trailing white space, as before). A guard: passes on the old
    code as well."""
    message = THUNDERBIRD_REPLY.replace("text/plain; charset=UTF-8; format=flowed", content_type)
    assert _read(message) == _HEADING + (
        "Hi Bob,\n"
        "\n"
        "Thanks for the rota. I can take the Friday night shift at the harbour\n"
        "if Rui swaps with me on Sunday; the ferry timetable changes that week\n"
        "anyway.\n"
        " From what I remember, the crane inspection is due on the 14th.\n"
        "\n"
        "On 01.12.26 08:10, Bob Example wrote:\n"
        "> Could someone cover Friday night? The pilot boat needs two people on\n"
        "> board and Rui is away.\n"
        ">\n"
        ">> Rui Costa wrote:\n"
        ">> I am away from Thursday to Saturday, back for the Sunday morning\n"
        ">> tide.\n"
        ">\n"
        "> Thanks, Bob\n"
        "\n"
        "--\n"
        "Alice Example\n"
        "Harbour office, Pier 3"
    )


def test_unflow_keeps_a_body_without_a_final_line_ending_and_crs_alone() -> None:
    """Lines end CRLF, CR or LF (as the ``email`` parser splits them); the text ends in a
    line break only where the body did."""
    assert unflow("a \rb\n\n> c \r\n> d", delsp=False) == "a b\n\n> c d"
    assert unflow("", delsp=True) == ""
    assert unflow("\r\n", delsp=True) == "\n"


def test_a_flowed_mail_s_snippet_and_chunks_hold_whole_paragraphs(
    make_chunker,
) -> None:
    """The page shows every line break of an e-mail's snippet (its header lines are lines):
    a flowed paragraph's snippet read as one line, and the chunker, cutting the reply into
    small chunks, cuts it between paragraphs. Failed before: the snippet broke at the
    sender's wrap ("…harbour\\nif Rui…"), and the chunks held those line breaks."""
    text = _read(THUNDERBIRD_REPLY)
    snippet = html.unescape(re.sub(r"</?mark>", "", make_snippet(text, "ferry timetable")))
    assert "the harbour if Rui swaps with me on Sunday; the ferry timetable changes" in snippet
    chunker: Chunker = make_chunker(40, 0)
    chunks = [chunk.text for chunk in chunker.chunk_text(text, markdown=True)]
    paragraph = (
        "Thanks for the rota. I can take the Friday night shift at the harbour if Rui swaps "
        "with me on Sunday; the ferry timetable changes that week anyway."
    )
    assert any(chunk.startswith(paragraph) for chunk in chunks), chunks
    quoted = ">> I am away from Thursday to Saturday, back for the Sunday morning tide."
    assert any(quoted in chunk for chunk in chunks), chunks


def test_a_long_flowed_body_is_read_only_until_past_max_chars() -> None:
    """The lines of a flowed body are read until its text is past the characters left:
    the text is the whole body's beginning, cut there and marked truncated."""
    line = "> The pilot boat needs two people on board and Rui is away this \r\n"
    body = (line * 9 + "> week.\r\n>\r\n") * 10_000  # 6.7 MB
    whole = unflow(body, delsp=False)
    read = unflow(body, delsp=False, max_chars=1000)
    assert 1000 < len(read) < 1000 + len(whole.split("\n", 1)[0]) + 2
    assert whole.startswith(read.rstrip("\n"))  # its last paragraph as far as it was read
    message = _HEADERS + "Content-Type: text/plain; format=flowed\r\n\r\n" + body
    text, cut = mail.eml_text(message.encode(), max_chars=2000)
    assert cut and len(text) == 2000
    assert text.startswith(_HEADING + "> The pilot boat needs two people on board and Rui is")


@pytest.mark.parametrize(
    "line",
    [
        ">" * 1000 + "\r\n",  # a quoted empty line: no content at all
        ">" * 100_000 + " x\r\n",  # one character of content 100,000 levels deep
    ],
)
def test_a_flowed_body_of_quote_marks_is_read_only_until_past_max_chars(line: str) -> None:
    """The bound counted a line's content only, not its quote marks: a 10 MB body of
    quoted empty lines (or of 100,000 quote marks before a letter) was read whole for a
    ``max_chars`` of 1,000, its text 10 MB. Its quote marks and line breaks count now:
    the text holds the lines read until it is past the bound, the last one whole, and the
    e-mail's text is cut at the bound and marked truncated. Failed before: the text was
    the whole body, 10,010,000 characters."""
    body = line * (10_000_000 // len(line))
    read = unflow(body, delsp=False, max_chars=1000)
    assert 1000 < len(read) <= 1000 + len(line) + 1
    assert unflow(body, delsp=False).startswith(read)
    message = _HEADERS + "Content-Type: text/plain; format=flowed\r\n\r\n" + body
    text, cut = mail.eml_text(message.encode(), max_chars=1000)
    assert cut and len(text) == 1000 and text.startswith(_HEADING + ">" * 100)


_FLOWED_ATOMS = st.sampled_from(
    [">", "> ", " ", "-- ", "a", "word ", "港 ", "\r\n", "\n", "\r", ">>", "From "]
)


@settings(max_examples=300, deadline=None)
@given(
    atoms=st.lists(_FLOWED_ATOMS, max_size=80),
    delsp=st.booleans(),
    max_chars=st.integers(0, 60),
)
@example(atoms=[">", "\n"] * 10, delsp=False, max_chars=0)  # quoted empty lines only
def test_unflow_with_max_chars_is_a_prefix_longer_than_the_bound_or_the_whole_text(
    atoms: list[str], delsp: bool, max_chars: int
) -> None:
    """``unflow`` with ``max_chars`` is the whole text, or one longer than ``max_chars``
    (so that the caller, cutting it there, marks it truncated) that begins the whole text
    (its last paragraph as far as it was read); and it stops within a line of the bound,
    whatever the quote marks (failed before on a body of quoted empty lines, the example:
    read whole). The line break that ends the text read may be inside the whole text's
    paragraph."""
    body = "".join(atoms)
    whole = unflow(body, delsp=delsp)
    read = unflow(body, delsp=delsp, max_chars=max_chars)
    assert read == whole or (len(read) > max_chars and whole.startswith(read.rstrip("\n")))
    longest = max(len(each) for each in re.split(r"\r\n|\r|\n", body))
    # the lines read before the last one: at most max_chars counted, and a space after the
    # marks of each quoted paragraph (not counted; its marks and content are, two or more);
    # the last one: its content and marks, a space, the break before it and one after
    assert len(read) <= max_chars * 3 // 2 + longest + 3


def test_a_flowed_body_is_read_under_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines of a flowed body were read whatever the budget said: ``late`` was asked
    while the message was parsed and before each part but the first, never while the one
    plain body's lines were joined (2,000,000 empty lines took 4.3 s here). It is asked
    every 4,096 lines now: spent once the body is decoded, the text holds its first lines
    only. Failed before: the text was the body up to ``max_chars``."""
    decoded: list[bool] = []
    content = mail._part_content

    def decoding(part: MIMEPart) -> str:
        decoded.append(True)
        return content(part)

    monkeypatch.setattr(mail, "_part_content", decoding)
    body = "The pilot boat needs two people.\r\n" * 20_000
    message = _HEADERS + "Content-Type: text/plain; format=flowed\r\n\r\n" + body
    text, _ = mail.eml_text(message.encode(), late=lambda: bool(decoded), max_chars=10**6)
    assert text.startswith(_HEADING + "The pilot boat needs two people.\n")
    assert text.count("The pilot boat") == 4095
