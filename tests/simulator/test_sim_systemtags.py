"""System tags: PROPFIND prop, tag collection, create, relations, filter-files, tag events."""

from __future__ import annotations

import json

from lxml import etree
from sim_support import DAV_NS, register

TAGS = "/remote.php/dav/systemtags/"
REL = "/remote.php/dav/systemtags-relations/files"


def filter_files(*tag_ids: int, rules: bool = True) -> bytes:
    inner = "".join(f"<oc:systemtag>{t}</oc:systemtag>" for t in tag_ids)
    block = f"<oc:filter-rules>{inner}</oc:filter-rules>" if rules else ""
    return f"""<?xml version="1.0"?>
<oc:filter-files xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns">
  <d:prop><oc:fileid/><d:getetag/></d:prop>{block}
</oc:filter-files>""".encode()


def test_create_list_assign_and_propfind(sim, client) -> None:
    alice, admin = client("alice"), client("admin")
    created = alice.post(
        TAGS,
        content=json.dumps({"name": "Confidential"}),
        headers={"Content-Type": "application/json"},
    )
    assert created.status_code == 201
    tag_id = int(created.headers["content-location"].rsplit("/", 1)[1])
    dup = alice.post(
        TAGS,
        content=json.dumps({"name": "Confidential"}),
        headers={"Content-Type": "application/json"},
    )
    assert dup.status_code == 409
    assert (
        alice.post(TAGS, content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 415
    )
    restricted = alice.post(
        TAGS,
        content=json.dumps({"name": "Hidden", "userVisible": False}),
        headers={"Content-Type": "application/json"},
    )
    assert restricted.status_code == 400
    hidden = sim.create_tag("Hidden", user_visible=False)
    listing = alice.request("PROPFIND", TAGS, headers={"Depth": "1"})
    assert listing.status_code == 207
    hrefs = [r.findtext("d:href", namespaces=DAV_NS) for r in etree.fromstring(listing.content)]
    assert hrefs == [TAGS, f"{TAGS}{tag_id}"]
    admin_hrefs = etree.fromstring(admin.request("PROPFIND", TAGS).content)
    assert len(admin_hrefs) == 3
    fid = sim.put_file("alice", "/doc.md", b"x")
    assert alice.put(f"{REL}/{fid}/{tag_id}").status_code == 201
    assert alice.put(f"{REL}/{fid}/{tag_id}").status_code == 405
    assert alice.put(f"{REL}/{fid}/{hidden}").status_code == 412
    assert alice.put(f"{REL}/{fid}/999").status_code == 412
    assert client("bob").put(f"{REL}/{fid}/{tag_id}").status_code == 404
    body = b"""<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:nc="http://nextcloud.org/ns">
      <d:prop><nc:system-tags/></d:prop></d:propfind>"""
    resp = alice.request("PROPFIND", "/remote.php/dav/files/alice/doc.md", content=body)
    tag_el = etree.fromstring(resp.content).find(".//nc:system-tags/nc:system-tag", DAV_NS)
    assert tag_el.text == "Confidential"
    assert tag_el.get("{http://owncloud.org/ns}id") == str(tag_id)
    assert tag_el.get("{http://owncloud.org/ns}can-assign") == "true"
    assert tag_el.get("{http://owncloud.org/ns}user-visible") == "true"
    rel = alice.request("PROPFIND", f"{REL}/{fid}", headers={"Depth": "1"})
    rel_hrefs = [r.findtext("d:href", namespaces=DAV_NS) for r in etree.fromstring(rel.content)]
    assert rel_hrefs[-1] == f"{REL}/{fid}/{tag_id}"
    assert alice.delete(f"{REL}/{fid}/{tag_id}").status_code == 204
    assert alice.delete(f"{REL}/{fid}/{tag_id}").status_code == 404
    assert sim.tags_of("alice", "/doc.md") == []


def test_filter_files_report(sim, client) -> None:
    tag = sim.create_tag("review")
    other = sim.create_tag("todo")
    a = sim.put_file("alice", "/A/a.md", b"a")
    sim.put_file("alice", "/A/b.md", b"b")
    sim.assign_tag("alice", "/A/a.md", tag)
    sim.assign_tag("alice", "/A/a.md", other)
    sim.assign_tag("alice", "/A/b.md", other)
    alice = client("alice")
    url = "/remote.php/dav/files/alice/"
    resp = alice.request("REPORT", url, content=filter_files(tag, other))
    assert resp.status_code == 207
    root = etree.fromstring(resp.content)
    assert [r.findtext(".//oc:fileid", namespaces=DAV_NS) for r in root] == [str(a)]
    assert alice.request("REPORT", url, content=filter_files(tag, rules=False)).status_code == 400
    assert alice.request("REPORT", url, content=filter_files(424242)).status_code == 412
    hidden = sim.create_tag("secret", user_visible=False)
    assert alice.request("REPORT", url, content=filter_files(hidden)).status_code == 412


def test_tag_events_have_string_object_ids(sim, client, receiver) -> None:
    admin = client("admin")
    register(admin, receiver, "OCP\\SystemTag\\TagAssignedEvent")
    register(admin, receiver, "OCP\\SystemTag\\TagUnassignedEvent")
    tag = sim.create_tag("x")
    fid = sim.put_file("alice", "/t.md", b"t")
    alice = client("alice")
    alice.put(f"{REL}/{fid}/{tag}")
    alice.delete(f"{REL}/{fid}/{tag}")
    sim.flush_deliveries(timeout=5)
    bodies = [json.loads(r.body) for r in receiver.requests]
    # Deliveries run on parallel senders (as webhook_listeners' background jobs do), so
    # their arrival order is not part of the contract: compare in class order.
    events = sorted((b["event"] for b in bodies), key=lambda event: event["class"])
    assert events == [
        {
            "objectType": "files",
            "objectIds": [str(fid)],
            "tagIds": [tag],
            "class": "OCP\\SystemTag\\TagAssignedEvent",
        },
        {
            "objectType": "files",
            "objectIds": [str(fid)],
            "tagIds": [tag],
            "class": "OCP\\SystemTag\\TagUnassignedEvent",
        },
    ]
