"""Modification times a client sets: ``X-OC-MTime`` on a PUT (``MtimeSanitizer``, the write that
stays when the value is refused) and ``PROPPATCH`` of ``{DAV:}lastmodified`` (``Node::touch``
through sabre/dav's ``PropPatch``), with the etags and events ``View::touch`` gives."""

from __future__ import annotations

from lxml import etree
from sim_support import DAV_NS

BASE = "/remote.php/dav/files/alice"
FUTURE = 4_102_444_800  # 2100-01-01: later than any folder's mtime


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


def proppatch(client, path: str, body: str, user: str = "alice"):
    xml = (
        '<?xml version="1.0"?><d:propertyupdate xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" '
        f'xmlns:x="urn:x">{body}</d:propertyupdate>'
    )
    return client(user).request("PROPPATCH", path, content=xml.encode())


def statuses(resp) -> list[tuple[str, list[str]]]:
    """``[(status line, [property Clark names])]`` of the single response of a 207."""
    assert resp.status_code == 207, resp.text
    (response,) = etree.fromstring(resp.content).findall("d:response", DAV_NS)
    return [
        (
            ps.findtext("d:status", namespaces=DAV_NS),
            [el.tag for el in ps.find("d:prop", DAV_NS)],
        )
        for ps in response.findall("d:propstat", DAV_NS)
    ]


LASTMODIFIED = "{DAV:}lastmodified"


def set_mtime(value: str) -> str:
    return f"<d:set><d:prop><d:lastmodified>{value}</d:lastmodified></d:prop></d:set>"


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


def test_a_proppatch_of_lastmodified_touches_the_node(sim, client) -> None:
    """``FilesPlugin::handleUpdateProperties`` → ``Node::touch`` → ``View::touch``: 200 in a
    207, the mtime set, BeforeNodeTouchedEvent + NodeTouchedEvent; the file's etag changes
    with its mtime and is kept when the mtime is the same (the scanner reuses it), while the
    folders above get a new etag each time and ``max(mtime, the touched mtime)``."""
    fid = sim.put_file("alice", "/Docs/a.md", b"text", mtime=1_000_000)
    node, folder = sim.node("alice", "/Docs/a.md"), sim.node("alice", "/Docs")
    etags = (node.etag, folder.etag)
    sim.events.clear()
    resp = proppatch(client, f"{BASE}/Docs/a.md", set_mtime(str(FUTURE)))
    assert statuses(resp) == [("HTTP/1.1 200 OK", [LASTMODIFIED])]
    (response,) = etree.fromstring(resp.content).findall("d:response", DAV_NS)
    assert response.findtext("d:href", namespaces=DAV_NS) == f"{BASE}/Docs/a.md"
    assert node.mtime == FUTURE and folder.mtime == FUTURE
    assert node.etag != etags[0] and folder.etag != etags[1]
    touched = [
        ("BeforeNodeTouchedEvent", fid, "/alice/files/Docs/a.md"),
        ("NodeTouchedEvent", fid, "/alice/files/Docs/a.md"),
    ]
    assert sent(sim) == touched
    etags = (node.etag, folder.etag)
    resp = proppatch(client, f"{BASE}/Docs/a.md", set_mtime(f" {FUTURE} "))
    assert statuses(resp) == [("HTTP/1.1 200 OK", [LASTMODIFIED])]
    assert node.etag == etags[0] and folder.etag != etags[1]
    assert sent(sim) == touched
    resp = proppatch(client, f"{BASE}/Docs/a.md", set_mtime("1767225600"))
    assert statuses(resp) == [("HTTP/1.1 200 OK", [LASTMODIFIED])]
    assert node.mtime == 1767225600 and folder.mtime == FUTURE  # GREATEST(mtime, $time)
    assert node.etag != etags[0]
    # a folder is touched alike
    resp = proppatch(client, f"{BASE}/Docs", set_mtime("1767225600"))
    assert statuses(resp) == [("HTTP/1.1 200 OK", [LASTMODIFIED])]
    assert folder.mtime == 1767225600


def test_lastmodified_refusals_and_sabres_failed_dependencies(sim, client) -> None:
    """An empty value 403; a refused one (or one with child elements) leaves the request with
    500; a protected property fails the whole PROPPATCH before anything runs (424 for the
    rest); a handler's 403 stops the ones after it; a removed favourite answers 204; a body
    that is no ``d:propertyupdate`` 400."""
    sim.put_file("alice", "/a.md", b"text", mtime=1_000_000)
    node = sim.node("alice", "/a.md")
    path = f"{BASE}/a.md"
    sim.events.clear()
    removal = "<d:remove><d:prop><d:lastmodified/></d:prop></d:remove>"
    for body in (removal, set_mtime(""), set_mtime("0")):
        assert statuses(proppatch(client, path, body)) == [
            ("HTTP/1.1 403 Forbidden", [LASTMODIFIED])
        ]
    refused = proppatch(client, path, set_mtime("5"))
    assert refused.status_code == 500
    assert sabre_error(refused)[0] == "InvalidArgumentException"
    fragment = proppatch(client, path, set_mtime("<x:t>1767225600</x:t>"))
    assert fragment.status_code == 500
    assert sabre_error(fragment) == (
        "TypeError",
        "A type error occurred. For more details, please refer to the logs, which provide "
        "additional context about the type error.",
    )
    protected = proppatch(
        client,
        path,
        set_mtime("1767225600")
        + "<d:set><d:prop><d:getlastmodified>x</d:getlastmodified></d:prop></d:set>",
    )
    assert statuses(protected) == [
        ("HTTP/1.1 403 Forbidden", ["{DAV:}getlastmodified"]),
        ("HTTP/1.1 424 Failed Dependency", [LASTMODIFIED]),
    ]
    assert node.mtime == 1_000_000 and sent(sim) == []
    stopped = proppatch(
        client,
        path,
        "<d:set><d:prop><oc:favorite>1</oc:favorite><d:displayname>b.md</d:displayname>"
        "<d:lastmodified>1767225600</d:lastmodified></d:prop></d:set>",
    )
    assert statuses(stopped) == [  # sabre's result order: the handlers' order
        ("HTTP/1.1 200 OK", [LASTMODIFIED]),
        ("HTTP/1.1 403 Forbidden", ["{DAV:}displayname"]),
        ("HTTP/1.1 424 Failed Dependency", ["{http://owncloud.org/ns}favorite"]),
    ]
    assert node.mtime == 1767225600 and "alice" not in node.favorite_of
    dead = proppatch(
        client, path, "<d:set><d:prop><oc:favorite>1</oc:favorite><x:y>1</x:y></d:prop></d:set>"
    )
    assert statuses(dead) == [
        ("HTTP/1.1 200 OK", ["{http://owncloud.org/ns}favorite"]),
        ("HTTP/1.1 403 Forbidden", ["{urn:x}y"]),
    ]
    assert "alice" in node.favorite_of
    unfavorite = proppatch(client, path, "<d:remove><d:prop><oc:favorite/></d:prop></d:remove>")
    assert statuses(unfavorite) == [
        ("HTTP/1.1 204 No Content", ["{http://owncloud.org/ns}favorite"])
    ]
    assert "alice" not in node.favorite_of
    empty = client("alice").request("PROPPATCH", path, content=b"")
    assert (empty.status_code, sabre_error(empty)[1]) == (
        400,
        "The input element to parse is empty. Do not attempt to parse",
    )
    wrong = client("alice").request("PROPPATCH", path, content=b'<d:propfind xmlns:d="DAV:"/>')
    assert (wrong.status_code, sabre_error(wrong)[1]) == (
        400,
        "Expected {DAV:}propertyupdate but received {DAV:}propfind as the root element",
    )


def test_a_read_only_sharee_touching_sets_the_cached_mtime_alone(sim, client) -> None:
    """The storage refuses the touch (``PermissionsMask::touch``), so ``View::touch`` writes
    the mtime into the cache and reports success: 200, the mtime changed for everyone, no
    etag changed, BeforeNodeTouchedEvent without NodeTouchedEvent."""
    fid = sim.put_file("alice", "/Team/plan.md", b"text", mtime=1_000_000)
    mount = sim.share("alice", "/Team", "bob", readonly=True)
    node, folder = sim.node("alice", "/Team/plan.md"), sim.node("alice", "/Team")
    etags = (node.etag, folder.etag)
    sim.events.clear()
    resp = proppatch(
        client, f"/remote.php/dav/files/bob{mount}/plan.md", set_mtime("1767225600"), "bob"
    )
    assert statuses(resp) == [("HTTP/1.1 200 OK", [LASTMODIFIED])]
    assert sim.node("alice", "/Team/plan.md").mtime == 1767225600
    assert (node.etag, folder.etag) == etags
    assert sent(sim) == [("BeforeNodeTouchedEvent", fid, f"/bob/files{mount}/plan.md")]
