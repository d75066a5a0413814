"""The character encoding of legacy text: plain text, delimited text, HTML and e-mail bodies
that do not say how they are encoded (DESIGN §6).

The order is the one of WHATWG HTML's "determining the character encoding" (§13.2.3.2), the
guessing step filled in: a Unicode byte order mark, then strict UTF-8 (valid UTF-8 is almost
never anything else), then UTF-8 with a few bad bytes (:func:`_nearly_utf8`), then the
declared charset (a ``Content-Type`` parameter, an HTML
``<meta charset>`` or XML declaration), then charset-normalizer's (MIT) guess, then
windows-1252 (the Encoding Standard's default for Western locales).
"""

from __future__ import annotations

import codecs
import collections
import itertools
import re
import unicodedata  # Python's (not unicodedata2's, as snippets use): see _utf8_kinds
from typing import Any

from ncindex.errors import ExtractionError

_BOMS = (  # UTF-32 before UTF-16: the UTF-32-LE BOM begins with the UTF-16-LE one
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: Bytes sampled for charset detection (charset-normalizer is slow on large inputs).
_DETECT_SAMPLE = 64 * 1024
#: Tags, comments and character references: markup, not text, left out of what is guessed on
#: (the bytes of ``<style>`` rules and attribute values sway charset-normalizer: a French page
#: in windows-1252 was taken for windows-1257). A tag holds no ``<``: a ``<`` in the text
#: (``Preis < 5``) is text, not the start of a tag running to the next ``>`` (which took the
#: text up to the next real tag out of the sample, and made a run of ``<`` quadratic: 120 KB
#: of them took 31 s)
_MARKUP = re.compile(rb"<[^<>]*>|&#?\w+;")
#: The share of a parity's bytes that must be NUL for BOM-less UTF-16 (:func:`_wide_unicode`).
_WIDE_NULS = 0.3
#: Control characters that plain text does not hold (C0 but tab, line feed, form feed and
#: carriage return; DEL).
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def decode_text(
    data: bytes, declared: str | None, max_chars: int, *, markup: bool = False
) -> tuple[str, bool]:
    """Decode at most the bytes ``max_chars`` characters can need (see the module for the
    order); ``declared`` is the charset the file or its transport names (``None``: none);
    ``markup`` says ``data`` is HTML or XML (the guess is made on the text between its tags).
    Returns the text and whether bytes were cut. Raises :class:`ExtractionError` for NUL
    bytes in what is neither UTF-16 nor UTF-32 (binary data)."""
    limit = 4 * max_chars + 4  # no encoding used here takes more than 4 bytes per character
    cut = len(data) > limit
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            body = data[len(bom) : len(bom) + limit]
            return codecs.getincrementaldecoder(encoding)("replace").decode(body), cut
    head = data[:limit]
    if b"\x00" in head:
        wide = _wide_unicode(head)
        if wide is None:
            raise ExtractionError("binary data: NUL bytes in a text file")
        return codecs.getincrementaldecoder(wide)("replace").decode(head, final=not cut), cut
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(head, final=not cut), cut
    except UnicodeDecodeError:
        pass
    nearly = _nearly_utf8(head, final=not cut)
    if nearly is not None:
        return nearly, cut
    known = known_encoding(declared)
    if known:
        try:
            return head.decode(known, errors="replace"), cut
        except (LookupError, UnicodeError, ValueError):
            pass  # a codec that is no text encoding (base64, rot13, idna, punycode…): guess
    sample = _MARKUP.sub(b" ", head[: 4 * _DETECT_SAMPLE]) if markup else head
    return head.decode(_guess_encoding(sample) or "cp1252", errors="replace"), cut


def decode_without_nuls(
    data: bytes, declared: str | None, max_chars: int, *, markup: bool = False
) -> tuple[str, bool]:
    """:func:`decode_text`, NUL bytes dropped when they are not UTF-16 or UTF-32 text (where
    :func:`decode_text` refuses them as binary data), for what is known to be text whatever
    a stray NUL says: an HTML file (a parser reads past it), an e-mail body part (a base64 or
    quoted-printable one decodes to any bytes). Dropped as from any extracted text
    (:func:`~ncindex.text.extract.normalize_text`) rather than losing the whole document.
    Same arguments and result as :func:`decode_text`; raises nothing of its own."""
    try:
        return decode_text(data, declared, max_chars, markup=markup)
    except ExtractionError:
        return decode_text(data.replace(b"\x00", b""), declared, max_chars, markup=markup)


#: An XML declaration's ``encoding`` (XML 1.0 §4.3.3), at the very start of a document.
_XML_ENCODING = re.compile(rb"\s*<\?xml\s[^<>]*?encoding\s*=\s*[\"']([\w.:-]+)[\"']", re.I)
#: What the prescan stops at: a comment's start, or a ``<meta`` tag's.
_COMMENT_OR_META = re.compile(rb"<!--|<meta[\s/]", re.I)
#: A ``charset`` attribute, or ``charset=`` in a ``content`` attribute, in a tag's attributes.
_META_CHARSET = re.compile(rb"charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)


def declared_markup_encoding(data: bytes) -> str | None:
    """The encoding an HTML or XHTML document declares in itself (lower case, as written:
    ``"windows-1251"``), or ``None``: an XML declaration within the first 1,024 bytes, else
    the first ``<meta charset=…>`` (or ``content="…; charset=…"``) outside comments within
    the first 5 % of the document (at least 2,048 bytes, the window BeautifulSoup's
    ``EncodingDetector.find_declared_encoding`` searched). As WHATWG HTML's "prescan a byte
    stream to determine its encoding" does, a comment (``<!--`` to ``-->``) is stepped over:
    a page that kept its old ``<meta>`` commented out was read in that encoding. Linear in
    the window: BeautifulSoup's pattern ran from each ``<meta`` across the rest of it (8 MB
    of ``<meta `` took 276 s)."""
    head = data[:1024]
    xml = _XML_ENCODING.match(head)
    if xml:
        return xml.group(1).decode("ascii").lower()
    window = data[: max(2048, len(data) // 20)]
    pos = 0
    while found := _COMMENT_OR_META.search(window, pos):
        if found.group() == b"<!--":
            end = window.find(b"-->", found.start() + 2)  # <!--> is a whole comment
            close = 3
        else:
            end, close = window.find(b">", found.end()), 1
        if end < 0:  # runs past the window: nothing after it is looked at
            return None
        if found.group() != b"<!--":
            charset = _META_CHARSET.search(window, found.end(), end)
            if charset:
                return charset.group(1).decode("ascii").lower()
        pos = end + close
    return None


#: How many valid multi-byte UTF-8 sequences UTF-8 with bad bytes must hold per bad one
#: (:func:`_nearly_utf8`). Text in a legacy code page holds few such sequences by chance and
#: more bad ones: at most 3 per bad one in the short samples of tests/single_byte_texts.py and
#: tests/cjk_texts.py (Big5 ``讀書心得``), at most 0.35 in each encoding's samples joined.
_UTF8_PER_BAD = 8
#: How many valid multi-byte UTF-8 sequences UTF-8 cut inside its last character must hold
#: before that character: one is what legacy text shows by chance (Shift-JIS ``ﾃｽﾄ``,
#: ``C3 BD C4``, reads as ``ý`` and the start of a character). Two are no proof either: a
#: windows-1252 text ending in an accented small letter (the lead byte of a longer sequence:
#: ``voilà`` ends in E0) with two capitals before ``…`` (``CAFÉ… ou THÉ…``, C9 85) read as
#: ``CAFɅ ou THɅ voil\ufffd``; so none of those sequences may read as a phonetic letter
#: (:data:`_PHONETIC`, :func:`_cut_in_last_character`).
_UTF8_BEFORE_CUT = 2
#: What windows-1252 ``É``, ``Ê`` and ``Ë`` (C9–CB) before punctuation or a symbol (80–BF:
#: ``…``, a no-break space, ``»``) read as in UTF-8: U+0240–U+02FF, the end of Latin
#: Extended-B, the IPA Extensions and the spacing modifier letters (``Ʌ``, ``ɠ``, ``ɻ``,
#: ``ʅ``), letters of phonetics that the orthographies of the languages of
#: :data:`_ALPHABETS` do not write. The rest of Latin Extended-A and -B (where ``È`` and
#: ``Æ`` before punctuation land) is left out: other orthographies write it (Romanian
#: ``ș ț``, Vietnamese ``ơ ư``, Esperanto ``ĉ ŝ``). Azerbaijani ``ə`` and the ``ɛ ɔ`` of
#: West African orthographies are in the range all the same, so only one beside no small
#: letter counts (:func:`_utf8_kinds`): those stand inside words, ``É…`` after a capital.
_PHONETIC = ("\u0240", "\u02ff")
#: How many letters of the languages of :data:`_ALPHABETS` (valid multi-byte sequences) UTF-8
#: with one stray byte and fewer than :data:`_UTF8_PER_BAD` valid sequences must hold: one is
#: what legacy text shows by chance (Shift-JIS ``ﾃｽﾄ`` reads as ``ý`` and a bad byte). The
#: legacy samples of tests/single_byte_texts.py and tests/cjk_texts.py with a single bad
#: sequence (Big5 ``讀書心得`` alone) read letters of other scripts too (``Ū``, Cyrillic
#: ``Ѥ``). Latin letters of no such language are no sign of UTF-8: windows-1252 ``É`` before a
#: no-break space, ``…`` or ``»`` (French capitals: ``CAFÉ\xa0!``) reads as IPA ``ɠ``, ``Ʌ``,
#: ``ɻ``.
_UTF8_LETTERS_BESIDE_STRAY = 2


def _nearly_utf8(data: bytes, *, final: bool) -> str | None:
    """``data`` decoded as UTF-8, each bad sequence (as Python's ``"replace"`` handler
    delimits them: Unicode's "maximal subpart") read as U+FFFD, when it is UTF-8 with a few
    bad bytes — a stray byte, a Latin-1 letter pasted in, a file cut inside its last
    character — rather than text in a legacy code page (which :func:`decode_text` would
    otherwise read the whole of as mojibake, ``Grüße`` as ``GrÃ¼ÃŸe``); ``None`` otherwise.
    It is UTF-8 when it holds at least :data:`_UTF8_PER_BAD` valid multi-byte sequences per
    bad one, or when its only bad bytes are an unfinished sequence at its very end after
    at least :data:`_UTF8_BEFORE_CUT` valid ones, none of them a phonetic letter
    (:func:`_cut_in_last_character`), or when its only bad byte is one stray byte (a Latin-1
    ``é`` in UTF-8 ``Le caf\\xe9 crème brûlée``) and its valid multi-byte sequences are
    punctuation and at least :data:`_UTF8_LETTERS_BESIDE_STRAY` letters of a language of
    :data:`_ALPHABETS`: short text holds too few for the ratio, and legacy text read as
    UTF-8 scatters letters of other scripts or symbols (:func:`_stray_byte_in_latin`).
    ``final``: ``data`` is the whole text; else its end is where :func:`decode_text` cut it,
    and an unfinished sequence there is not bad (a UTF-8 file cut at the byte budget inside a
    character is strict UTF-8 less that character). ASCII with a high byte holds no valid
    sequence: legacy. Tried before a declared charset, as strict UTF-8 is: a declaration is
    often wrong (a template's ``<meta charset=iso-8859-1>``), so many valid multi-byte
    sequences by chance hardly are."""
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=final)
    bad = text.count("\ufffd") - data.count("\ufffd".encode())  # less U+FFFD written as such
    valid = len(text) - len(text.encode("ascii", "ignore")) - bad
    if valid >= _UTF8_PER_BAD * bad or (bad == 1 and _stray_byte_in_latin(data, text, final)):
        return text
    if bad == 1 and valid >= _UTF8_BEFORE_CUT and _cut_in_last_character(data, text):
        return text
    return None


def _cut_in_last_character(data: bytes, text: str) -> bool:
    """Whether ``text``, ``data`` read as UTF-8 with one bad sequence as U+FFFD, has that bad
    sequence at its very end as the start of a longer one (a file that stopped inside its
    last character) and its valid multi-byte characters hold no phonetic letter beside no
    small letter (:data:`_PHONETIC`, :func:`_utf8_kinds`): windows-1252 ``É`` before ``…``
    reads as IPA ``Ʌ``, a capital before a space (``CAFɅ ou``), where the ``ə`` of
    Azerbaijani and the ``ɛ ɔ`` of West African orthographies stand inside words of small
    letters (``Azərbaycan``, ``Akwaaba ɔdɔ``; counting the range alone, such text so cut
    was read in a legacy code page: ``AzЙ™rbaycan``). Limits: other capitals
    before punctuation read as letters of some language (``Ã…`` as ``Å``, ``Ä…`` as ``ą``,
    ``Ñ…`` as Cyrillic ``х``), so windows-1252 with only those that ends in an accented
    small letter is still read as UTF-8, and so is windows-1252 whose ``É…`` is followed by
    a small letter with no space (``CAFÉ…voilà``); UTF-8 whose phonetic letters all stand
    alone (a list of IPA symbols, ``ʃ ʒ``) with fewer than :data:`_UTF8_PER_BAD`
    multi-byte characters so cut is left to the legacy guess."""
    if not text.endswith("\ufffd"):
        return False
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return not _utf8_kinds(text)["phonetic"]


def _stray_byte_in_latin(data: bytes, text: str, final: bool) -> bool:
    """Whether ``text``, ``data`` read as UTF-8 with one bad sequence as U+FFFD, has that bad
    sequence one byte long (a byte of a legacy code page pasted in; not a cut or malformed
    multi-byte sequence) and its valid multi-byte characters are punctuation and at least
    :data:`_UTF8_LETTERS_BESIDE_STRAY` letters of the languages of :data:`_ALPHABETS`, one of
    them lower case (windows-1252 ``Ã`` before ``…``, ``”``, reads as capitals ``Å``, ``Ô``:
    Portuguese ``AMANHÃ… IRMÃ…``)."""
    kinds = _utf8_kinds(text)
    if kinds["phonetic"] or kinds["other"]:
        return False
    if kinds["letter"] < _UTF8_LETTERS_BESIDE_STRAY or not kinds["lower"]:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=final)
    except UnicodeDecodeError as error:
        return error.end - error.start == 1
    return False


def _utf8_kinds(text: str) -> collections.Counter[str]:
    """How many characters beyond ASCII of ``text`` (U+FFFD and punctuation aside) are of
    each kind: ``"letter"`` (of a language of :data:`_ALPHABETS`; ``"lower"`` counts those in
    lower case again), ``"phonetic"`` (in :data:`_PHONETIC` and beside no small letter: IPA
    ``Ʌ`` of ``CAFɅ ou``, what windows-1252 ``CAFÉ… ou`` reads as) and ``"other"`` (other
    letters, of Latin or other scripts, a phonetic one beside a small letter among them:
    Azerbaijani ``Azərbaycan``, Ewe ``ɖe``; symbols; marks). The categories here and in the
    other guesses are Python's own Unicode (14 on 3.11), as charset-normalizer's, whose
    readings they weigh, are: the legacy code pages guessed decode only to characters
    assigned long before it, and in UTF-8 text a character assigned since counts ``"other"``
    (unassigned), as the emoji and symbols of that age would anyway."""
    kinds: collections.Counter[str] = collections.Counter()
    for i, char in enumerate(text):
        if char.isascii() or char == "\ufffd" or unicodedata.category(char)[0] == "P":
            continue
        if char.lower() in _LANGUAGE_LETTERS:
            kinds["letter"] += 1
            kinds["lower"] += char.islower()
        elif _PHONETIC[0] <= char <= _PHONETIC[1] and not _beside_small_letter(text, i):
            kinds["phonetic"] += 1
        else:
            kinds["other"] += 1
    return kinds


def _beside_small_letter(text: str, i: int) -> bool:
    """Whether the character before or after ``text[i]`` (combining marks stepped over: the
    tone of Yoruba ``ɛ̀yin``) is a small letter (``islower``): a letter inside a word written
    in small letters, as the phonetic letters of the orthographies that write them stand
    (``Azərbaycan``, ``ɔdɔ``, ``yɛ``), not the capitals before punctuation that windows-1252
    ``É…`` is (``CAFɅ ou``: a capital, then a space)."""
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(text) and unicodedata.category(text[j])[0] == "M":
            j += step
        if 0 <= j < len(text) and text[j].islower():
            return True
    return False


def _wide_unicode(data: bytes) -> str | None:
    """``"utf-16-le"`` or ``"utf-16-be"`` for UTF-16 without a byte order mark (a database's
    or a Windows tool's export), ``None`` for other data with NUL bytes (binary). Told by its
    NULs, as text in a Latin script has them: every character below U+0100 has a zero high
    byte, so NULs stand at one parity only — the odd bytes for little-endian — and are
    common there (here at least :data:`_WIDE_NULS` of them); the text must decode strictly
    and hold no control characters but whitespace. charset-normalizer is not asked: it
    names UTF-16 for short binary data too (``ELF\\x00\\x01\\x02binary``)."""
    size = len(data) // 2 * 2
    even, odd = data[0:size:2], data[1:size:2]
    if size < 4:
        return None
    if odd.count(0) >= _WIDE_NULS * len(odd) and even.count(0) == 0:
        encoding = "utf-16-le"
    elif even.count(0) >= _WIDE_NULS * len(even) and odd.count(0) == 0:
        encoding = "utf-16-be"
    else:
        return None
    try:
        text = data[:size].decode(encoding)
    except UnicodeDecodeError:
        return None
    return None if _CONTROLS.search(text) else encoding


def known_encoding(name: str | None) -> str | None:
    """Python's codec name for the charset ``name`` (``"ISO-8859-1"`` → ``"iso8859-1"``), or
    ``None`` for a missing or unknown one."""
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except (LookupError, ValueError):  # unknown, or a name with a NUL in it
        return None


def _guess_encoding(data: bytes) -> str | None:
    """charset-normalizer's guess, with three preferences among the guesses that decode as
    cleanly as its first (its "chaos" measure within 0.01): the fewest misread letters
    (:func:`_oddities`: German windows-1252 CSV is otherwise read as DOS cp852, ``Köln`` as
    ``K÷ln``), Windows/ISO code pages over the classic Mac ones (short Russian cp1251 text is
    otherwise read as mac_cyrillic), and windows-1252 — the legacy default of Western locales,
    which WHATWG's Encoding Standard also uses for ``latin1`` — when it ties with the best
    (short French is otherwise cp1250; see the limit below), else a tied reading written in
    one language of its code page (:func:`_languages`: Turkish ``Çağrı`` was read as Urdu
    cp1006 ``ﮄaﻭrﮮ``, the first reading, once the windows-1252 one was left out by the next
    rule). Before those, of the
    guesses in windows-1250, -1252, -1254 and -1257 only those written in the fewest
    languages are kept (:func:`_fewest_languages`):
    Czech was read as windows-1252 by that tie (``Městský úřad`` as ``Mìstský úøad``). When
    charset-normalizer's first guess reads a character from several bytes (CJK, UTF-16), its
    readings in those code pages written in one language are put first
    (:func:`_one_language_readings`): it leaves single-byte code pages out then; without
    such a reading, the likeliest of its readings in the CJK code pages is taken
    (:func:`_likeliest_cjk_reading`): GBK ``会议纪要`` was read as cp949 ``삔累셩狼``; its
    likeliest reading in a single-byte code page of a non-Latin alphabet
    (:func:`_likeliest_alphabet_reading`) is taken over that when the share of its letters
    that are common exceeds the CJK reading's share of common characters by
    :data:`_MARGIN` (cp1251 ``Привет`` was read as cp949 ``厥外奄``). When the first guess
    is single-byte but not in Latin letters (another alphabet, or EBCDIC reading letters
    beyond ASCII as ASCII), that likeliest alphabet reading is taken, when there is one
    (windows-1255 Hebrew was read as windows-1251, windows-1251 ``Здравствуйте`` as EBCDIC
    ``GU0\\S12S3Z2V``); when there is none, it is weighed as a Latin reading is (next): HP
    Roman-8 ``ˆedin±a``, a modifier letter and a symbol, was taken for windows-1250 Romanian
    ``Şedinţa``, Urdu cp1006 ``RﺭSUMﺭ`` for windows-1252 ``RÉSUMÉ…``. When it is a
    single-byte Latin reading not written in one language of its code page (another code
    page than those of :data:`_ALPHABETS`, or one needing several of its languages), the
    one-language readings are put first too: a repeated
    French line in windows-1252 was read as windows-1257 (``Crčme brūlée``), Finnish
    ``Hyvää`` as ``Hyvðð``, Turkish ``Günaydın`` as windows-1252 ``Günaydýn``. When
    charset-normalizer finds no reading clean enough, its likeliest CJK reading at any mess
    is taken if it has none of the marks of a misread code page (:func:`_cjk_marks`): a
    cp932 list of halfwidth katakana was read as windows-1252.

    Limit: Turkish whose letters beyond ASCII are only ``ı ğ ş İ Ş ö`` reads in windows-1252
    as Icelandic (``Toplantý tutanaðý``), Lithuanian with only ``ų`` as Danish
    (``Lietuviø``), with only ``ė ū`` as French (``Pavardë``, ``Rûta``), Latvian ``š`` or
    ``ē`` as Icelandic or French (``Latvieðu``, ``Sçdes``): one language each way, and
    charset-normalizer tells the two apart neither by its mess measure (0 for both) nor by
    its language coherence (none below 33 letters; above, it ranks the popularity of all
    letters, which the ASCII ones decide: a Lithuanian sentence scored 0.25 as Lithuanian,
    its windows-1252 reading 0.44 as Danish). Such text stays windows-1252: Icelandic and
    Danish titles (``Fundargerð``, ``Mødet``) are those bytes too. It is read right from its
    first word that needs a second language in windows-1252 (Turkish ``ç``, ``ü``:
    ``Günaydın``, 8 letters; Lithuanian ``ė`` with ``ž``: ``Posėdžio``, 8), or, without one,
    once charset-normalizer's mess measure weighs words half made of accented letters
    (``kýzý``, ``aþaðý``), which it does past 10 words: Turkish so written was read right
    from 11 words (61 letters). Lithuanian with ``ų`` alone is not (``ø`` is one accented
    letter in a word): 26 words of it (139 characters) were still read as Danish."""
    from charset_normalizer import from_bytes

    sample = data[:_DETECT_SAMPLE]
    matches = list(from_bytes(sample))
    if not matches:  # none reads it cleanly enough: a CJK reading without a misread's marks
        cjk = _likeliest_cjk_reading(sample, threshold=1.0)
        if cjk is None or _cjk_marks(sample.decode(cjk[1], "replace")[:_CJK_SCORED])[0]:
            return None
        return cjk[1]
    if len(str(matches[0])) < len(sample):  # a character read from several bytes
        western = _one_language_readings(sample)
        if not western:
            cjk = _likeliest_cjk_reading(sample)
            alphabet = _likeliest_alphabet_reading(sample)
            if alphabet is not None and alphabet[0] > (0 if cjk is None else cjk[0]) + _MARGIN:
                return alphabet[1]
            if cjk is not None:
                return cjk[1]
        matches = western + matches
    else:
        if _scripts(str(matches[0])) != {"LATIN"}:  # a non-Latin alphabet, or no letter there
            alphabet = _likeliest_alphabet_reading(sample)
            if alphabet is not None:
                return alphabet[1]
        if _languages(matches[0]) != 1:
            matches = _one_language_readings(sample) + matches
    plausible = [m for m in matches if m.chaos <= matches[0].chaos + 0.01]
    odd = [_oddities(str(m)[:_CJK_SCORED]) for m in plausible]
    plausible = [m for m, n in zip(plausible, odd, strict=True) if n == min(odd)]
    plausible = _fewest_languages(plausible)
    preferred = [m for m in plausible if not m.encoding.startswith("mac_")] or plausible
    best = preferred[0]
    tied = [
        m
        for m in preferred
        if m.chaos <= best.chaos + 0.01 and m.coherence >= best.coherence - 0.01
    ]
    if any("cp1252" in (m.encoding, *m.could_be_from_charset) for m in tied):
        return "cp1252"
    one_language = [m for m in tied if _languages(m) == 1]
    return known_encoding((one_language or [best])[0].encoding)


#: The letters beyond ASCII of the languages windows-1250 (Central European), windows-1252
#: (Western European), windows-1254 (Turkish) and windows-1257 (Baltic) are written in, one
#: string per language: CLDR's main exemplar characters, lower case (Unicode CLDR 47,
#: unicode-org/cldr common/main/<lang>.xml ``<exemplarCharacters>``, read as cldr-json
#: 47.0.0 publishes it: cldr-misc-full/main/<lang>/characters.json ``exemplarCharacters``;
#: each checked there, the language code beside it). A language's auxiliary exemplars (the
#: letters of its loanwords and foreign names) are left out: German ``ç ğ ş`` or Turkish
#: ``â î û`` would let a misread code page pass as the language (Latvian ``ā ī ū`` read in
#: windows-1254 are Turkish auxiliary letters). Two departures, both for what the code page
#: can hold: Romanian's main ``ș ț`` (comma below) are not in windows-1250, which has the
#: cedilla forms ``ş ţ`` of its auxiliary set, so those stand for them; Dutch's ``íj́``
#: (``j`` and a combining acute) and the Catalan middle dot are no letters of windows-1252.
#: Turkish ``İ`` is ``i`` and a combining dot above in lower case (:func:`_languages` lowers
#: the text). Norwegian is CLDR's ``nb``. ISO-8859-9 and ISO-8859-13 hold the same letters at
#: the same bytes as windows-1254 and -1257: charset-normalizer names them among the code
#: pages a windows reading could be from.
_ALPHABETS = {
    "cp1250": (
        "áčďéěíňóřšťúůýž",  # cs
        "áäčďéíĺľňóôŕšťúýž",  # sk
        "ąćęłńóśźż",  # pl
        "áéíóöőúüű",  # hu
        "čšž",  # sl
        "čćđšž",  # hr, bs
        "ăâîşţ",  # ro (ș ț as ş ţ, see above)
        "äöüß",  # de
    ),
    "cp1252": (
        "äöüß",  # de
        "àâæçéèêëîïôœùûüÿ",  # fr
        "áéíñóúü",  # es
        "àéèìòù",  # it
        "áàâãçéêíóòôõú",  # pt
        "áäéëíïóöúü",  # nl
        "æøå",  # da
        "àéóòôæøå",  # nb
        "àéåäö",  # sv
        "šžåäö",  # fi
        "áðéíóúýþæö",  # is
        "àçéèíïóòúü",  # ca
        "šžõäöü",  # et
    ),
    "cp1254": ("çğıöşü\u0307",),  # tr
    "cp1257": (
        "ąčęėįšųūž",  # lt
        "āčēģīķļņšūž",  # lv
        "šžõäöü",  # et
    ),
}
#: Every letter of :data:`_ALPHABETS` (lower case), for :func:`_utf8_kinds`.
_LANGUAGE_LETTERS = frozenset("".join(itertools.chain.from_iterable(_ALPHABETS.values())))
#: What :func:`_languages` counts for a reading whose letters no languages of its code page
#: hold: more than any reading's count in any of the code pages.
_NO_LANGUAGE = 1 + max(len(languages) for languages in _ALPHABETS.values())


def _fewest_languages(matches: list[Any]) -> list[Any]:
    """``matches`` less the readings in a code page of :data:`_ALPHABETS` that need more
    languages of their code page (:func:`_languages`) than another such reading: a text is
    written in one language, or a few with loanwords (``naïve señor``: French and Spanish),
    while a misread code page scatters its letters over several or none. Windows-1250 Czech read
    as windows-1252 needs Icelandic ``ý``, Italian ``ì`` and Danish ``ø`` (``Mìstský úøad``);
    windows-1252 French read as windows-1250 keeps a ``ç`` that none of the Central European
    languages here writes (``Crčme brűlée ŕ la française``); windows-1254 Turkish read as
    windows-1252 needs Icelandic ``ý`` and German ``ü`` (``Günaydýn``), windows-1257 Latvian
    French ``â`` and Icelandic ``ð`` (``pagâjuðâs``). Other readings are kept."""
    counts = [_languages(m) for m in matches]
    known = [n for n in counts if n is not None]
    if not known:
        return matches
    return [m for m, n in zip(matches, counts, strict=True) if n is None or n == min(known)]


def _languages(match: Any) -> int | None:
    """The fewest languages of :data:`_ALPHABETS` whose letters together hold all non-ASCII
    letters (and combining marks) of charset-normalizer's ``match``, for the code pages it
    stands for (its encoding or one it could be from; the fewest of them);
    :data:`_NO_LANGUAGE` when none do; ``None`` when it stands for none of those code
    pages."""
    letters = {c for c in str(match).lower() if ord(c) > 127 and unicodedata.category(c)[0] in "LM"}
    counts = []
    for encoding in {match.encoding, *match.could_be_from_charset} & _ALPHABETS.keys():
        alphabets = [frozenset(a) for a in _ALPHABETS[encoding]]
        if not letters <= frozenset().union(*alphabets):
            counts.append(_NO_LANGUAGE)
            continue
        counts.append(
            next(
                size
                for size in range(len(alphabets) + 1)
                for chosen in itertools.combinations(alphabets, size)
                if letters <= frozenset().union(*chosen)
            )
        )
    return min(counts, default=None)


#: The mess (charset-normalizer's ``chaos``, 0 to 1) up to which :func:`_one_language_readings`
#: takes a reading, above charset-normalizer's default of 0.2: its mess measure counts a text
#: whose punctuation is 30 % of its characters or more as that much mess
#: (``TooManySymbolOrPunctuationPlugin``), which a word of three or four letters in quotes is
#: (windows-1252 ``„GRÜN“``: 2 of 6, 0.33; ``„FÜR“``: 0.4), and then left out every reading of
#: it in these code pages. A reading is left out from this mess up: a quoted word of two letters
#: (``„JA“``: 0.5) still is. The corpora of tests/single_byte_texts.py and tests/cjk_texts.py
#: are read as they were with this bound.
_QUOTED_WORD_MESS = 0.5
#: charset-normalizer's own bound on the mess of a reading (``from_bytes``'s ``threshold``).
_DEFAULT_MESS = 0.2


def _one_language_readings(sample: bytes) -> list[Any]:
    """charset-normalizer's readings of ``sample`` in the code pages of :data:`_ALPHABETS`
    (mess up to :data:`_QUOTED_WORD_MESS`) whose characters beyond ASCII are punctuation and
    letters (or combining marks) of one language of their code page (:func:`_languages`).
    ``from_bytes`` leaves every single-byte code page out once a CJK decoder reads the bytes
    cleanly with a character of two bytes (its "multi-byte definitive match"), and an accented
    Latin letter followed by an ASCII one is such a character: Portuguese ``não`` (``E3 6F``)
    was read as Big5 ``n緌``, Spanish ``niño`` as UTF-16, Lithuanian ``Posėdžio`` as GB18030
    ``Pos雂㱮o``; a short quoted word was read as UTF-16 (windows-1252 ``„GRÜN“`` as ``葇勜亓``)
    or in a classic Mac code page (``„GRÜN“`` and a line break as ``ÑGRÐNì``). Real CJK text
    read in these code pages brings symbols (``‚±‚ñ`` for Shift-JIS ``こん``) or letters of
    several languages. The punctuation is quotation marks and brackets around words
    (:func:`_quoting`), and a reading that holds some or a mess above charset-normalizer's
    own bound (:data:`_DEFAULT_MESS`) — one only the quoted-word rule lets in — must also hold
    no misread letter (:func:`_oddities`): two or three CJK characters read in these code
    pages are often letters of one language and punctuation, inside the word (Shift-JIS
    ``三起`` as windows-1250 ``ŽO‹N``, GBK ``深风`` as ``Éî·ç``), before it (``時間`` as
    windows-1252 ``•rég``) or before letters whose case breaks (GBK ``会议`` as ``»áÒé``),
    and those readings, put before the CJK ones, read them so or as Big5 (``頗祜``)."""
    from charset_normalizer import from_bytes

    readings = []
    for match in from_bytes(sample, cp_isolation=list(_ALPHABETS), threshold=_QUOTED_WORD_MESS):
        text = str(match)
        kinds = {unicodedata.category(c)[0] for c in text if ord(c) > 127}
        if not kinds <= set("LMP") or _languages(match) != 1:
            continue
        widened = "P" in kinds or match.chaos > _DEFAULT_MESS
        if widened and (not _quoting(text) or _oddities(text[:_CJK_SCORED])):
            continue
        readings.append(match)
    return readings


#: Punctuation that quotes or brackets (Unicode categories Pi, Pf, Ps, Pe: ``„ “ ” « » ‚ ‘ ’``).
_QUOTE_CATEGORIES = frozenset({"Pi", "Pf", "Ps", "Pe"})
#: A run of punctuation (no letter, digit or space): the quotes around a word, ``“``, ``».``.
_PUNCTUATION_RUN = re.compile(r"[^\w\s]+")
#: Punctuation that stands inside words: an apostrophe (``l’hôpital``), a dash
#: (``Paris–Köln``).
_JOINERS = frozenset("’–—")


def _quoting(text: str) -> bool:
    """Whether every punctuation mark beyond ASCII of ``text`` stands at a word's edge, not
    inside one (its run of punctuation has a letter on one side at most: ``ŽO‹N``, ``Ş««H``
    have two), but for an apostrophe or a dash alone (:data:`_JOINERS`: ``l’hôpital``), and,
    where it opens a word (a letter after it), quotes or brackets (:data:`_QUOTE_CATEGORIES`:
    ``„GRÜN“``) or opens a Spanish question or exclamation (``¿Qué``): GBK ``時間`` read in
    windows-1252 is ``•rég``. Other punctuation closes a word or stands alone (``CAFÉ…``,
    ``jeudi. …``)."""
    for run in _PUNCTUATION_RUN.finditer(text):
        marks = [c for c in run.group() if not c.isascii()]
        before = text[run.start() - 1] if run.start() else " "
        after = text[run.end()] if run.end() < len(text) else " "
        if marks and before.isalpha() and after.isalpha():
            if run.group() in _JOINERS:
                continue
            return False
        opening = all(c in "¿¡" or unicodedata.category(c) in _QUOTE_CATEGORIES for c in marks)
        if after.isalpha() and not opening:
            return False
    return True


def _oddities(text: str) -> int:
    """How many non-ASCII characters of ``text`` read as no word's letter would: a symbol
    (Unicode category S*, or a number such as ``¹``) between two letters (``K÷ln``), or a
    capital right after a small letter (``MŘller``) — the marks of a wrong code page.
    Punctuation inside a word (``don’t``, ``l·l``) is no mark."""
    count = 0
    for i in range(1, len(text) - 1):
        char, before = text[i], text[i - 1]
        if char.isascii() or not before.isalpha():
            continue
        category = unicodedata.category(char)
        symbol = category[0] == "S" or category == "No"
        if (symbol and text[i + 1].isalpha()) or (char.isupper() and before.islower()):
            count += 1
    return count


#: The legacy code pages of Chinese, Japanese and Korean files (one per family: GB18030 reads
#: GBK and GB2312, cp932 Shift-JIS, cp949 EUC-KR), compared by :func:`_likeliest_cjk_reading`.
_CJK_CODE_PAGES = ("gb18030", "big5", "cp932", "euc_jp", "cp949")
#: Characters of CJK text by kind: Han ideographs (the unified blocks and the compatibility
#: ones), kana, Hangul syllables, Hangul compatibility jamo and halfwidth katakana.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff"
_HANGUL = "\uac00-\ud7a3"
_HALFWIDTH_KANA = "\uff61-\uff9f"
#: A Hangul syllable or halfwidth katakana next to a character of another CJK script, and a
#: lone Hangul jamo: what a misread code page makes, not what text is written with.
_MIXED = re.compile(
    f"(?<=[{_HAN}{_KANA}{_HALFWIDTH_KANA}])[{_HANGUL}]"
    f"|[{_HANGUL}](?=[{_HAN}{_KANA}{_HALFWIDTH_KANA}])"
    f"|(?<=[{_HAN}{_KANA}{_HANGUL}])[{_HALFWIDTH_KANA}]"
    f"|[{_HALFWIDTH_KANA}](?=[{_HAN}{_KANA}{_HANGUL}])"
    "|[\u3130-\u318f]"
)
_CJK_CHARS = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]")
#: Characters of a reading scored (:func:`_cjk_marks`, :func:`_common_share`, and
#: :func:`_oddities` in :func:`_guess_encoding`): its start, to bound the time spent.
_CJK_SCORED = 4096


def _likeliest_cjk_reading(sample: bytes, threshold: float = 0.2) -> tuple[float, str] | None:
    """``(share, codec)``: the codec name of charset-normalizer's likeliest reading of
    ``sample`` in one of :data:`_CJK_CODE_PAGES` and the share of its characters beyond
    ASCII (but spaces) that are common (:func:`_cjk_marks`), or ``None`` when none reads it
    cleanly: with a mess measure at most ``threshold`` (charset-normalizer's, 0 to 1). Its
    mess measure ("chaos") ties for short CJK text (``会议纪要`` reads cleanly in GBK, cp949
    and cp932) and its coherence is 0 below some hundred characters, so readings are ranked
    by :func:`_cjk_marks`: the fewest marks of a misreading, then the most common
    characters, then chaos."""
    from charset_normalizer import from_bytes

    ranked = sorted(
        (_cjk_marks(str(match)[:_CJK_SCORED]), match.chaos, match.encoding, str(match))
        for match in from_bytes(sample, cp_isolation=list(_CJK_CODE_PAGES), threshold=threshold)
    )
    if not ranked:
        return None
    (_, common), _, encoding, text = ranked[0]
    beyond = sum(1 for c in text[:_CJK_SCORED] if ord(c) > 127 and not c.isspace())
    return -common / max(beyond, 1), known_encoding(encoding) or encoding


def _cjk_marks(text: str) -> tuple[int, int]:
    """``(marks, -common)`` for a reading of CJK ``text``. Marks of a misread code page: a
    Hangul syllable or halfwidth katakana next to another CJK script, a lone Hangul jamo
    (``삔累셩狼``, ``ｻ瞑鮠ﾍﾒｪ``, ``베폽ㅞ枯쾨``), and a Hangul syllable outside KS X 1001's
    2,350 (the syllables EUC-KR encodes; Python's ``euc_kr`` codec spells the others as an
    8-byte jamo sequence): cp949 reads Shift-JIS kana as such (``궓`` for ``お``). Common
    characters: ideographs of charset-normalizer's ``COMMON_CJK_CHARACTERS`` (its list of
    frequent ones), kana, and Hangul syllables that are no mark."""
    from charset_normalizer.constant import COMMON_CJK_CHARACTERS

    mixed = {found.start() for found in _MIXED.finditer(text)}
    marks, common = len(mixed), 0
    for found in _CJK_CHARS.finditer(text):
        char = found.group()
        if found.start() in mixed:
            continue
        if "\uac00" <= char <= "\ud7a3":
            if len(char.encode("euc_kr")) == 2:
                common += 1
            else:
                marks += 1
        elif char in COMMON_CJK_CHARACTERS or "\u3040" <= char <= "\u30ff":
            common += 1
    return marks, -common


#: How much larger the share of common letters of a reading in a non-Latin alphabet must be
#: than that of common characters of the likeliest CJK reading for it to be taken: more than
#: half the text is common letters in the one where it is rare characters in the other.
_MARGIN = 0.5
#: A run of letters: a word, or a part of one between combining marks.
_WORD = re.compile(r"[^\W\d_]+")
#: Single-byte code pages of non-Latin alphabets: Cyrillic (windows-1251, KOI8-R, KOI8-U),
#: Greek (windows-1253, ISO-8859-7), Thai (windows-874), Hebrew (windows-1255) and Arabic
#: (windows-1256), compared by :func:`_likeliest_alphabet_reading`.
_ALPHABET_CODE_PAGES = (
    "cp1251",
    "koi8_r",
    "koi8_u",
    "cp1253",
    "iso8859_7",
    "cp874",
    "cp1255",
    "cp1256",
)


def _likeliest_alphabet_reading(sample: bytes) -> tuple[float, str] | None:
    """``(share, codec)`` for charset-normalizer's reading of ``sample`` in one of
    :data:`_ALPHABET_CODE_PAGES` whose letters beyond ASCII are most often common letters
    of a language of that code page (:func:`_common_share`), the fewest misread letters
    (:func:`_oddities`) first; ``None`` when none reads it cleanly or none holds such a
    letter."""
    from charset_normalizer import from_bytes

    ranked = sorted(
        (
            _oddities(text) + _case_breaks(text),
            -_common_share(text, match.encoding),
            -sum(c.isalpha() for c in text),
            rank,
            match.encoding,
        )
        for rank, match in enumerate(from_bytes(sample, cp_isolation=list(_ALPHABET_CODE_PAGES)))
        for text in [str(match)[:_CJK_SCORED]]
    )
    if not ranked or ranked[0][1] == 0:
        return None
    return -ranked[0][1], known_encoding(ranked[0][4]) or ranked[0][4]


def _common_share(text: str, encoding: str) -> float:
    """The share of the letters beyond ASCII of ``text`` that are among the most frequent
    letters (charset-normalizer's ``FREQUENCIES``) of one language of ``encoding``
    (charset-normalizer's ``encoding_languages``), the best such language; 0 when those
    letters are of more than one script (``unicodedata`` names: CYRILLIC, GREEK…)."""
    from charset_normalizer.cd import encoding_languages
    from charset_normalizer.constant import FREQUENCIES

    words = [w for w in _WORD.findall(text) if not w.isascii()]
    if len(_scripts("".join(words), beyond_ascii=False)) != 1:
        return 0.0
    letters = [c.lower() for c in "".join(words) if ord(c) > 127]
    shares = [
        sum(c in FREQUENCIES[language] for c in letters) / len(letters)
        for language in encoding_languages(encoding)
        if language in FREQUENCIES
    ]
    return max(shares, default=0.0)


def _scripts(text: str, *, beyond_ascii: bool = True) -> set[str]:
    """The scripts of the letters of ``text`` (only those beyond ASCII: ``beyond_ascii``): the
    first word of their Unicode names (``"LATIN"``, ``"CYRILLIC"``, ``"CJK"``…)."""
    return {
        unicodedata.name(c, "?").split()[0]
        for c in text
        if (ord(c) > 127 or not beyond_ascii) and unicodedata.category(c)[0] == "L"
    }


def _case_breaks(text: str) -> int:
    """How many capital letters of ``text`` follow a small letter (``ЕллзнйкЬ``)."""
    return sum(1 for a, b in itertools.pairwise(text) if a.islower() and b.isupper())
