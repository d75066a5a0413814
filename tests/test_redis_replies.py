"""``ncindex.redis_replies.as_text``: a Redis reply, bytes or str, as text."""

from __future__ import annotations

import pytest

from ncindex.redis_replies import as_text


def test_bytes_are_decoded_as_utf8_and_str_is_kept() -> None:
    assert as_text("Grüße".encode()) == "Grüße"
    assert as_text("Grüße") == "Grüße"


def test_bytes_that_are_not_utf8_raise_unless_replaced() -> None:
    with pytest.raises(UnicodeDecodeError):
        as_text(b"node:\xff")
    assert as_text(b"node:\xff", "replace") == "node:\ufffd"
