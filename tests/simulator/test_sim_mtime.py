"""Modification times a client sets: ``X-OC-MTime`` on a PUT (``MtimeSanitizer``, the write that
stays when the value is refused)."""

from __future__ import annotations

from lxml import etree
from sim_support import DAV_NS

BASE = "/remote.php/dav/files/alice"


def sent(sim) -> list[tuple[str, int | None, str]]:
    """The events since the last call: (short class, node id, node path)."""
    out = [
        (
            e["event"]["class"].rsplit("\\", 1)[1],
            e["event"]["node"].get("id"),
            e["event"]["node"]["path"],
        )
        for e in sim.events
    ]
    sim.events.clear()
    return out


def sabre_error(resp) -> tuple[str | None, str | None]:
    root = etree.fromstring(resp.content)
    assert root.tag == "{DAV:}error"
    return root.findtext("s:exception", namespaces=DAV_NS), root.findtext(
        "s:message", namespaces=DAV_NS
    )


def test_a_refused_x_oc_mtime_answers_500_after_the_bytes_are_written(sim, client) -> None:
    """``File::put`` writes the bytes, then ``MtimeSanitizer`` throws
    ``InvalidArgumentException``: 500 from sabre, the file written with the write's mtime, only
    the Before* events sent (no touch, no NodeCreated/NodeWritten), no ``X-OC-MTime`` answer."""
    alice = client("alice")
    sim.events.clear()
    resp = alice.put(f"{BASE}/a.md", content=b"first", headers={"X-OC-MTime": "yesterday"})
    assert resp.status_code == 500
    assert "x-oc-mtime" not in resp.headers
    assert sabre_error(resp) == (
        "InvalidArgumentException",
        'X-OC-MTime header must be a valid integer (unix timestamp), got "yesterday".',
    )
    assert sim.read("alice", "/a.md") == b"first"
    node = sim.node("alice", "/a.md")
    assert abs(node.mtime - sim.tree.now()) <= 2
    assert sent(sim) == [
        ("BeforeNodeCreatedEvent", None, "/alice/files/a.md"),
        ("BeforeNodeWrittenEvent", None, "/alice/files/a.md"),
    ]
    etag = node.etag
    resp = alice.put(f"{BASE}/a.md", content=b"second", headers={"X-OC-MTime": "5"})
    assert resp.status_code == 500
    assert sabre_error(resp) == (
        "InvalidArgumentException",
        'X-OC-MTime header must be a valid positive unix timestamp greater than one day, got "5".',
    )
    assert sim.read("alice", "/a.md") == b"second"
    assert node.etag != etag and node.mtime > 86400
    assert list(node.versions.values()) == [b"first"]  # BeforeNodeWrittenEvent kept it
    assert sent(sim) == [("BeforeNodeWrittenEvent", node.id, "/alice/files/a.md")]
    # a write refused first reads no header: 409, not 500
    missing = alice.put(f"{BASE}/No/b.md", content=b"x", headers={"X-OC-MTime": "5"})
    assert missing.status_code == 409


def test_x_oc_mtime_is_read_as_php_reads_a_number(sim, client) -> None:
    """``is_numeric`` (leading zeros, decimals, exponents, a sign; no hexadecimal), then
    ``(int)`` truncating, and more than one day; an empty header is no header. A far-future
    mtime is kept and listed in full (sabre formats any 64-bit timestamp)."""
    alice = client("alice")
    table = {
        "01767225600": 1767225600,
        "1767225600.9": 1767225600,
        "1.7672256e9": 1767225600,
        "+86401": 86401,
        "86400": None,
        "-1767225600": None,
        "0x69570000": None,
        "1767225600s": None,
    }
    for i, (value, expected) in enumerate(table.items()):
        resp = alice.put(f"{BASE}/t{i}.md", content=b"x", headers={"X-OC-MTime": value})
        if expected is None:
            assert resp.status_code == 500, value
        else:
            assert (resp.status_code, resp.headers.get("x-oc-mtime")) == (201, "accepted"), value
            assert sim.node("alice", f"/t{i}.md").mtime == expected, value
    plain = alice.put(f"{BASE}/plain.md", content=b"x", headers={"X-OC-MTime": ""})
    assert plain.status_code == 201 and "x-oc-mtime" not in plain.headers
    far = alice.put(f"{BASE}/far.md", content=b"x", headers={"X-OC-MTime": "99999999999999"})
    assert far.status_code == 201
    listed = alice.request("PROPFIND", f"{BASE}/far.md", headers={"Depth": "0"})
    assert listed.status_code == 207
    assert b"<d:getlastmodified>Sat, 07 Nov 3170843 09:46:39 GMT</d:getlastmodified>" in (
        listed.content
    )
