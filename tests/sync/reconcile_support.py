"""Helpers for the reconciliation tests: ground truth from the simulator and the index as it is
(:meth:`support.Stack.settle` and :meth:`support.Stack.reconcile` wait for the workers)."""

from __future__ import annotations

import posixpath
from typing import Any

from qdrant_client import models

from ncindex.simulator.notes_api import NotesApi
from support import Stack

NOTE_EXTENSIONS = ("txt", "org", "markdown", "md", "note")
FILE_EXTENSIONS = ("md", "txt")


def ground_truth(stack: Stack, users: list[str]) -> dict[str, dict[str, Any]]:
    """``doc_key`` → ``{"acl", "paths", "etag"}`` of what should be indexed: every note and
    markdown/text file each user can see (notes: files under ``/Notes`` with a note
    extension, their note etag; files: their WebDAV etag)."""
    sim = stack.sim
    notes = NotesApi(sim)
    out: dict[str, dict[str, Any]] = {}
    for user in users:
        for file_id, path in sim.visible_files(user).items():
            ext = posixpath.splitext(path)[1].lstrip(".").lower()
            if path.startswith("/Notes/") and ext in NOTE_EXTENSIONS:
                key, etag = f"note:{file_id}", notes.note_etag(user, file_id)
            elif ext in FILE_EXTENSIONS:
                node = sim.node(user, path)
                assert node is not None
                key, etag = f"file:{file_id}", node.etag
            else:
                continue
            doc = out.setdefault(key, {"acl": set(), "paths": {}, "etag": etag})
            doc["acl"].add(f"user:{user}")
            doc["paths"][user] = path
    return out


def index_state(stack: Stack) -> dict[str, dict[str, Any]]:
    """The same shape read from the store (first chunk of every document)."""
    flt = models.Filter(
        must=[models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))]
    )
    out: dict[str, dict[str, Any]] = {}
    for payload in stack.services.store.scroll(flt, ["doc_key", "acl", "paths", "etag"]):
        assert payload["doc_key"] not in out, f"two versions of {payload['doc_key']}"
        out[payload["doc_key"]] = {
            "acl": set(payload["acl"]),
            "paths": dict(payload["paths"]),
            "etag": payload["etag"],
        }
    return out


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """What differs, by ``doc_key`` (empty when the index equals the ground truth)."""
    out: dict[str, Any] = {}
    for key in sorted(expected.keys() | actual.keys()):
        if expected.get(key) != actual.get(key):
            out[key] = {"expected": expected.get(key), "indexed": actual.get(key)}
    return out
