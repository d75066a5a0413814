"""Filtered search end to end on the real stack: simulator webhooks → receiver → Redis →
Celery worker → fastembed → Qdrant Edge → search API with verify-on-read."""

from __future__ import annotations

from support import PASSWORDS, Stack, wait_until

T0 = 1_767_225_600  # 2026-01-01
DOCS = {
    "/Projects/Lighthouse/plan.md": ("Lighthouse plan: polish the lens, replace the brass.", 0),
    "/Projects/Lighthouse-old/plan.md": ("Old lighthouse plan: the lens was polished in 1990.", 40),
    "/Notes/Lighthouse.md": ("# Lighthouse\n\nRemember the foghorn oil and the lens cloth.", 80),
}


def keys_of(body: dict) -> list[str]:
    return [f"{r['doc_type']}:{r['doc_id']}" for r in body["results"]]


def test_filters_and_eviction_through_the_stack(stack: Stack) -> None:
    ids = {}
    for path, (text, days) in DOCS.items():
        ids[path] = stack.sim.put_file("alice", path, text.encode(), mtime=T0 + 86_400 * days)
    stack.sim.flush_deliveries(timeout=5)
    plan, old = (
        f"file:{ids['/Projects/Lighthouse/plan.md']}",
        f"file:{ids['/Projects/Lighthouse-old/plan.md']}",
    )
    note = f"note:{ids['/Notes/Lighthouse.md']}"
    wait_until(lambda: all(stack.points(k) for k in (plan, old, note)), 30)

    query = "lighthouse lens"
    assert set(keys_of(stack.search_as("alice", query))) == {plan, old, note}
    assert keys_of(stack.search_as("alice", query, path_prefixes=["/Projects/Lighthouse"])) == [
        plan
    ]
    assert keys_of(stack.search_as("alice", query, doc_types=["note"])) == [note]
    assert set(keys_of(stack.search_as("alice", query, modified_after="2026-02-01"))) == {old, note}
    before_feb = {"field": "modified_at", "op": "lt", "value": "2026-02-01T00:00:00Z"}
    tree = {"and": [{"field": "path_prefix", "op": "eq", "value": "/Projects"}, before_feb]}
    assert keys_of(stack.search_as("alice", query, filter=tree)) == [plan]
    assert stack.search_as("bob", query)["results"] == []

    # The delete's webhooks are lost: verify-on-read drops the file, its re-check evicts it.
    stack.sim.drop_rate = 1.0
    stack.sim.delete("alice", "/Projects/Lighthouse/plan.md")
    body = stack.search_as("alice", query, path_prefixes=["/Projects"])
    assert plan not in keys_of(body) and old in keys_of(body)
    assert body["verification"]["dropped"] == 1
    wait_until(lambda: not stack.points(plan), 15)
    assert plan not in keys_of(stack.search_as("alice", query))


def test_unshared_document_is_never_returned_and_loses_the_user(stack: Stack) -> None:
    from ncindex.ingest.queueing import celery_app

    file_id = stack.sim.put_file(
        "alice", "/Projects/Lighthouse/plan.md", DOCS["/Projects/Lighthouse/plan.md"][0]
    )
    stack.sim.flush_deliveries(timeout=5)
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 30)
    stack.sim.share("alice", "/Projects/Lighthouse", "bob")  # no event: a scan finds shares
    celery_app(stack.settings).send_task(
        "ncindex.index_node", kwargs={"user": "bob", "file_id": file_id}, queue="index"
    )
    wait_until(lambda: "user:bob" in stack.points(key)[0].payload["acl"], 15)
    found = stack.found("bob", "lighthouse lens", key, path_prefixes=["/Lighthouse"])
    assert found and found["path"] == "/Lighthouse/plan.md"

    stack.sim.unshare("alice", "/Projects/Lighthouse", "bob")
    body = stack.search_as("bob", "lighthouse lens")
    assert key not in keys_of(body) and body["verification"]["dropped"] == 1
    wait_until(lambda: "user:bob" not in stack.points(key)[0].payload["acl"], 15)
    assert stack.search_as("bob", "lighthouse lens")["verification"]["checked"] == 0
    assert stack.found("alice", "lighthouse lens", key)  # alice keeps it


def test_a_view_only_share_never_shows_its_text_to_the_sharee(stack: Stack) -> None:
    from ncindex.ingest.queueing import celery_app

    file_id = stack.sim.put_file(
        "alice", "/Projects/Lighthouse/plan.md", DOCS["/Projects/Lighthouse/plan.md"][0]
    )
    stack.sim.flush_deliveries(timeout=5)
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 30)
    stack.sim.share("alice", "/Projects/Lighthouse", "bob")
    celery_app(stack.settings).send_task(
        "ncindex.index_node", kwargs={"user": "bob", "file_id": file_id}, queue="index"
    )
    wait_until(lambda: "user:bob" in stack.points(key)[0].payload["acl"], 15)
    assert stack.found("bob", "lighthouse lens", key)

    # the share made view-only (no event, no new etag): Nextcloud still lists the file to bob
    # with G, and refuses him its bytes (ViewOnlyPlugin: 403), so its text is not his to read
    view_only = [{"scope": "permissions", "key": "download", "value": False}]
    stack.sim.share("alice", "/Projects/Lighthouse", "bob", attributes=view_only)
    body = stack.search_as("bob", "lighthouse lens")
    assert key not in keys_of(body) and body["verification"]["dropped"] == 1
    wait_until(lambda: "user:bob" not in stack.points(key)[0].payload["acl"], 15)
    assert stack.found("alice", "lighthouse lens", key)  # the owner keeps it


def test_a_member_leaving_a_group_folder_leaves_the_others_its_files(stack: Stack) -> None:
    from ncindex.ingest.queueing import celery_app

    stack.sim.group_folder("Team", ["alice", "bob"])
    file_id = stack.sim.put_file("alice", "/Team/plan.md", DOCS["/Projects/Lighthouse/plan.md"][0])
    stack.sim.flush_deliveries(timeout=5)
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 30)
    celery_app(stack.settings).send_task(
        "ncindex.index_node", kwargs={"user": "bob", "file_id": file_id}, queue="index"
    )
    wait_until(lambda: "user:bob" in stack.points(key)[0].payload["acl"], 15)

    # alice leaves the group (no event): oc:owner-id named her as she looked
    # (GroupFolderStorage::getOwner), but the file was never hers alone
    stack.sim.group_folder("Team", ["bob"])
    body = stack.search_as("alice", "lighthouse lens")
    assert key not in keys_of(body) and body["verification"]["dropped"] == 1
    wait_until(lambda: not any("user:alice" in p.payload["acl"] for p in stack.points(key)), 15)
    assert stack.points(key) and stack.found("bob", "lighthouse lens", key)


def test_documents_an_access_rule_blocks_are_dropped_and_leave_the_index(stack: Stack) -> None:
    ids = {}
    for path in ("/Projects/Lighthouse/plan.md", "/Notes/Lighthouse.md"):
        ids[path] = stack.sim.put_file("alice", path, DOCS[path][0].encode())
    stack.sim.flush_deliveries(timeout=5)
    keys = [f"file:{ids['/Projects/Lighthouse/plan.md']}", f"note:{ids['/Notes/Lighthouse.md']}"]
    wait_until(lambda: all(stack.points(k) for k in keys), 30)
    assert all(stack.found("alice", "lighthouse lens", k) for k in keys)
    # an admin's files_accesscontrol rule: no event, no new etag; Nextcloud still lists the
    # files (without read permission), refuses the file's bytes (403) and fails the note's
    # Notes API read (500 naming the ForbiddenException)
    for path in ids:
        stack.sim.block_access("alice", path)
    body = stack.search_as("alice", "lighthouse lens")
    assert not set(keys) & set(keys_of(body)) and body["verification"]["dropped"] == 2
    assert body["verification"]["errors"] == 0  # refusals, not outages
    for key in keys:
        doc_type, doc_id = key.split(":")
        context = stack.search.get(
            f"/v1/documents/{doc_type}/{doc_id}/context", auth=("alice", PASSWORDS["alice"])
        )
        assert context.status_code == 404
    # the drops' re-checks removed alice's access
    wait_until(lambda: not any(stack.points(k) for k in keys), 15)


def test_results_the_index_rules_exclude_now_are_dropped_as_ineligible(stack: Stack) -> None:
    stack.settings.index_required_tags = ["searchable"]
    stack.settings.index_excluded_tags = ["secret"]
    stack.settings.index_exclude_globs = ["/Archive/**", "/Notes/Old/**"]
    searchable = stack.sim.create_tag("searchable")
    secret = stack.sim.create_tag("secret")
    paths = {
        "untag": "/Projects/Lighthouse/plan.md",
        "secret": "/Projects/Lighthouse-old/plan.md",
        "archive": "/Projects/Lighthouse/lens.md",
        "note": "/Notes/Lighthouse.md",
        "moved_note": "/Notes/Lighthouse lens.md",
        "kept": "/Projects/keep.md",
    }
    ids = {}
    for name, path in paths.items():
        ids[name] = stack.sim.put_file("alice", path, b"Lighthouse plan: polish the lens.")
        stack.sim.assign_tag("alice", path, searchable)
    stack.sim.flush_deliveries(timeout=5)
    keys = {n: f"{'note' if 'note' in n else 'file'}:{i}" for n, i in ids.items()}
    wait_until(lambda: all(stack.points(k) for k in keys.values()), 30)
    assert set(keys.values()) <= set(keys_of(stack.search_as("alice", "lighthouse lens")))
    # every webhook lost: tag changes and moves change no etag the search could see
    stack.sim.drop_rate = 1.0
    stack.sim.unassign_tag("alice", paths["untag"], searchable)
    stack.sim.unassign_tag("alice", paths["note"], searchable)
    stack.sim.assign_tag("alice", paths["secret"], secret)
    stack.sim.move("alice", paths["archive"], "/Archive/lens.md")
    stack.sim.move("alice", paths["moved_note"], "/Notes/Old/Lighthouse lens.md")  # a category
    body = stack.search_as("alice", "lighthouse lens")
    gone = {keys[n] for n in ("untag", "note", "secret", "archive", "moved_note")}
    assert not gone & set(keys_of(body)) and keys["kept"] in keys_of(body)
    verification = body["verification"]
    assert verification["ineligible"] == 5 and verification["dropped"] == 0, verification
    assert verification["kept"] == verification["checked"] - 5
    doc_type, doc_id = keys["secret"].split(":")
    context = stack.search.get(
        f"/v1/documents/{doc_type}/{doc_id}/context", auth=("alice", PASSWORDS["alice"])
    )
    assert context.status_code == 404
    # the drops' re-checks evicted them (ineligible for their only holder)
    wait_until(lambda: not any(stack.points(k) for k in gone), 15)
    assert stack.points(keys["kept"])


def test_a_result_moved_out_of_the_asked_folders_is_not_returned(stack: Stack) -> None:
    """The engine judged ``path_prefixes`` on the indexed path; a file moved since (its webhook
    lost) is verified at its new path, which the filter's path leaves exclude: passed over,
    and its re-check brings the index up to date. One moved within the folders stays."""
    out = stack.sim.put_file("alice", "/Projects/Reef/knots.md", b"Reef knot tying notes.")
    within = stack.sim.put_file("alice", "/Projects/Reef/bends.md", b"Reef knot and bends.")
    stack.sim.flush_deliveries(timeout=5)
    keys = [f"file:{out}", f"file:{within}"]
    wait_until(lambda: all(stack.points(k) for k in keys), 30)
    asked = {"path_prefixes": ["/Projects"]}
    assert set(keys) <= set(keys_of(stack.search_as("alice", "reef knot", **asked)))
    stack.settle(30)  # no indexing under way: a run still going would see the moves itself
    stack.sim.drop_rate = 1.0
    stack.sim.move("alice", "/Projects/Reef/knots.md", "/Archive/knots.md")
    stack.sim.move("alice", "/Projects/Reef/bends.md", "/Projects/Old/bends.md")
    body = stack.search_as("alice", "reef knot", **asked)
    assert f"file:{out}" not in keys_of(body)
    moved = [r for r in body["results"] if f"file:{r['doc_id']}" == f"file:{within}"]
    assert [r["path"] for r in moved] == ["/Projects/Old/bends.md"]
    # kept at its new path, it is re-checked too: the index learns that path
    wait_until(
        lambda: (
            stack.points(f"file:{within}")[0].payload["paths"]["alice"] == "/Projects/Old/bends.md"
        ),
        15,
    )
    # unfiltered, the moved-out file is found at its new path; the re-check re-pathed it
    anywhere = stack.found("alice", "reef knot", f"file:{out}")
    assert anywhere is not None and anywhere["path"] == "/Archive/knots.md"
    wait_until(
        lambda: stack.points(f"file:{out}")[0].payload["paths"]["alice"] == "/Archive/knots.md",
        15,
    )
    again = stack.search_as("alice", "reef knot", path_prefixes=["/Archive"])
    assert f"file:{out}" in keys_of(again)


def test_a_result_found_moved_and_kept_is_re_checked_too(stack: Stack) -> None:
    """A file moved within the asked folders (its webhook lost) is shown at its new path, and
    its re-check brings the index's path up to date, as for one passed over: the path facet
    and the next search's path filters read the index."""
    moved = stack.sim.put_file("alice", "/Projects/Reef/splices.md", b"Reef knot splices.")
    stack.sim.flush_deliveries(timeout=5)
    key = f"file:{moved}"
    wait_until(lambda: stack.points(key), 30)
    stack.wait_idle()
    stack.sim.drop_rate = 1.0
    stack.sim.move("alice", "/Projects/Reef/splices.md", "/Projects/Old/splices.md")
    shown = stack.found("alice", "reef knot splices", key, path_prefixes=["/Projects"])
    assert shown is not None and shown["path"] == "/Projects/Old/splices.md"
    wait_until(
        lambda: stack.points(key)[0].payload["paths"]["alice"] == "/Projects/Old/splices.md", 15
    )


def test_a_card_moved_out_of_the_asked_stack_or_board_is_not_returned(stack: Stack) -> None:
    """The engine judged ``stack_id`` and ``board_id`` on the card as it was indexed; a card
    moved since (no card events: Deck before 1.18, or ``deck_webhooks`` off) is found by its
    check where it is now (``Checked.moved_to``). One moved out of the asked stack or board is
    passed over, and its re-check brings the index up to date; one moved within the asked
    board stays."""
    from ncindex.ingest.queueing import celery_app

    sim = stack.sim
    harbour, fleet = (
        sim.deck_create_board("alice", "Harbour"),
        sim.deck_create_board("alice", "Fleet"),
    )
    todo, done = (sim.deck_create_stack("alice", harbour, t) for t in ("To do", "Done"))
    inbox = sim.deck_create_stack("alice", fleet, "Inbox")
    within = sim.deck_create_card("alice", todo, "Tar the ketch", "Tar the hull of the ketch.")
    out = sim.deck_create_card("alice", todo, "Tar the dinghy", "Tar the hull of the dinghy.")
    created = sim.tree.now()
    keys = [f"deck_card:{within}", f"deck_card:{out}"]
    for card in (within, out):
        celery_app(stack.settings).send_task(
            "ncindex.index_document",
            kwargs={"user": "alice", "doc_type": "deck_card", "doc_id": card},
            queue="index",
        )
    wait_until(lambda: all(stack.points(k) for k in keys), 30)
    stack.wait_idle()
    query = "tar the hull"
    in_todo = {"filter": {"field": "stack_id", "op": "eq", "value": str(todo)}}
    in_harbour = {"filter": {"field": "board_id", "op": "eq", "value": str(harbour)}}
    body = stack.search_as("alice", query, **in_todo)
    assert set(keys_of(body)) == set(keys)
    # each result names the board and stack it is on (their titles from its check)
    assert [(r["board_title"], r["stack_title"]) for r in body["results"]] == [
        ("Harbour", "To do")
    ] * 2
    wait_until(lambda: sim.tree.now() > created, 5)  # a move changes the card's lastModified
    sim.deck_update_card("alice", within, stack_id=done)  # within the board
    sim.deck_update_card("alice", out, stack_id=inbox)  # to another board
    body = stack.search_as("alice", query, **in_todo)
    assert keys_of(body) == [], body["results"]
    body = stack.search_as("alice", query, **in_harbour)
    assert keys_of(body) == [f"deck_card:{within}"]
    assert (body["results"][0]["board_title"], body["results"][0]["stack_title"]) == (
        "Harbour",
        "Done",
    )
    # the re-checks indexed both where they are now
    wait_until(lambda: stack.points(keys[1])[0].payload["board_id"] == str(fleet), 20)
    wait_until(lambda: stack.points(keys[0])[0].payload["stack_id"] == str(done), 20)
    in_inbox = {"filter": {"field": "stack_id", "op": "eq", "value": str(inbox)}}
    assert keys_of(stack.search_as("alice", query, **in_inbox)) == [f"deck_card:{out}"]


def test_a_card_found_moved_where_the_filter_still_holds_is_re_indexed(stack: Stack) -> None:
    """A card moved to another board since it was indexed (no card events) and found by a
    search whose filter it passes where it is now is shown, and re-checked all the same: the
    index learns its board, so a search on that board — which the engine judges on the
    indexed board, and would miss it on — finds it next."""
    from ncindex.ingest.queueing import celery_app

    sim = stack.sim
    harbour, fleet = (sim.deck_create_board("alice", t) for t in ("Harbour", "Fleet"))
    todo = sim.deck_create_stack("alice", harbour, "To do")
    inbox = sim.deck_create_stack("alice", fleet, "Inbox")
    card = sim.deck_create_card("alice", todo, "Scrape the keel", "Scrape the keel of the yawl.")
    created = sim.tree.now()
    key = f"deck_card:{card}"
    celery_app(stack.settings).send_task(
        "ncindex.index_document",
        kwargs={"user": "alice", "doc_type": "deck_card", "doc_id": card},
        queue="index",
    )
    wait_until(lambda: stack.points(key), 30)
    stack.wait_idle()
    query = "scrape the keel"
    in_fleet = {"filter": {"field": "board_id", "op": "eq", "value": str(fleet)}}
    wait_until(lambda: sim.tree.now() > created, 5)  # a move changes the card's lastModified
    sim.deck_update_card("alice", card, stack_id=inbox)
    assert keys_of(stack.search_as("alice", query, **in_fleet)) == []  # indexed in Harbour
    body = stack.search_as("alice", query, doc_types=["deck_card"])
    assert keys_of(body) == [key]
    assert body["verification"]["kept"] == 1
    wait_until(lambda: stack.points(key)[0].payload["board_id"] == str(fleet), 20)
    assert stack.points(key)[0].payload["stack_id"] == str(inbox)
    assert keys_of(stack.search_as("alice", query, **in_fleet)) == [key]
