"""WebDAV: PROPFIND structure, etags, dates, hrefs, 404 bodies, writes, SEARCH by file id."""

from __future__ import annotations

import posixpath
import re
from email.utils import parsedate_to_datetime

from lxml import etree
from sim_support import DAV_NS

from ncindex.nextcloud import webdav

PROPFIND = b"""<?xml version="1.0"?>
<d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns">
  <d:prop>
    <oc:fileid/><oc:id/><d:getlastmodified/><d:getetag/><d:getcontenttype/><d:getcontentlength/>
    <oc:size/><nc:has-preview/><d:resourcetype/><oc:permissions/><oc:unknown-prop/>
  </d:prop>
</d:propfind>"""


def search_body(user: str, file_id: int) -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<d:searchrequest xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
 <d:basicsearch>
  <d:select><d:prop><oc:fileid/><d:getetag/><d:getlastmodified/></d:prop></d:select>
  <d:from><d:scope><d:href>/files/{user}</d:href><d:depth>infinity</d:depth></d:scope></d:from>
  <d:where><d:eq><d:prop><oc:fileid/></d:prop><d:literal>{file_id}</d:literal></d:eq></d:where>
  <d:orderby/>
 </d:basicsearch>
</d:searchrequest>""".encode()


def responses(body: bytes) -> list[etree._Element]:
    root = etree.fromstring(body)
    assert root.tag == "{DAV:}multistatus"
    return root.findall("d:response", DAV_NS)


def props_200(resp: etree._Element) -> etree._Element:
    for ps in resp.findall("d:propstat", DAV_NS):
        if ps.findtext("d:status", namespaces=DAV_NS) == "HTTP/1.1 200 OK":
            return ps.find("d:prop", DAV_NS)
    raise AssertionError("no 200 propstat")


def props_404(resp: etree._Element) -> list[str]:
    for ps in resp.findall("d:propstat", DAV_NS):
        if ps.findtext("d:status", namespaces=DAV_NS) == "HTTP/1.1 404 Not Found":
            return [el.tag for el in ps.find("d:prop", DAV_NS)]
    return []


def test_propfind_depth1_structure(sim, client) -> None:
    fid = sim.put_file("alice", "/Projects/Design Doc.md", b"# Design\n", mtime=1767690898)
    folder_id = sim.file_id("alice", "/Projects")
    resp = client("alice").request(
        "PROPFIND", "/remote.php/dav/files/alice/Projects", headers={"Depth": "1"}, content=PROPFIND
    )
    assert resp.status_code == 207
    assert resp.headers["content-type"] == "application/xml; charset=utf-8"
    assert resp.text.startswith('<?xml version="1.0" encoding="utf-8"?>')
    assert 'xmlns:oc="http://owncloud.org/ns"' in resp.text
    folder, doc = responses(resp.content)
    assert folder.findtext("d:href", namespaces=DAV_NS) == "/remote.php/dav/files/alice/Projects/"
    assert doc.findtext("d:href", namespaces=DAV_NS) == (
        "/remote.php/dav/files/alice/Projects/Design%20Doc.md"
    )
    fprops = props_200(folder)
    assert fprops.findtext("oc:fileid", namespaces=DAV_NS) == str(folder_id)
    assert fprops.find("d:resourcetype/d:collection", DAV_NS) is not None
    assert fprops.findtext("oc:permissions", namespaces=DAV_NS) == "RGDNVCK"
    assert set(props_404(folder)) == {
        "{DAV:}getcontenttype",
        "{DAV:}getcontentlength",
        "{http://owncloud.org/ns}unknown-prop",
    }
    dprops = props_200(doc)
    assert dprops.findtext("oc:fileid", namespaces=DAV_NS) == str(fid)
    assert dprops.findtext("oc:id", namespaces=DAV_NS).startswith(f"{fid:08d}")
    assert re.fullmatch(r'"[0-9a-f]+"', dprops.findtext("d:getetag", namespaces=DAV_NS))
    modified = dprops.findtext("d:getlastmodified", namespaces=DAV_NS)
    assert modified == "Tue, 06 Jan 2026 09:14:58 GMT"
    assert parsedate_to_datetime(modified).timestamp() == 1767690898
    assert dprops.findtext("d:getcontenttype", namespaces=DAV_NS) == "text/markdown"
    assert dprops.findtext("d:getcontentlength", namespaces=DAV_NS) == "9"
    assert dprops.findtext("oc:size", namespaces=DAV_NS) == "9"
    assert dprops.findtext("oc:permissions", namespaces=DAV_NS) == "RGDNVW"
    assert len(dprops.find("d:resourcetype", DAV_NS)) == 0
    assert props_404(doc) == ["{http://owncloud.org/ns}unknown-prop"]


def test_propfind_depth0_and_folder_etag_changes_below(sim, client) -> None:
    sim.put_file("alice", "/A/B/c.md", b"x")
    alice = client("alice")

    def etag(path: str) -> str:
        resp = alice.request(
            "PROPFIND", f"/remote.php/dav/files/alice{path}", headers={"Depth": "0"}
        )
        assert resp.status_code == 207
        (only,) = responses(resp.content)
        return props_200(only).findtext("d:getetag", namespaces=DAV_NS)

    before = etag("/A")
    root_before = etag("/")
    sim.put_file("alice", "/A/B/c.md", b"changed")
    assert etag("/A") != before
    assert etag("/") != root_before


def test_not_found_is_sabre_xml(client) -> None:
    resp = client("alice").request("PROPFIND", "/remote.php/dav/files/alice/Projects/missing.pdf")
    assert resp.status_code == 404
    assert resp.headers["content-type"] == "application/xml; charset=utf-8"
    root = etree.fromstring(resp.content)
    assert root.tag == "{DAV:}error"
    assert root.findtext("s:exception", namespaces=DAV_NS) == "Sabre\\DAV\\Exception\\NotFound"
    assert (
        root.findtext("s:message", namespaces=DAV_NS)
        == "File with name Projects/missing.pdf could not be located"
    )


def test_unauthenticated_dav_is_401_sabre(client) -> None:
    resp = client(None).request("PROPFIND", "/remote.php/dav/files/alice/")
    assert resp.status_code == 401
    assert "Sabre\\DAV\\Exception\\NotAuthenticated" in resp.text
    assert resp.headers["www-authenticate"].startswith("Basic")


def test_get_headers_and_other_users_tree(sim, client) -> None:
    fid = sim.put_file("alice", "/n.md", b"hello")
    resp = client("alice").get("/remote.php/dav/files/alice/n.md")
    assert resp.status_code == 200
    assert resp.content == b"hello"
    etag = resp.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"')
    assert resp.headers["oc-etag"] == etag
    assert resp.headers["content-type"].startswith("text/markdown")
    assert resp.headers["last-modified"].endswith(" GMT")
    assert resp.headers["oc-fileid"].startswith(f"{fid:08d}")
    assert client("bob").get("/remote.php/dav/files/alice/n.md").status_code == 404


def test_put_mkcol_move_copy_delete_status_codes(sim, client) -> None:
    alice = client("alice")
    base = "/remote.php/dav/files/alice"
    assert alice.request("MKCOL", f"{base}/Docs").status_code == 201
    assert alice.request("MKCOL", f"{base}/Docs").status_code == 405
    assert alice.request("MKCOL", f"{base}/No/Such").status_code == 409
    created = alice.put(f"{base}/Docs/a.md", content=b"1", headers={"X-OC-MTime": "1767225600"})
    assert created.status_code == 201
    assert created.headers["x-oc-mtime"] == "accepted"
    fid = sim.file_id("alice", "/Docs/a.md")
    assert created.headers["oc-fileid"].startswith(f"{fid:08d}")
    assert sim.node("alice", "/Docs/a.md").mtime == 1767225600
    assert alice.put(f"{base}/Docs/a.md", content=b"2").status_code == 204
    assert alice.put(f"{base}/Nope/a.md", content=b"2").status_code == 409
    dest = {"Destination": f"{alice.base_url}{base}/Docs/b%20c.md"}
    assert alice.request("MOVE", f"{base}/Docs/a.md", headers=dest).status_code == 201
    assert sim.file_id("alice", "/Docs/b c.md") == fid
    copy_dest = {"Destination": f"{base}/Docs/copy.md"}
    assert alice.request("COPY", f"{base}/Docs/b%20c.md", headers=copy_dest).status_code == 201
    assert sim.file_id("alice", "/Docs/copy.md") not in (None, fid)
    no_over = {"Destination": f"{base}/Docs/copy.md", "Overwrite": "F"}
    assert alice.request("COPY", f"{base}/Docs/b%20c.md", headers=no_over).status_code == 412
    over = {"Destination": f"{base}/Docs/copy.md"}
    assert alice.request("MOVE", f"{base}/Docs/b%20c.md", headers=over).status_code == 204
    assert alice.delete(f"{base}/Docs/copy.md").status_code == 204
    assert alice.delete(f"{base}/Docs/copy.md").status_code == 404
    assert [t["id"] for t in sim.trash("alice")][-1] == fid


def test_an_upload_with_x_oc_mtime_is_touched_between_its_write_events(sim, client) -> None:
    """nextcloud/server ``apps/dav/lib/Connector/Sabre/File.php`` ``put`` sets the mtime of
    ``X-OC-MTime`` with ``View::touch`` after the pre-write hooks and before the post-write
    ones: the upload sends the touch's two events too, with the file's id."""
    alice = client("alice")
    base = "/remote.php/dav/files/alice"

    def sent() -> list[tuple[str, int | None]]:
        out = [
            (e["event"]["class"].rsplit("\\", 1)[1], e["event"]["node"].get("id"))
            for e in sim.events
        ]
        sim.events.clear()
        return out

    sim.events.clear()
    mtime = {"X-OC-MTime": "1767225600"}
    assert alice.put(f"{base}/a.md", content=b"1", headers=mtime).status_code == 201
    fid = sim.file_id("alice", "/a.md")
    assert sent() == [
        ("BeforeNodeCreatedEvent", None),
        ("BeforeNodeWrittenEvent", None),
        ("BeforeNodeTouchedEvent", fid),
        ("NodeTouchedEvent", fid),
        ("NodeCreatedEvent", fid),
        ("NodeWrittenEvent", fid),
    ]
    assert sim.node("alice", "/a.md").mtime == 1767225600
    assert alice.put(f"{base}/a.md", content=b"2", headers=mtime).status_code == 204
    assert sent() == [
        ("BeforeNodeWrittenEvent", fid),
        ("BeforeNodeTouchedEvent", fid),
        ("NodeTouchedEvent", fid),
        ("NodeWrittenEvent", fid),
    ]
    assert alice.put(f"{base}/a.md", content=b"3").status_code == 204  # no header: no touch
    assert sent() == [("BeforeNodeWrittenEvent", fid), ("NodeWrittenEvent", fid)]


def test_search_by_fileid_owner_sharee_and_after_unshare(sim, client) -> None:
    fid = sim.put_file("alice", "/Projects/spec.md", b"spec")
    sim.share("alice", "/Projects", "bob", mount_path="/Shared/Projects")
    alice, bob = client("alice"), client("bob")

    def hrefs(c, user: str) -> list[str]:
        resp = c.request(
            "SEARCH",
            "/remote.php/dav/",
            content=search_body(user, fid),
            headers={"Content-Type": "text/xml"},
        )
        assert resp.status_code == 207
        return [r.findtext("d:href", namespaces=DAV_NS) for r in responses(resp.content)]

    assert hrefs(alice, "alice") == ["/remote.php/dav/files/alice/Projects/spec.md"]
    assert hrefs(bob, "bob") == ["/remote.php/dav/files/bob/Shared/Projects/spec.md"]
    assert sim.path_of("bob", fid) == "/Shared/Projects/spec.md"
    bob_view = bob.request(
        "PROPFIND", "/remote.php/dav/files/bob/Shared/Projects/spec.md", content=PROPFIND
    )
    assert (
        props_200(responses(bob_view.content)[0])
        .findtext("oc:permissions", namespaces=DAV_NS)
        .startswith("S")
    )
    assert sim.unshare("alice", "/Projects", "bob")
    assert hrefs(bob, "bob") == []
    assert (
        bob.request("PROPFIND", "/remote.php/dav/files/bob/Shared/Projects/spec.md").status_code
        == 404
    )
    assert bob.get("/remote.php/dav/files/bob/Shared/Projects/spec.md").status_code == 404
    assert hrefs(alice, "alice") == ["/remote.php/dav/files/alice/Projects/spec.md"]
    assert sim.visible_files("bob") == {}


def test_search_other_users_scope_is_404_and_like_filter_works(sim, client) -> None:
    sim.put_file("alice", "/x.md", b"x")
    sim.put_file("alice", "/y.pdf", b"%PDF")
    alice = client("alice")
    resp = alice.request("SEARCH", "/remote.php/dav/", content=search_body("bob", 1))
    assert resp.status_code == 404
    like = b"""<?xml version="1.0"?>
<d:searchrequest xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"><d:basicsearch>
<d:select><d:prop><d:getcontenttype/></d:prop></d:select>
<d:from><d:scope><d:href>/files/alice</d:href><d:depth>infinity</d:depth></d:scope></d:from>
<d:where><d:like><d:prop><d:getcontenttype/></d:prop><d:literal>text/%</d:literal></d:like></d:where>
</d:basicsearch></d:searchrequest>"""
    resp = alice.request("SEARCH", "/remote.php/dav/", content=like)
    hrefs = [r.findtext("d:href", namespaces=DAV_NS) for r in responses(resp.content)]
    assert hrefs == ["/remote.php/dav/files/alice/x.md"]


def test_request_counter_by_family(sim, client) -> None:
    sim.reset_request_counts()
    alice = client("alice")
    alice.request("PROPFIND", "/remote.php/dav/files/alice/", headers={"Depth": "0"})
    alice.request("SEARCH", "/remote.php/dav/", content=search_body("alice", 1))
    alice.get("/index.php/apps/notes/api/v1/notes")
    assert sim.request_count("webdav") == 1
    assert sim.request_count("dav-search") == 1
    assert sim.request_count("notes", "GET") == 1
    assert sim.requests[("PROPFIND", "webdav")] == 1


def test_trashbin_over_dav(sim, client) -> None:
    fid = sim.put_file("alice", "/Projects/old-notes.txt", b"old")
    sim.delete("alice", "/Projects/old-notes.txt")
    (item,) = sim.trash("alice")
    alice = client("alice")
    base = "/remote.php/dav/trashbin/alice/trash"
    listing = alice.request("PROPFIND", base, headers={"Depth": "1"})
    assert listing.status_code == 207
    entries = responses(listing.content)
    assert entries[1].findtext("d:href", namespaces=DAV_NS) == f"{base}/{item['name']}"
    prop = props_200(entries[1])
    assert prop.findtext("nc:trashbin-original-location", namespaces=DAV_NS) == (
        "Projects/old-notes.txt"
    )
    assert prop.findtext("oc:fileid", namespaces=DAV_NS) == str(fid)
    restore = {"Destination": f"/remote.php/dav/trashbin/alice/restore/{item['name']}"}
    assert alice.request("MOVE", f"{base}/{item['name']}", headers=restore).status_code == 201
    assert sim.path_of("alice", fid) == "/Projects/old-notes.txt"
    assert sim.events[-1]["event"]["class"].endswith("NodeRestoredEvent")
    sim.delete("alice", "/Projects/old-notes.txt")
    name = sim.trash("alice")[0]["name"]
    assert alice.delete(f"{base}/{name}").status_code == 204
    assert sim.trash("alice") == []
    assert client("bob").request("PROPFIND", base).status_code == 404


def test_a_node_blocked_by_an_access_rule_is_listed_unreadable_and_refused(sim, client) -> None:
    sim.put_file("alice", "/Secret/plan.md", b"# Plan\n")
    mount = sim.share("alice", "/Secret", "bob")
    before = sim.node("alice", "/Secret/plan.md").etag
    sim.block_access("alice", "/Secret")  # a folder rule covers what is below it
    for user, path, letters in (
        ("alice", "/Secret/plan.md", "R"),
        ("bob", f"{mount}/plan.md", "SR"),
    ):
        base = f"/remote.php/dav/files/{user}"
        listed = client(user).request(
            "PROPFIND", base + path, headers={"Depth": "0"}, content=PROPFIND
        )
        assert listed.status_code == 207
        # files_accesscontrol's CacheWrapper masks read, update, create and delete
        props = props_200(responses(listed.content)[0])
        assert props.findtext("{http://owncloud.org/ns}permissions") == letters
        # Sabre File::get: "if (!$this->info->isReadable()) throw new NotFound()"
        refused = client(user).get(base + path)
        assert refused.status_code == 404
        assert refused.headers["content-type"] == "application/xml; charset=utf-8"
        root = etree.fromstring(refused.content)
        sabre = {"s": "http://sabredav.org/ns"}
        assert root.findtext("s:exception", namespaces=sabre) == "Sabre\\DAV\\Exception\\NotFound"
        # Directory::getChildren of the unreadable folder: 403, not the folder's 404
        folder = base + posixpath.dirname(path)
        listing = client(user).request("PROPFIND", folder, headers={"Depth": "1"})
        assert listing.status_code == 403
        assert etree.fromstring(listing.content).findtext("s:exception", namespaces=sabre) == (
            "Sabre\\DAV\\Exception\\Forbidden"
        )
        assert client(user).request("PROPFIND", folder, headers={"Depth": "0"}).status_code == 207
    assert sim.node("alice", "/Secret/plan.md").etag == before  # a rule changes no etag
    sim.block_access("alice", "/Secret", blocked=False)
    assert client("bob").get(f"/remote.php/dav/files/bob{mount}/plan.md").content == b"# Plan\n"


def test_search_for_several_file_ids_and_the_default_limit(sim, client) -> None:
    """``d:or`` of ``oc:fileid`` equalities answers the files the user sees among them
    (``FileSearchBackend::transformSearchOperation``); without ``d:limit`` at most 100 come
    back (``FileSearchBackend::transformQuery``)."""
    mine = [sim.put_file("alice", f"/many/{i:03}.md", b"x") for i in range(120)]
    theirs = sim.put_file("bob", "/bob.md", b"b")
    alice = client("alice")
    body = webdav.search_by_fileids_body("alice", [mine[5], theirs, mine[0]])
    resp = alice.request("SEARCH", "/remote.php/dav/", content=body)
    assert resp.status_code == 207
    hrefs = [r.findtext("d:href", namespaces=DAV_NS) for r in responses(resp.content)]
    assert hrefs == [
        "/remote.php/dav/files/alice/many/000.md",
        "/remote.php/dav/files/alice/many/005.md",
    ]
    like = "<d:like><d:prop><d:displayname/></d:prop><d:literal>%.md</d:literal></d:like>"
    every = re.sub(r"<d:limit>.*</d:limit>", "", re.sub(r"<d:or>.*</d:or>", like, body))
    listed = responses(alice.request("SEARCH", "/remote.php/dav/", content=every.encode()).content)
    assert len(listed) == 100


def test_the_searched_folder_takes_a_place_in_the_limit_and_is_left_out(sim, client) -> None:
    """A SEARCH whose condition the scope's own folder meets (``d:is-collection``) counts that
    folder among ``d:nresults`` and leaves it out afterwards: ``QuerySearchHelper::
    searchInCaches`` limits the file-cache query, which matches the jail's root
    (``CacheJail::addJailFilterQuery``), and ``Folder::search`` then drops the searched
    folder. Four folders asked for four answer three."""
    for path in ("/A/Deep", "/B", "/C"):
        sim.mkdir("alice", path)
    alice = client("alice")

    def folders(nresults: int | None, scope: str = "/files/alice") -> list[str]:
        body = webdav.search_folders_body("alice", 0).replace("/files/alice<", f"{scope}<")
        limit = (
            "" if nresults is None else f"<d:limit><d:nresults>{nresults}</d:nresults></d:limit>"
        )
        body = re.sub(r"<d:limit>.*</d:limit>", limit, body)
        resp = alice.request("SEARCH", "/remote.php/dav/", content=body.encode())
        assert resp.status_code == 207
        base = "/remote.php/dav/files/alice"
        return [
            r.findtext("d:href", namespaces=DAV_NS)[len(base) :] for r in responses(resp.content)
        ]

    assert folders(4) == ["/A/", "/A/Deep/", "/B/"]
    assert folders(5) == folders(None) == ["/A/", "/A/Deep/", "/B/", "/C/"]
    assert folders(1, "/files/alice/A") == []
    assert folders(2, "/files/alice/A") == ["/A/Deep/"]


def test_a_search_offset_is_firstresult_in_searchdavs_namespace(sim, client) -> None:
    """A SEARCH's offset is ``firstresult`` in SearchDAV's namespace (icewind1991/SearchDAV
    ``src/XML/Limit.php`` ``xmlDeserialize``: ``'{' . SearchPlugin::SEARCHDAV_NS .
    '}firstresult'``); an ``nc:firstresult`` (the offset of the ``oc:filter-files`` REPORT,
    ``FilesReportPlugin::onReport``) is not read, so that SEARCH answers the first page."""
    for path in ("/A", "/B", "/C"):
        sim.mkdir("alice", path)
    alice = client("alice")

    def folders(offset: str) -> list[str]:
        body = webdav.search_folders_body("alice", 0).replace(
            'xmlns:d="DAV:"',
            'xmlns:d="DAV:" xmlns:nc="http://nextcloud.org/ns" '
            'xmlns:s="https://github.com/icewind1991/SearchDAV/ns"',
        )
        limit = f"<d:limit><d:nresults>2</d:nresults>{offset}</d:limit>"
        body = re.sub(r"<d:limit>.*</d:limit>", limit, body)
        resp = alice.request("SEARCH", "/remote.php/dav/", content=body.encode())
        assert resp.status_code == 207
        base = "/remote.php/dav/files/alice"
        return [
            r.findtext("d:href", namespaces=DAV_NS)[len(base) :] for r in responses(resp.content)
        ]

    # the files root takes the first place of the window and is left out (see above)
    assert folders("") == ["/A/"]
    assert folders("<nc:firstresult>2</nc:firstresult>") == ["/A/"]
    assert folders("<s:firstresult>2</s:firstresult>") == ["/B/", "/C/"]


def test_search_over_the_operator_limit_fails(sim, client) -> None:
    """More than 100 comparisons in ``d:where`` (``FileSearchBackend::OPERATOR_LIMIT``, counted
    as ``countSearchOperators`` does once ``extractWhereValue`` has taken an owner-id equality
    out) make ``transformQuery`` throw InvalidArgumentException, which SearchDAV does not
    catch: Sabre answers 500 with the exception's message, after the scope's 404. The client's
    batches (at most 50 ids) stay under it."""
    files = [sim.put_file("alice", f"/lim/{i:03}.md", b"x") for i in range(2)]
    alice = client("alice")
    eq = "<d:eq><d:prop><oc:fileid/></d:prop><d:literal>{}</d:literal></d:eq>"
    body = webdav.search_by_fileids_body("alice", files)
    at_limit = "<d:or>" + eq.format(files[0]) * 99 + f"<d:not>{eq.format(files[1])}</d:not></d:or>"
    resp = alice.request(
        "SEARCH", "/remote.php/dav/", content=re.sub(r"<d:or>.*</d:or>", at_limit, body)
    )
    assert resp.status_code == 207
    over = "<d:or>" + eq.format(files[0]) * 100 + f"<d:and>{eq.format(files[1])}</d:and></d:or>"
    resp = alice.request(
        "SEARCH", "/remote.php/dav/", content=re.sub(r"<d:or>.*</d:or>", over, body)
    )
    assert resp.status_code == 500
    error = etree.fromstring(resp.content)
    assert error.findtext("{http://sabredav.org/ns}exception") == "InvalidArgumentException"
    assert error.findtext("{http://sabredav.org/ns}message") == (
        "Invalid search query, maximum operator limit of 100 exceeded, got 101 operators"
    )
    # an owner-id equality under d:and is taken out before counting (extractWhereValue)
    owner = "<d:eq><d:prop><oc:owner-id/></d:prop><d:literal>alice</d:literal></d:eq>"
    mine = f"<d:and><d:or>{eq.format(files[0]) * 100}</d:or>{owner}</d:and>"
    resp = alice.request(
        "SEARCH", "/remote.php/dav/", content=re.sub(r"<d:or>.*</d:or>", mine, body)
    )
    assert resp.status_code == 207
    # the scope is looked up first: a missing folder is 404 whatever the query
    nowhere = re.sub(r"<d:or>.*</d:or>", over, body).replace("/files/alice<", "/files/alice/no<")
    assert alice.request("SEARCH", "/remote.php/dav/", content=nowhere).status_code == 404
    fifty = webdav.search_by_fileids_body("alice", [files[0]] * webdav.MAX_FILEIDS_PER_SEARCH)
    assert alice.request("SEARCH", "/remote.php/dav/", content=fifty).status_code == 207


def test_a_decomposed_name_is_kept_composed(sim, client) -> None:
    """Nextcloud keeps paths in NFC (``Filesystem::normalizePath``): a PUT of ``Café.md`` typed
    decomposed (e + U+0301) creates ``Café`` composed, reachable and listed under that name."""
    alice = client("alice")
    base = "/remote.php/dav/files/alice"
    decomposed, composed = "Cafe\u0301.md", "Caf\u00e9.md"
    assert alice.put(f"{base}/{decomposed}", content=b"menu").status_code == 201
    fid = sim.file_id("alice", f"/{composed}")
    assert fid is not None and sim.file_id("alice", f"/{decomposed}") == fid
    listing = alice.request("PROPFIND", base, headers={"Depth": "1"}, content=PROPFIND)
    paths = [e.path for e in webdav.parse_multistatus(listing.content, "alice")]
    assert f"/{composed}" in paths
    assert not any("\u0301" in p for p in paths)
