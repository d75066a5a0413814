"""Idempotency and economy: a save embeds once, unchanged documents are not embedded again,
an edit re-embeds only the chunks it touched."""

from __future__ import annotations

import httpx
from pipeline_support import events_for, post_envelope

from support import PASSWORDS, Stack, wait_until

WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kelp",
    "lagoon",
    "meadow",
    "nectar",
    "orchid",
    "prairie",
    "quartz",
    "river",
    "sierra",
    "tundra",
    "umber",
    "valley",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]


def long_markdown(sections: int = 20, marker: str = "") -> str:
    """``sections`` sections of ~150 distinct-ish words each (about one chunk each)."""
    out = []
    for i in range(sections):
        words = " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{i}" for j in range(130))
        extra = f" {marker}" if marker and i == 10 else ""
        out.append(f"## Section {i}\n\n{words}{extra}.")
    return "\n\n".join(out)


def test_one_save_with_four_events_embeds_once(stack: Stack) -> None:
    text = "# Kiln\n\nThe pottery kiln reaches twelve hundred degrees on the third firing."
    before = stack.services.embedder.dense_embedded
    file_id = stack.sim.put_file("alice", "/Notes/Kiln.md", text.encode())
    stack.sim.flush_deliveries(timeout=5)
    written = events_for(stack, file_id, "NodeWrittenEvent")
    created = events_for(stack, file_id, "NodeCreatedEvent")
    assert len(written) == 1 and len(created) == 1
    for envelope in (written[0], created[0]):  # two late duplicates: four events in all
        assert post_envelope(stack, envelope).status_code == 202
    points = wait_until(lambda: stack.points(f"note:{file_id}"), 15)
    stack.wait_idle(15)
    assert stack.services.embedder.dense_embedded - before == len(points) == 1


def test_unchanged_document_is_neither_downloaded_nor_embedded(stack: Stack) -> None:
    data = b"Sourdough starter must be fed twice a day with rye flour."
    file_id = stack.sim.put_file("alice", "/Kitchen/bread.txt", data)
    key = f"file:{file_id}"
    first = wait_until(lambda: stack.points(key), 15)[0].payload
    stack.wait_idle(15)
    embedded = stack.services.embedder.dense_embedded
    stack.sim.reset_request_counts()
    # the same event again: same etag ⇒ no download
    assert post_envelope(stack, events_for(stack, file_id, "NodeWrittenEvent")[0]).status_code
    wait_until(lambda: stack.sim.request_count("dav-search") >= 1, 15)
    stack.wait_idle(15)
    assert stack.sim.request_count("webdav", "GET") == 0
    # the same bytes saved again: new etag ⇒ downloaded, same content hash ⇒ not embedded
    stack.sim.put_file("alice", "/Kitchen/bread.txt", data)
    stack.sim.flush_deliveries(timeout=5)
    payload = wait_until(
        lambda: (p := stack.points(key)[0].payload)["etag"] != first["etag"] and p, 15
    )
    stack.wait_idle(15)
    assert stack.sim.request_count("webdav", "GET") >= 1
    assert payload["content_hash"] == first["content_hash"]
    assert stack.services.embedder.dense_embedded == embedded


def test_editing_one_section_of_a_20_chunk_document_embeds_at_most_two(stack: Stack) -> None:
    file_id = stack.sim.put_file("alice", "/Docs/atlas.md", long_markdown().encode())
    key = f"file:{file_id}"
    points = wait_until(lambda: stack.points(key), 30)
    assert len(points) >= 20
    stack.wait_idle(15)
    before = stack.services.embedder.dense_embedded
    old_hash = points[0].payload["content_hash"]
    stack.sim.put_file("alice", "/Docs/atlas.md", long_markdown(marker="edited").encode())
    stack.sim.flush_deliveries(timeout=5)
    # the new version is written beside the old one, then the old one is deleted
    wait_until(
        lambda: (p := stack.points(key)) and all(x.payload["content_hash"] != old_hash for x in p),
        30,
    )
    stack.wait_idle(15)
    new = stack.points(key)
    assert len({p.payload["content_hash"] for p in new}) == 1
    assert [p.payload["chunk_index"] for p in new] == list(range(len(new)))
    assert 1 <= stack.services.embedder.dense_embedded - before <= 2


def test_a_touch_that_changes_no_text_is_not_embedded_again(stack: Stack) -> None:
    """A touched file (``NodeTouchedEvent``: a client setting its mtime, Notes saving
    ``modified``, a version restored) has a new etag: its task downloads it once, finds the
    same text and updates the metadata alone; the same touch delivered again costs the
    look-up (same etag: no download)."""
    data = b"Beeswax candles burn longer than paraffin ones in a cold room."
    file_id = stack.sim.put_file("alice", "/Home/candles.txt", data, mtime=1_767_000_000)
    key = f"file:{file_id}"
    first = wait_until(lambda: stack.points(key), 15)[0].payload
    stack.wait_idle(15)
    embedded = stack.services.embedder.dense_embedded
    stack.sim.reset_request_counts()
    stack.sim.touch("alice", "/Home/candles.txt", 1_767_000_500, event=True)
    stack.sim.flush_deliveries(timeout=5)
    payload = wait_until(
        lambda: (p := stack.points(key)[0].payload)["modified_at"] == 1_767_000_500 and p, 15
    )
    stack.wait_idle(15)
    assert payload["etag"] != first["etag"]
    assert payload["content_hash"] == first["content_hash"]
    assert stack.sim.request_count("webdav", "GET") == 1
    assert stack.services.embedder.dense_embedded == embedded
    stack.sim.reset_request_counts()
    (touched,) = events_for(stack, file_id, "NodeTouchedEvent")
    assert post_envelope(stack, touched).status_code == 202
    wait_until(lambda: stack.sim.request_count("dav-search") >= 1, 15)
    stack.wait_idle(15)
    assert stack.sim.request_count("webdav", "GET") == 0
    assert stack.services.embedder.dense_embedded == embedded


def test_an_upload_carrying_its_mtime_costs_what_one_without_it_costs(stack: Stack) -> None:
    """An upload with ``X-OC-MTime`` (as sync clients send it) fires ``NodeTouchedEvent``
    besides ``NodeCreatedEvent`` and ``NodeWrittenEvent`` (nextcloud/server ``apps/dav/lib/
    Connector/Sabre/File.php`` ``put`` → ``View::touch``): the three re-read the file under one
    debounce key (and are gathered into one batch), so it costs what an upload without the
    header costs — one look-up, one download."""

    def upload(name: str, headers: dict[str, str]) -> tuple[int, dict[tuple[str, str], int]]:
        stack.sim.reset_request_counts()
        uploaded = httpx.put(
            f"{stack.settings.nextcloud_url}/remote.php/dav/files/alice/{name}",
            content=f"{name}: a wood-fired kiln needs three days to cool.".encode(),
            headers=headers,
            auth=("alice", PASSWORDS["alice"]),
        )
        assert uploaded.status_code == 201
        file_id = stack.sim.file_id("alice", f"/{name}")
        assert file_id is not None
        stack.sim.flush_deliveries(timeout=5)
        wait_until(lambda: stack.points(f"file:{file_id}"), 15)
        stack.wait_idle(15)
        return file_id, stack.sim.requests

    upload("first.txt", {})  # reads what the worker caches (Notes settings, capabilities)
    _, plain = upload("plain.txt", {})
    file_id, stamped = upload("kiln.txt", {"X-OC-MTime": "1767000000"})
    assert events_for(stack, file_id, "NodeTouchedEvent")
    assert stack.points(f"file:{file_id}")[0].payload["modified_at"] == 1_767_000_000
    assert stamped == plain
    assert stamped[("GET", "webdav")] == 1


def test_a_proppatch_of_lastmodified_is_a_touch_that_embeds_nothing(stack: Stack) -> None:
    """A client setting a file's mtime with ``PROPPATCH {DAV:}lastmodified`` (nextcloud/server
    ``apps/dav/lib/Connector/Sabre/FilesPlugin.php`` ``handleUpdateProperties`` →
    ``Node::touch`` → ``View::touch``) sends ``NodeTouchedEvent``: ncindex re-reads the file,
    finds the same text, takes the new mtime and embeds nothing."""
    data = b"Copper pans heat evenly but need relining with tin every few years."
    file_id = stack.sim.put_file("alice", "/Home/pans.txt", data, mtime=1_767_000_000)
    key = f"file:{file_id}"
    first = wait_until(lambda: stack.points(key), 15)[0].payload
    stack.wait_idle(15)
    embedded = stack.services.embedder.dense_embedded
    patched = httpx.request(
        "PROPPATCH",
        f"{stack.settings.nextcloud_url}/remote.php/dav/files/alice/Home/pans.txt",
        content=b'<?xml version="1.0"?><d:propertyupdate xmlns:d="DAV:"><d:set><d:prop>'
        b"<d:lastmodified>1767000600</d:lastmodified></d:prop></d:set></d:propertyupdate>",
        auth=("alice", PASSWORDS["alice"]),
    )
    assert patched.status_code == 207 and "HTTP/1.1 200 OK" in patched.text
    stack.sim.flush_deliveries(timeout=5)
    assert events_for(stack, file_id, "NodeTouchedEvent")
    payload = wait_until(
        lambda: (p := stack.points(key)[0].payload)["modified_at"] == 1_767_000_600 and p, 15
    )
    stack.wait_idle(15)
    assert payload["etag"] != first["etag"]
    assert payload["content_hash"] == first["content_hash"]
    assert stack.services.embedder.dense_embedded == embedded
