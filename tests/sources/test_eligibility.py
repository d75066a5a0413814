"""Which files are indexed: globs, MIME list, tag gate and excluded tags (exclusion wins)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ncindex.index.indexing import Indexer
from ncindex.settings import Settings
from ncindex.simulator.state import mime_for
from ncindex.sources.eligibility import Eligibility, effective_mime, glob_match
from support import Stack, wait_until

PDF = "application/pdf"


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("/Projects/a.md", "**", True),
        ("/Projects/a.md", "/Projects/**", True),
        ("/Projects-old/a.md", "/Projects/**", False),
        ("/a.tmp", "*.tmp", True),
        ("/x/y/a.tmp", "*.tmp", True),
        ("/x/y/a.tmpx", "*.tmp", False),
        ("/x/a.md", "/*.md", False),
        ("/a.md", "/*.md", True),
        ("/a.md", "/**/a.md", True),
        ("/deep/er/a.md", "/**/a.md", True),
        ("/Private/b.txt", "/Private/?.txt", True),
        ("/Private/bc.txt", "/Private/?.txt", False),
        ("/v1/a", "/v[0-9]/a", True),
        ("/va/a", "/v[!0-9]/a", True),
        ("/v1/a", "/v[!0-9]/a", False),
        ("/a+b(c).md", "/a+b(c).md", True),
    ],
)
def test_glob_semantics(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected


def test_effective_mime_uses_the_extension_only_for_generic_types() -> None:
    assert effective_mime("application/octet-stream", "/a.pdf") == PDF
    assert effective_mime(None, "/a.md") == "text/markdown"
    assert effective_mime("text/plain; charset=utf-8", "/a.md") == "text/plain"
    assert effective_mime("application/octet-stream", "/a.bin") is None


def policy(**fields: object) -> Eligibility:
    return Eligibility.from_settings(Settings(**fields))  # type: ignore[arg-type]


def test_file_reasons() -> None:
    default = policy()
    assert default.file_reason("/a.pdf", PDF, []) is None
    assert default.file_reason("/a.zip", "application/zip", []) == "unsupported_format"
    assert policy(index_mime_types=["text/*"]).file_reason("/a.pdf", PDF, []) == "mime_type"
    assert (
        policy(index_mime_types=[PDF]).file_reason("/a.pdf", "application/octet-stream", []) is None
    )
    assert policy(index_include_globs=["/Work/**"]).file_reason("/a.pdf", PDF, []) == (
        "path_not_included"
    )
    excluded = policy(index_include_globs=["/Work/**"], index_exclude_globs=["*.draft.pdf"])
    assert excluded.file_reason("/Work/x.draft.pdf", PDF, []) == "excluded_path"
    assert excluded.file_reason("/Work/x.pdf", PDF, []) is None


def test_tag_gate_and_exclusion_wins() -> None:
    gated = policy(index_required_tags=["Index"], index_excluded_tags=["Confidential"])
    assert gated.file_reason("/a.pdf", PDF, []) == "missing_required_tag"
    assert gated.file_reason("/a.pdf", PDF, ["index"]) is None  # case-insensitive
    assert gated.file_reason("/a.pdf", PDF, ["Index", "Confidential"]) == "excluded_tag"
    assert policy(index_excluded_tags=["Confidential"]).file_reason(
        "/a.pdf", PDF, ["Confidential"]
    ) == ("excluded_tag")


def test_policy_applies_to_files_and_notes_through_the_worker(stack: Stack) -> None:
    stack.settings.index_exclude_globs = ["/Archive/**", "*.log"]
    stack.settings.index_required_tags = ["searchable"]
    stack.settings.index_excluded_tags = ["secret"]
    searchable = stack.sim.create_tag("searchable")
    secret = stack.sim.create_tag("secret")
    body = b"Harbour pilots report fog over the estuary every morning."
    paths = {
        "tagged": "/Work/fog.txt",
        "untagged": "/Work/plain.txt",
        "secret": "/Work/both.txt",
        "archived": "/Archive/old.txt",
        "log": "/Work/run.log",
        "note": "/Notes/Fog.md",
    }
    for name, path in paths.items():
        stack.sim.put_file("alice", path, body)
        if name != "untagged":
            stack.sim.assign_tag("alice", path, searchable)
    stack.sim.assign_tag("alice", paths["secret"], secret)
    stack.sim.flush_deliveries(timeout=5)
    ids = {name: stack.sim.file_id("alice", path) for name, path in paths.items()}
    wait_until(
        lambda: stack.points(f"file:{ids['tagged']}") and stack.points(f"note:{ids['note']}"), 20
    )
    indexer = Indexer(stack.services)
    reasons = {name: indexer.index_node("alice", ids[name]).reason for name in paths}
    assert reasons == {
        "tagged": None,
        "untagged": "missing_required_tag",
        "secret": "excluded_tag",
        "archived": "excluded_path",
        "log": "excluded_path",
        "note": None,
    }
    for name in ("untagged", "secret", "archived", "log"):
        assert not stack.points(f"file:{ids[name]}"), name
    # taking the excluded tag away brings the file in through its TagUnassigned event
    stack.sim.unassign_tag("alice", paths["secret"], secret)
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: stack.points(f"file:{ids['secret']}"), 20)
    # and assigning it again evicts it through TagAssigned
    stack.sim.assign_tag("alice", paths["secret"], secret)
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: not stack.points(f"file:{ids['secret']}"), 20)


@pytest.mark.parametrize("variable", ["index_include_globs", "index_exclude_globs"])
def test_a_glob_that_does_not_compile_is_refused_by_the_settings(variable: str) -> None:
    """``[z-a]`` raised ``re.error`` in every file's classification (``ncindex extract``
    ended in a traceback; a worker failed each file)."""
    with pytest.raises(ValidationError, match="glob 1 is not a valid path glob: bad character"):
        Settings(**{variable: ["/Docs/**", "/[z-a]/**"]})
    assert Settings(**{variable: ["/[a-z]/**", "/[abc"]}).model_dump()[variable] == [
        "/[a-z]/**",
        "/[abc",  # a [ without its ] is itself
    ]


@pytest.mark.parametrize("entry", ["garbage", "text", "text/", "/markdown", "text/mark down", ""])
def test_a_mime_entry_that_is_no_type_is_refused_by_the_settings(entry: str) -> None:
    """Such an entry matched no file, without a word (as the search filters refuse it)."""
    with pytest.raises(ValidationError, match="entry 1 is not a MIME type or pattern"):
        Settings(index_mime_types=["text/markdown", entry])
    patterns = ["text/*", "application/vnd.oasis.opendocument.*", "*/*", "message/rfc822"]
    assert Settings(index_mime_types=patterns).index_mime_types == patterns


@pytest.mark.parametrize("variable", ["index_required_tags", "index_excluded_tags"])
def test_an_empty_tag_name_is_refused_by_the_settings(variable: str) -> None:
    """A required tag "" let no file through, without a word."""
    with pytest.raises(ValidationError, match="a tag name is empty"):
        Settings(**{variable: ["urgent", " "]})


def test_the_rules_fingerprint_changes_with_a_rule_and_only_then() -> None:
    """A scan relists every folder when the fingerprint differs from the last listing's
    (``Reconciler.scan``): the same globs or MIME types in another order, or one written
    twice, changed it, so the next scan of every account listed all it has for no rule
    changed. Each rule still changes it."""
    base = policy(
        index_include_globs=["/Work/**", "/Notes/**"],
        index_mime_types=["text/*", PDF],
        index_required_tags=["Index", "Keep"],
        note_extensions=["md", "txt"],
    )
    same = policy(
        index_include_globs=["/Notes/**", "/Work/**", "/Notes/**"],
        index_mime_types=[PDF, "TEXT/*"],
        index_required_tags=["keep", "index"],
        note_extensions=["TXT", ".md", "txt"],
    )
    assert same.fingerprint() == base.fingerprint()
    changed = [
        {"index_include_globs": ["/Work/**"]},
        {"index_exclude_globs": ["/Work/Private/**"]},
        {"index_mime_types": ["text/*"]},
        {"index_required_tags": ["Index"]},
        {"index_excluded_tags": ["Secret"]},
        {"note_extensions": ["md"]},
    ]
    prints = {base.fingerprint()}
    for change in changed:
        prints.add(
            policy(
                **{
                    "index_include_globs": ["/Work/**", "/Notes/**"],
                    "index_mime_types": ["text/*", PDF],
                    "index_required_tags": ["Index", "Keep"],
                    "note_extensions": ["md", "txt"],
                }
                | change
            ).fingerprint()
        )
    assert len(prints) == 1 + len(changed)


def test_note_extensions_are_taken_without_their_dot_and_case() -> None:
    """``.md`` or ``MD`` matched no note (a file's extension is compared bare, in lower
    case): every note was indexed as a plain file."""
    assert Settings(note_extensions=[".md", "TXT", " org "]).note_extensions == ["md", "txt", "org"]
    with pytest.raises(ValidationError, match="an extension is empty"):
        Settings(note_extensions=["md", "."])


#: Text files Nextcloud types ``application/*`` (nextcloud/server
#: resources/config/mimetypemapping.dist.json, each with a ``text/*`` secure alternative):
#: path → (content, Nextcloud's type, a word of the content).
TEXT_APPLICATION_FILES = {
    "/Config/router.json": (b'{"ssid": "Falcon", "channel": 11}', "application/json", "Falcon"),
    "/Config/compose.yaml": (b"services:\n  web: heron\n", "application/yaml", "heron"),
    "/Config/feed.xml": (b"<feed><title>Osprey</title></feed>", "application/xml", "Osprey"),
    "/Code/widget.js": (b"let pelican = 42;\n", "application/javascript", "pelican"),
}


def test_text_files_nextcloud_types_application_are_indexed(stack: Stack) -> None:
    """A ``.json``, ``.yaml``, ``.xml`` or ``.js`` file was skipped as ``unsupported_format``
    (``ncindex extract`` even named its type ``application/octet-stream``): Nextcloud types
    them ``application/json`` and so on, which neither the extractor nor the default MIME list
    took, although Nextcloud's own mapping gives each a ``text/*`` secure alternative."""
    default = policy()
    for path, (body, mime, _) in TEXT_APPLICATION_FILES.items():
        assert mime_for(path) == mime, path  # the simulator types it as Nextcloud does
        assert effective_mime("application/octet-stream", path) == mime, path
        assert default.file_reason(path, mime, []) is None, path
        stack.sim.put_file("alice", path, body)
    stack.sim.flush_deliveries(timeout=5)
    ids = {path: stack.sim.file_id("alice", path) for path in TEXT_APPLICATION_FILES}
    wait_until(lambda: all(stack.points(f"file:{i}") for i in ids.values()), 30)
    for path, file_id in ids.items():
        text = " ".join(p.payload["text"] for p in stack.points(f"file:{file_id}"))
        assert TEXT_APPLICATION_FILES[path][2] in text, path
