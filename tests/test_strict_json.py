"""``ncindex.strict_json.loads``: RFC 8259 JSON, without Python's extensions."""

from __future__ import annotations

import pytest

from ncindex import strict_json


@pytest.mark.parametrize(
    "text",
    [
        '{"a": NaN}',
        "[Infinity]",
        "-Infinity",
        "1e400",
        '{"a": 1, "a": 2}',
        '{"a": {"b": 1, "b": 1}}',
        '[{"x": 1}, {"y": 2, "y": 3}]',
    ],
)
def test_what_python_would_accept_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        strict_json.loads(text)


def test_plain_json_reads_as_usual() -> None:
    assert strict_json.loads(b'{"a": [1, 2.5, -3e10, "x", null, true], "b": {"a": 1}}') == {
        "a": [1, 2.5, -3e10, "x", None, True],
        "b": {"a": 1},
    }


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_bytes_in_another_unicode_encoding_are_refused(codec: str) -> None:
    """Python's parser guesses UTF-16/32 from a body's first bytes; RFC 8259 §8.1 says UTF-8
    (the receiver, the search API, RCP and the MCP gate answer 400 for it). Without a byte
    order mark the bytes are UTF-8 (NULs before each character): not JSON either."""
    with pytest.raises(ValueError):
        strict_json.loads('{"query": "x"}'.encode(codec))


def test_a_utf8_byte_order_mark_is_ignored() -> None:
    """RFC 8259 §8.1: a parser MAY ignore a byte order mark rather than treat it as an error."""
    assert strict_json.loads(b'\xef\xbb\xbf{"a": "\xc3\xa5"}') == {"a": "å"}


def test_lone_surrogate_at_names_the_first_string_holding_one() -> None:
    """Values and keys, in document order; a key named with its escape written out."""
    found = strict_json.lone_surrogate_at
    assert (
        found(strict_json.loads(b'{"a": [1, "ok", {"b": "x\\ud800"}], "c": "\\udc00"}')) == "a[2].b"
    )
    assert found(strict_json.loads(b'{"a": 1, "k\\udfff": {"z": "\\ud800"}}')) == "k\\udfff"
    assert found(strict_json.loads(b'{"a": ["\\ud83d\\ude00", {"b": "\\u00e5"}]}')) is None
    assert found("\ud800", "params") == "params"
