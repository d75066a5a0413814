"""BEIR-layout datasets: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

- ``corpus.jsonl``: one JSON object a line, ``{"_id", "title", "text"}`` (title may be empty);
- ``queries.jsonl``: ``{"_id", "text"}``;
- ``qrels/test.tsv``: tab-separated ``query-id  corpus-id  score`` with a header line; a score
  above 0 is relevant (graded scores are kept as gains for nDCG).

Only judged queries are evaluated (BEIR's convention): queries without a positive judgment are
left out, and judgments naming documents missing from the corpus are dropped.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DatasetError(ValueError):
    """Raised for a folder that is not a usable BEIR dataset (missing file, bad line)."""


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    """One corpus document: its dataset id, title (may be empty) and text."""

    doc_id: str
    title: str
    text: str


@dataclass(slots=True)
class BeirDataset:
    """A loaded dataset. ``qrels`` maps query id → {corpus id: relevance > 0}; ``queries``
    holds only judged queries; ``corpus`` keeps file order."""

    name: str
    corpus: dict[str, CorpusDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    meta: dict[str, Any] = field(default_factory=dict)

    def subset(self, queries: int, docs: int, *, seed: str = "ncindex") -> BeirDataset:
        """A deterministic smaller dataset: ``queries`` judged queries (chosen by a seeded hash
        of their ids) with all their judged documents, filled up to ``docs`` documents with
        others chosen the same way (so each query has distractors). Raises ``ValueError`` if the
        judged documents alone exceed ``docs``."""

        def rank(key: str) -> str:
            return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()

        chosen = sorted(self.qrels, key=rank)[:queries]
        keep = {d for q in chosen for d in self.qrels[q]}
        if len(keep) > docs:
            raise ValueError(f"{len(keep)} judged documents do not fit in {docs}")
        for doc_id in sorted(self.corpus, key=rank):
            if len(keep) >= docs:
                break
            keep.add(doc_id)
        return BeirDataset(
            name=f"{self.name}[{len(chosen)}q/{len(keep)}d]",
            corpus={k: v for k, v in self.corpus.items() if k in keep},
            queries={q: self.queries[q] for q in chosen},
            qrels={q: dict(self.qrels[q]) for q in chosen},
            meta=dict(self.meta) | {"subset_of": self.name, "seed": seed},
        )

    def split(self, *, seed: str = "ncindex") -> tuple[list[str], list[str]]:
        """Judged query ids cut in two halves by a seeded hash (tune on one, report on the
        other); deterministic for a dataset and seed."""
        order = sorted(self.qrels, key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).digest())
        half = len(order) // 2
        return sorted(order[:half]), sorted(order[half:])

    def restrict(self, query_ids: Iterable[str]) -> BeirDataset:
        """The same corpus with only ``query_ids`` (which must be judged) as queries."""
        ids = list(query_ids)
        return BeirDataset(
            name=self.name,
            corpus=self.corpus,
            queries={q: self.queries[q] for q in ids},
            qrels={q: self.qrels[q] for q in ids},
            meta=self.meta,
        )


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def _read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    for number, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{path}:{number}: not JSON: {exc}") from exc
        if not isinstance(row, dict) or "_id" not in row:
            raise DatasetError(f"{path}:{number}: expected an object with _id")
        yield row


def load_beir(folder: Path, split: str = "test") -> BeirDataset:
    """Load a BEIR-layout ``folder`` (see the module docstring); raises :class:`DatasetError`
    for a missing file or a malformed line, or when no query is judged."""
    folder = Path(folder)
    corpus: dict[str, CorpusDoc] = {}
    for row in _read_jsonl(folder / "corpus.jsonl"):
        doc_id = str(row["_id"])
        corpus[doc_id] = CorpusDoc(doc_id, str(row.get("title") or ""), str(row.get("text") or ""))
    all_queries = {
        str(r["_id"]): str(r.get("text") or "") for r in _read_jsonl(folder / "queries.jsonl")
    }
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels: dict[str, dict[str, int]] = {}
    lines = _read_text(qrels_path).splitlines()
    for number, row in enumerate(csv.reader(lines, delimiter="\t"), 1):
        if not row or (number == 1 and not row[-1].strip().lstrip("-").isdigit()):
            continue  # blank line or header
        if len(row) < 3:
            raise DatasetError(f"{qrels_path}:{number}: expected query-id, corpus-id, score")
        try:
            qid, did, score = row[0].strip(), row[1].strip(), int(row[2])
        except ValueError as exc:
            raise DatasetError(f"{qrels_path}:{number}: score is not an integer") from exc
        if score > 0 and did in corpus and qid in all_queries:
            qrels.setdefault(qid, {})[did] = score
    if not qrels:
        raise DatasetError(f"no judged query in {folder}")
    return BeirDataset(
        name=folder.name,
        corpus=corpus,
        queries={q: all_queries[q] for q in qrels},
        qrels=qrels,
        meta={"path": str(folder), "split": split},
    )


def note_content(title: str, text: str) -> str:
    """The note (or markdown file) a corpus document becomes: the title as a first-level
    heading — the Notes app takes a note's title from its first line — a blank line, the text.
    Without a title, the text alone."""
    title = " ".join(title.split())
    return f"# {title}\n\n{text.strip()}\n" if title else f"{text.strip()}\n"


def sample_dataset() -> BeirDataset:
    """The SciFact sample that ships with ncindex (``ncindex/simulator/data``): 360 abstracts —
    every one judged in the test split plus 77 others — and the 300 test claims with their
    judgments, as a :class:`BeirDataset` named ``scifact-sample``."""
    from ncindex.simulator.sample import sample_documents, sample_queries

    corpus = {d.doc_id: CorpusDoc(d.doc_id, d.title, d.text) for d in sample_documents()}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for row in sample_queries():
        judged = {str(c): 1 for c in row.get("corpus_ids") or [] if str(c) in corpus}
        if judged:
            queries[str(row["_id"])] = str(row["text"])
            qrels[str(row["_id"])] = judged
    return BeirDataset("scifact-sample", corpus, queries, qrels, {"path": "ncindex/simulator/data"})
