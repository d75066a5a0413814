"""Files of every format through the whole pipeline (simulator webhook → receiver → Redis →
worker → store → verified search), and the payload a file gets."""

from __future__ import annotations

from docmakers import (
    csv_bytes,
    docx_bytes,
    eml_bytes,
    epub_bytes,
    html_bytes,
    image_bytes,
    odp_bytes,
    ods_bytes,
    odt_bytes,
    pdf_bytes,
    pptx_bytes,
    rtf_bytes,
    scanned_pdf_bytes,
    xlsx_bytes,
)

from support import Stack, wait_until

SENTENCES = {
    "/Docs/report.pdf": "The albatross colony on the southern cliffs doubled since March.",
    "/Docs/minutes.docx": "The committee approved the new copper roofing for the chapel.",
    "/Docs/letter.odt": "Our beekeeping cooperative harvested nine crates of heather honey.",
    "/Docs/page.html": "Volunteers repainted the harbour crane in signal orange.",
    "/Docs/readme.md": "The telescope mirror needs realuminizing every seven years.",
    "/Docs/notes.txt": "Glacier meltwater flooded the lower meadow in late July.",
    "/Docs/deck.pptx": "The ferry terminal roof will be clad in recycled zinc.",
    "/Docs/deck.odp": "Our choir rehearses the winter oratorio in the old granary.",
    "/Docs/stock.xlsx": "Forty barrels of pine tar wait in the boathouse",
    "/Docs/stock.ods": "Seven spinning wheels were restored by the weaving guild",
    "/Docs/rota.csv": "Night watch on the breakwater is shared by three crews",
    "/Docs/guide.epub": "The hermit crab swaps its shell when the tide is lowest.",
    "/Docs/letter.rtf": "The organ builder tuned every pipe of the cathedral organ.",
    "/Mail/ferry.eml": "The mail boat now calls at the northern jetty on Fridays.",
    "/Scans/receipt.png": "Invoice for repairing the lighthouse lantern",
    "/Scans/survey.pdf": "Survey of the eroded dunes near the lagoon",
}


def make(path: str, sentence: str) -> bytes:
    filler = "This paragraph is here so the document has more than one block of text."
    if path.endswith(".pdf"):
        return pdf_bytes([filler, sentence, filler])
    if path.endswith(".docx"):
        return docx_bytes([filler, sentence])
    if path.endswith(".odt"):
        return odt_bytes([filler, sentence])
    if path.endswith(".html"):
        return html_bytes([filler, sentence])
    if path.endswith(".pptx"):
        return pptx_bytes([("Harbour", filler, "Speaker notes."), ("Roof", sentence, "Zinc.")])
    if path.endswith(".odp"):
        return odp_bytes([("Choir", filler, "Notes."), ("Rehearsals", sentence, "Granary.")])
    if path.endswith(".xlsx"):
        return xlsx_bytes({"Stores": [["Item", "Where"], [sentence, "north shed"]]})
    if path.endswith(".ods"):
        return ods_bytes({"Guild": [["Work", "Who"], [sentence, "the weavers"]]})
    if path.endswith(".csv"):
        return csv_bytes([["duty", "note"], ["night", sentence]])
    if path.endswith(".epub"):
        return epub_bytes([("Rock pools", filler), ("Crabs", sentence)])
    if path.endswith(".rtf"):
        return rtf_bytes([filler, sentence])
    if path.endswith(".eml"):
        return eml_bytes("Mail boat timetable", f"{filler}\n\n{sentence}\n")
    if path.endswith(".png"):
        return image_bytes([sentence])
    if path.startswith("/Scans/") and path.endswith(".pdf"):
        return scanned_pdf_bytes([[sentence]])
    if path.endswith(".md"):
        return f"# Observatory\n\n{filler}\n\n{sentence}\n".encode()
    return f"{filler}\n{sentence}\n".encode()


def test_every_format_is_found_by_its_sentence(stack: Stack) -> None:
    keys = {}
    for path, sentence in SENTENCES.items():
        stack.sim.put_file("alice", path, make(path, sentence))
        keys[path] = f"file:{stack.sim.file_id('alice', path)}"
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: all(stack.points(k) for k in keys.values()), 30)
    missing = []
    for path, sentence in SENTENCES.items():
        result = stack.found("alice", sentence, keys[path])
        if result is None or result["path"] != path:
            missing.append(path)
            continue
        texts = " ".join(p.payload["text"] for p in stack.points(keys[path]))
        assert sentence in texts, path
    assert missing == []
    assert "javascript noise" not in " ".join(
        p.payload["text"] for p in stack.points(keys["/Docs/page.html"])
    )


def test_payload_has_mime_size_ancestors_and_tags(stack: Stack) -> None:
    data = make("/Projects/2026/spec.pdf", SENTENCES["/Docs/report.pdf"])
    tag = stack.sim.create_tag("Reviewed")
    stack.sim.put_file("alice", "/Projects/2026/spec.pdf", data)
    stack.sim.assign_tag("alice", "/Projects/2026/spec.pdf", tag)
    key = f"file:{stack.sim.file_id('alice', '/Projects/2026/spec.pdf')}"
    stack.sim.flush_deliveries(timeout=5)
    points = wait_until(
        lambda: (p := stack.points(key)) and p[0].payload["tags"] == ["Reviewed"] and p, 20
    )
    for point in points:
        payload = point.payload
        assert payload["mime_type"] == "application/pdf"
        assert payload["size"] == len(data)
        assert payload["folder_ancestors"] == ["alice:/", "alice:/Projects", "alice:/Projects/2026"]
        assert payload["file_path"] == ["alice:/Projects/2026/spec.pdf"]
        assert payload["doc_type"] == "file" and payload["title"] == "spec.pdf"
