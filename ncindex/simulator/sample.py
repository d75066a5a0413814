"""Sample corpus for the simulator: 360 SciFact abstracts as notes and markdown files.

:func:`load_sample_corpus` creates the users of :data:`SAMPLE_USERS` (app passwords below) and
spreads the abstracts over them:

* alice: notes ``/Notes/<Category>/<title>.md`` and files ``/Documents/<Category>/<title>.md``,
  plus ``/Shared Research/<title>.md``, a folder shared with bob (mounted at
  ``/Shared Research`` in his view);
* bob: notes and files in the same layout;
* both: a few files of other formats in ``/Documents/Formats`` (:data:`FORMAT_FILES`: a
  presentation, spreadsheets, CSV, an e-book, RTF and an e-mail), so a newcomer sees them
  found.

Users and app passwords: ``alice`` / ``alice-pw`` (Alice Adams), ``bob`` / ``bob-pw`` (Bob
Brown); with ``with_admin=True`` also ``admin`` / ``admin-pw`` (an admin, for registering
webhooks). Attribution of the
texts: ``ncindex/simulator/data/ATTRIBUTION.md`` (SciFact, Wadden et al. 2020; abstracts ODC-By
1.0, claims and judgments CC BY 4.0); the format files are ncindex's own, written by the writer
libraries of ``tests/docmakers.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = [
    "SAMPLE_ACCOUNTS",
    "SAMPLE_ADMIN",
    "SAMPLE_USERS",
    "SampleDocument",
    "SampleSummary",
    "add_sample_users",
    "load_sample_corpus",
    "safe_file_title",
    "sample_documents",
    "sample_queries",
]

SAMPLE_USERS: dict[str, dict[str, Any]] = {
    "alice": {"password": "alice-pw", "display_name": "Alice Adams", "admin": False},
    "bob": {"password": "bob-pw", "display_name": "Bob Brown", "admin": False},
}
SAMPLE_ACCOUNTS: dict[str, str] = {uid: info["password"] for uid, info in SAMPLE_USERS.items()}
"""uid → app password of the sample users (``alice``, ``bob``)."""
SAMPLE_ADMIN: tuple[str, str] = ("admin", "admin-pw")
"""The admin account :func:`load_sample_corpus` creates when asked (``with_admin=True``)."""
SHARED_FOLDER = "/Shared Research"
FORMATS_FOLDER = "/Documents/Formats"
#: File name in ``data/formats`` → the user who owns it.
FORMAT_FILES: dict[str, str] = {
    "Journal club.pptx": "alice",
    "Freezer inventory.xlsx": "alice",
    "Lab handbook.epub": "alice",
    "Seminar invitation.eml": "alice",
    "Lab meeting.odp": "bob",
    "Grant timeline.ods": "bob",
    "Sequencing runs.csv": "bob",
    "Safety notes.rtf": "bob",
}
BASE_MTIME = 1767225600  # 2026-01-01T00:00:00Z

_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Oncology", ("cancer", "tumor", "tumour", "carcinoma", "leukemia", "lymphoma", "melanoma")),
    ("Immunology", ("immun", "t cell", "t-cell", "antibod", "antigen", "macrophage", "cytokine")),
    ("Neuroscience", ("brain", "neur", "cortex", "cortical", "synap", "alzheimer")),
    ("Cardiology", ("heart", "cardi", "vascular", "blood pressure", "hypertension", "coronary")),
    ("Genetics", ("gene", "dna", "rna", "genom", "chromatin", "transcription", "mutation")),
    ("Infection", ("virus", "viral", "bacteri", "infection", "hiv", "malaria", "tuberculosis")),
    ("Metabolism", ("insulin", "diabet", "obes", "metabol", "glucose", "lipid")),
)


@dataclass(frozen=True)
class SampleDocument:
    """One abstract: SciFact ``doc_id``, ``title`` and ``text``."""

    doc_id: str
    title: str
    text: str


@dataclass
class SampleSummary:
    """What :func:`load_sample_corpus` created.

    ``users`` uid → app password; ``placements`` SciFact id → ``(owner, path, file id)``;
    ``formats`` the other formats' files, name → ``(owner, path, file id)``; counts of notes
    and files per user; ``shared_folder`` (alice's path, also bob's mount).
    """

    users: dict[str, str]
    placements: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    formats: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    shared_folder: str = SHARED_FOLDER
    shared_with: tuple[str, ...] = ("bob",)

    @property
    def documents(self) -> int:
        """Number of documents stored: the abstracts and the format files."""
        return len(self.placements) + len(self.formats)


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    text = resources.files("ncindex.simulator").joinpath("data", name).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def sample_documents(limit: int | None = None) -> list[SampleDocument]:
    """The bundled abstracts in their fixed order (first ``limit`` of them)."""
    rows = _read_jsonl("scifact_sample.jsonl")[:limit]
    return [SampleDocument(r["_id"], r["title"], r["text"]) for r in rows]


def sample_queries() -> list[dict[str, Any]]:
    """SciFact test claims: dicts ``_id``, ``text``, ``corpus_ids`` (judged abstracts)."""
    return _read_jsonl("scifact_sample_queries.jsonl")


def safe_file_title(title: str, max_length: int = 80) -> str:
    """A file-name-safe title: no ``/ \\ : * ? " < > |``, single spaces, ≤ ``max_length``."""
    text = re.sub(r'[\\/:*?"<>|\x00-\x1f]', " ", title)
    text = re.sub(r"\s+", " ", text).strip(" .")
    if len(text) > max_length:
        cut = text[:max_length]
        text = cut.rsplit(" ", 1)[0] if " " in cut[max_length // 2 :] else cut
        text = text.strip(" .,;-")
    return text or "Untitled"


def category_for(title: str) -> str:
    """A deterministic category from keywords in the title (``Reading`` if none matches)."""
    low = title.lower()
    for name, words in _CATEGORIES:
        if any(w in low for w in words):
            return name
    return "Reading"


def _unique(taken: set[str], path: str) -> str:
    if path not in taken:
        taken.add(path)
        return path
    stem, ext = path.rsplit(".", 1)
    n = 2
    while f"{stem} ({n}).{ext}" in taken:
        n += 1
    out = f"{stem} ({n}).{ext}"
    taken.add(out)
    return out


def add_sample_users(sim: NextcloudSimulator) -> None:
    """Create the sample accounts (:data:`SAMPLE_ACCOUNTS`) with their app passwords, and
    nothing else: what ``ncindex up --no-sample`` serves, an empty Nextcloud to fill."""
    for uid, info in SAMPLE_USERS.items():
        sim.add_user(uid, info["password"], info["display_name"], admin=info["admin"])


def load_sample_corpus(
    sim: NextcloudSimulator,
    *,
    limit: int | None = None,
    session: bool = True,
    with_admin: bool = False,
) -> SampleSummary:
    """Create the sample users and store the abstracts; returns a :class:`SampleSummary`.

    Documents are assigned round-robin: alice note, alice file, bob note, then alternately
    alice's shared folder and a bob file. Modification times count back from 2026-01-01 one
    hour per document. File events fire as usual (``session=False`` sends ``user: null``).
    ``limit`` stores only the first abstracts.
    """
    add_sample_users(sim)
    summary = SampleSummary(users=dict(SAMPLE_ACCOUNTS))
    if with_admin:
        sim.add_user(SAMPLE_ADMIN[0], SAMPLE_ADMIN[1], "Administrator", admin=True)
        summary.users[SAMPLE_ADMIN[0]] = SAMPLE_ADMIN[1]
    sim.mkdir("alice", SHARED_FOLDER, session=session)
    sim.share("alice", SHARED_FOLDER, "bob", SHARED_FOLDER)
    taken: set[str] = set()
    for i, doc in enumerate(sample_documents(limit)):
        title = safe_file_title(doc.title)
        category = category_for(doc.title)
        slot = i % 4
        if slot == 0:
            owner, path, kind = "alice", f"/Notes/{category}/{title}.md", "note"
        elif slot == 1:
            owner, path, kind = "alice", f"/Documents/{category}/{title}.md", "file"
        elif slot == 2:
            owner, path, kind = "bob", f"/Notes/{category}/{title}.md", "note"
        elif i % 8 == 3:
            owner, path, kind = "alice", f"{SHARED_FOLDER}/{title}.md", "file"
        else:
            owner, path, kind = "bob", f"/Documents/{category}/{title}.md", "file"
        path = _unique(taken, f"{owner}:{path}").split(":", 1)[1]
        body = f"# {doc.title}\n\n{doc.text}\n"  # provenance: summary.placements, ATTRIBUTION
        fid = sim.put_file(owner, path, body.encode(), mtime=BASE_MTIME - i * 3600, session=session)
        summary.placements[doc.doc_id] = (owner, path, fid)
        counter = summary.notes if kind == "note" else summary.files
        counter[owner] = counter.get(owner, 0) + 1
    folder = resources.files("ncindex.simulator").joinpath("data", "formats")
    for name, owner in FORMAT_FILES.items():
        path = f"{FORMATS_FOLDER}/{name}"
        data = folder.joinpath(name).read_bytes()
        fid = sim.put_file(owner, path, data, mtime=BASE_MTIME, session=session)
        summary.formats[name] = (owner, path, fid)
        summary.files[owner] = summary.files.get(owner, 0) + 1
    return summary
