"""Point ids name their document (:func:`ncindex.documents.point_id`), so the search groups hits
without reading payloads."""

from __future__ import annotations

import uuid

from ncindex.documents import DocRef, point_document, point_id


def test_ids_are_version_8_uuids_deterministic_per_chunk_and_version() -> None:
    ref = DocRef.parse("file:42")
    pid = point_id(ref, "abc", 0)
    parsed = uuid.UUID(pid)
    assert (parsed.version, parsed.variant) == (8, uuid.RFC_4122)
    assert str(parsed) == pid  # canonical: the form both engines return
    assert point_id(ref, "abc", 0) == pid
    assert len({pid, point_id(ref, "abc", 1), point_id(ref, "abd", 0)}) == 3


def test_every_point_of_a_document_names_it_and_no_other() -> None:
    ref = DocRef.parse("note:7")
    mine = {point_document(point_id(ref, h, i)) for h in ("v1", "v2") for i in range(50)}
    assert len(mine) == 1 and None not in mine
    others = {point_document(point_id(DocRef.parse(f"note:{n}"), "v1", 0)) for n in range(1000)}
    assert len(others) == 1000  # type and id both count: deck_card:7 is another document
    assert point_document(point_id(DocRef.parse("deck_card:7"), "v1", 0)) not in mine


def test_ids_of_the_earlier_scheme_and_other_strings_name_no_document() -> None:
    earlier = uuid.uuid5(uuid.UUID("5b7c1e52-8f0e-4c53-9d0a-6a4f3e2b1c90"), "file:42:abc:0")
    assert point_document(str(earlier)) is None
    assert point_document(str(uuid.uuid4())) is None
    assert point_document("17") is None  # an integer id, as Qdrant also allows
    ours = uuid.UUID(point_id(DocRef.parse("file:1"), "h", 0))
    not_rfc = str(uuid.UUID(int=ours.int & ~(3 << 62)))
    assert point_document(not_rfc) is None  # version digit 8 but another variant
