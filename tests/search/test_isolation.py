"""Two users never see each other's private documents, under any filter (property test over
HTTP with real verification against the simulator's ground truth)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search_support import Api
from support import check_hints_leak_nothing

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
def test_nobody_sees_another_users_private_documents(
    ro_api: Api, user: str, query: str, params: dict[str, Any]
) -> None:
    visible = {str(fid) for fid in ro_api.sim.visible_files(user)}
    body = {"query": query, "limit": 50, **params}
    response = ro_api.post(user, body)
    assert response.status_code == 200, response.get_json()
    for result in response.get_json()["results"]:
        assert result["doc_id"] in visible, (user, result)
    # a hint names a folder or owner only others' documents hold as it names one nobody's
    check_hints_leak_nothing(
        body, response.get_json(), lambda again: ro_api.post(user, again).get_json()
    )
