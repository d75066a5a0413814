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
