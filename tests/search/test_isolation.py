"""Two users never see each other's private documents, under any filter (property test over
HTTP with real verification against the simulator's ground truth)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from search_support import FILES, Api
from support import check_hints_leak_nothing, spellings_named

USERS = ("alice", "bob", "carol")
LEAVES = st.sampled_from(
    [
        {"field": "owner", "op": "eq", "value": "alice"},
        {"field": "owner", "op": "ne", "value": "bob"},
        {"field": "owner", "op": "in", "value": ["alice", "bob", "carol"]},
        {"field": "path_prefix", "op": "eq", "value": "/Private"},
        {"field": "path_prefix", "op": "in", "value": ["/", "/Projects"]},
        {"field": "path", "op": "eq", "value": "/Private/diary.md"},
        {"field": "path", "op": "exists", "value": False},
        {"field": "doc_type", "op": "in", "value": ["note", "file"]},
        {"field": "tags", "op": "exists", "value": False},
        {"field": "modified_at", "op": "gte", "value": 0},
        {"field": "title", "op": "contains", "value": "diary"},
        {"field": "title", "op": "contains", "value": "secret"},
        {"field": "category", "op": "exists", "value": False},
        # alice's category in another case, bob's, and a list of both: spelling errors and
        # hints name only the caller's own spelling
        {"field": "category", "op": "eq", "value": "WORK"},
        {"field": "category", "op": "eq", "value": "home"},
        {"field": "category", "op": "in", "value": ["home", "Work"]},
        {"field": "path", "op": "in", "value": ["/Private/bob-secret.md", "/Projects/budget.txt"]},
        {"field": "doc_id", "op": "nin", "value": ["1"]},
    ]
)
TREES = st.recursive(
    LEAVES,
    lambda sub: st.one_of(
        st.lists(sub, min_size=1, max_size=3).map(lambda c: {"and": c}),
        st.lists(sub, min_size=1, max_size=3).map(lambda c: {"or": c}),
        sub.map(lambda c: {"not": c}),
    ),
    max_leaves=5,
)
PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "filter": TREES,
        "path_prefixes": st.lists(
            st.sampled_from(["/", "/Private", "/Projects", "/Lighthouse"]), min_size=1, max_size=2
        ),
        "doc_types": st.lists(st.sampled_from(["note", "file"]), min_size=1, max_size=2),
        "fusion": st.sampled_from(["rrf", "dbsf"]),
        "score_threshold": st.sampled_from([0.0, 0.5]),
    },
)  # fmt: skip


@settings(
    max_examples=36, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    user=st.sampled_from(USERS),
    query=st.sampled_from(["lighthouse", "secret diary", "garden tulips", "lens key keeper"]),
    params=PARAMS,
)
# alice's category in another case beside a branch of hers that selects nothing either: not
# an error (the other branch may match), her spelling in a hint; alice's diary named to bob as
# a path nobody has
@example(
    user="alice",
    query="lighthouse",
    params={"filter": {"or": [
        {"field": "category", "op": "eq", "value": "WORK"},
        {"field": "title", "op": "contains", "value": "secret"}]}},
)  # fmt: skip
@example(
    user="bob",
    query="lighthouse",
    params={"filter": {"field": "path", "op": "eq", "value": "/Private/diary.md"}},
)
def test_nobody_sees_another_users_private_documents(
    ro_api: Api, user: str, query: str, params: dict[str, Any]
) -> None:
    visible = {str(fid) for fid in ro_api.sim.visible_files(user)}
    # the tags and categories of the documents the caller can read (ground truth)
    held = {
        value
        for owner, path, _text, _days, tags, category in FILES
        if str(ro_api.sim.file_id(owner, path)) in visible
        for value in [*tags, *([category] if category else [])]
    }
    body = {"query": query, "limit": 50, **params}
    response = ro_api.post(user, body)
    if response.status_code == 400:
        # only a tag or category that must hold, spelt otherwise than the caller's own (a
        # leaf reached through `and` alone): one under an `or` may be matched by its sibling
        problem = response.get_json()
        assert problem["code"] == "invalid_value", problem
        assert MUST_HOLD.fullmatch(problem["field"]), (body, problem)
        named = spellings_named(problem["detail"])
        assert named and set(named) <= held, (body, problem, held)
        return
    assert response.status_code == 200, response.get_json()
    for result in response.get_json()["results"]:
        assert result["doc_id"] in visible, (user, result)
    # a hint names a folder, path, owner or category only others' documents hold as it names
    # one nobody's, and a spelling only as the caller's documents hold it
    check_hints_leak_nothing(
        body, response.get_json(), lambda again: ro_api.post(user, again).get_json(), held
    )


MUST_HOLD = re.compile(r"(filter(\.and\[\d+\])*\.value|category|tags)(\[\d+\])?")
"""The path of a value that must hold for the search to match (``filter.and[1].value[0]``,
``category``): not under an ``or`` or a ``not``."""
