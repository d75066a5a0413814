"""Queries at the edges of the text path: only stop words, only emoji or punctuation, control
characters, one very long word, a thousand characters of one letter, mixed scripts. Each is
answered 200 (possibly empty, possibly ``degraded``) or 400 naming ``query``, never a 5xx."""

from __future__ import annotations

import pytest
from rel_support import snippet_is_safe

from support import PASSWORDS, Stack

QUERIES = [
    "the",
    "the of and a to",
    "😀",
    "🦀🦀🦀 🔥",
    "!!!???...",
    "\x00",
    "\x00lighthouse\x00",
    "\u200b\u200b",
    "a" * 1000,
    "lighthouse" * 100,
    "маяк 灯台 منارة lighthouse",
    "<>&\"'",
    "\ud7ff\ue000\uffff",
    "-" * 999,
    " lighthouse ",
    "\n\t\r",
]


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
@pytest.mark.parametrize("fusion", ["rrf", "dbsf"])
def test_edge_queries_never_fail(corpus_stack: Stack, query: str, fusion: str) -> None:
    response = corpus_stack.search.post(
        "/v1/search",
        json={"query": query, "fusion": fusion, "limit": 20},
        auth=("alice", PASSWORDS["alice"]),
    )
    assert response.status_code in (200, 400), (query, response.get_json())
    answer = response.get_json()
    if response.status_code == 400:
        assert answer["field"] == "query", answer
        return
    for result in answer["results"]:
        assert snippet_is_safe(result["snippet"]), result["snippet"]
