"""``ncindex extract FILE``: the MIME type, the rule that says no, the text, the chunks with
offsets and tokens, and exit 1 with the reason for a file that cannot be extracted — on files
made by the writer libraries."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from docmakers import image_bytes, pptx_bytes, xlsx_bytes

from allinone.cli import main

SLIDES = [
    ("Harbour", "The pier pilings were replaced with greenheart timber.", "Ask Rui."),
    ("Budget", "Dredging the channel costs forty thousand euros.", "Mention the grant."),
]


def run(*args: str, **env: str):
    return CliRunner().invoke(main, ["extract", *args], env=env)


def test_a_presentation_with_its_chunks_as_json(tmp_path: Path, model_dir: Path) -> None:
    deck = tmp_path / "deck.pptx"
    deck.write_bytes(pptx_bytes(SLIDES))
    result = run(str(deck), "--chunks", "--json", NCINDEX_MODEL_DIR=str(model_dir))
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["mime_type"].endswith("presentationml.presentation")
    assert report["format"] == "pptx" and report["indexed"] and report["rule"] is None
    assert report["pages"] == 2 and report["markdown"] and not report["truncated"]
    text = report["text"]
    assert text.startswith("# Slide 1: Harbour\n\nThe pier pilings")
    assert report["characters"] == len(text)
    assert report["chunks"]
    for chunk in report["chunks"]:
        assert text[chunk["start"] : chunk["end"]] == chunk["text"]
        assert 0 < chunk["tokens"] <= 200
    sentence = SLIDES[1][1]
    start = text.index(sentence)
    assert any(c["start"] <= start < c["end"] for c in report["chunks"])


def test_the_rule_that_says_no_is_named(tmp_path: Path) -> None:
    deck = tmp_path / "deck.pptx"
    deck.write_bytes(pptx_bytes(SLIDES))
    result = run(
        str(deck), "--path", "/Private/deck.pptx", NCINDEX_INDEX_EXCLUDE_GLOBS='["/Private/**"]'
    )
    assert result.exit_code == 0, result.output
    assert "rules      not indexed: excluded_path (NCINDEX_INDEX_EXCLUDE_GLOBS)" in result.output
    assert SLIDES[0][1] in result.output  # still extracted: the admin sees the text
    sheet = tmp_path / "stock.xlsx"
    sheet.write_bytes(xlsx_bytes({"A": [["Copper kettles", 12]]}))
    report = json.loads(
        run(str(sheet), "--json", NCINDEX_INDEX_MIME_TYPES='["application/pdf"]').output
    )
    assert report["rule"] == "mime_type" and report["rule_setting"] == "NCINDEX_INDEX_MIME_TYPES"
    assert report["text"] == "# Sheet: A\n\nCopper kettles | 12"
    scan = tmp_path / "scan.png"
    scan.write_bytes(image_bytes(["The tide mill grinds oats at dawn"]))
    report = json.loads(run(str(scan), "--json", NCINDEX_OCR_ENABLED="false").output)
    assert report["rule"] == "ocr_unavailable" and "error" in report


def test_a_file_that_cannot_be_extracted_exits_1_with_the_reason(tmp_path: Path) -> None:
    broken = tmp_path / "stock.xlsx"
    broken.write_bytes(xlsx_bytes({"A": [["x"]]})[:300])
    result = run(str(broken), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["error"].startswith("ExtractionError: not a valid document archive")
    unknown = tmp_path / "archive.zip"
    unknown.write_bytes(b"PK\x05\x06" + bytes(18))
    result = run(str(unknown))
    assert result.exit_code == 1
    assert "not indexed: unsupported_format" in result.output
    assert "ExtractionError: unsupported file type" in result.output


def test_bad_options_are_refused_and_an_unknown_type_is_named(tmp_path: Path) -> None:
    blob = tmp_path / "b.bin"
    blob.write_bytes(b"\x00\x01 binary")
    result = run(str(blob), "--path", "Documents/b.bin")
    assert result.exit_code == 2 and "must start with /" in result.output
    assert run(str(blob), "--chars", "-5").exit_code == 2
    report = json.loads(run(str(blob), "--json", "--path", "/Documents/b.bin").output)
    assert report["mime_type"] == "application/octet-stream"  # what Nextcloud would report


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--mime", "garbage", "'garbage' is not a MIME type such as text/markdown"),
        ("--mime", "text/*", "'text/*' is not a MIME type"),  # a pattern, not a file's type
        ("--path", "/a/../b.md", "no . or .. segment"),
        ("--path", "/a/./b.md", "no . or .. segment"),
        ("--tag", "", "a tag name is empty"),
        ("--tag", "  ", "a tag name is empty"),
    ],
)
def test_a_value_the_settings_or_the_receiver_refuse_is_a_usage_error(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    """Each exited 0, judging the file by a MIME type, a path or a tag no file can have: the
    settings refuse such a MIME type (NCINDEX_INDEX_MIME_TYPES) and an empty tag name
    (NCINDEX_INDEX_*_TAGS), the webhook receiver such a path."""
    note = tmp_path / "a.md"
    note.write_text("# Tide tables\n")
    result = run(str(note), option, value)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output and said in result.output
    fine = run(str(note), "--mime", "text/markdown", "--path", "/a/b.md", "--tag", "Tide")
    assert fine.exit_code == 0, fine.output


def test_a_file_over_the_download_bound_exits_1_as_too_large(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"tide tables\n" * 500)
    result = run(str(notes), "--json", NCINDEX_MAX_DOWNLOAD_BYTES="2000")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["bytes"] == 6000 and not report["indexed"]
    assert report["rule"] == "too_large" and report["rule_setting"] == "NCINDEX_MAX_DOWNLOAD_BYTES"
    assert report["error"] == f"TooLarge: {notes}: more than 2000 bytes"
    assert "text" not in report
    assert run(str(notes), "--json", NCINDEX_MAX_DOWNLOAD_BYTES="6000").exit_code == 0


def test_a_stream_is_read_only_up_to_the_bound(tmp_path: Path) -> None:
    fifo = tmp_path / "stream"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb") as sink:
            sink.write(b"a" * 4000)  # one write under PIPE_BUF: in the pipe before any read

    writer = threading.Thread(target=write)
    writer.start()
    result = run(str(fifo), "--json", "--mime", "text/plain", NCINDEX_MAX_DOWNLOAD_BYTES="2000")
    writer.join(5)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["bytes"] == 2001 and report["rule"] == "too_large"
    assert report["error"].startswith("TooLarge:")


def test_chunks_in_an_empty_model_folder_build_the_default_model(tmp_path: Path) -> None:
    """``--chunks`` with no model files said ``ModelError: no model_max_length in
    …/tokenizer_config.json``: the embedder builds the packaged model where it is missing, the
    chunker did not; another model's missing files are named as such."""
    note = tmp_path / "kiln.md"
    note.write_text("# Kiln\nFire the stoneware kiln to cone six.")
    models = tmp_path / "models"
    result = run(str(note), "--chunks", NCINDEX_MODEL_DIR=str(models))
    assert result.exit_code == 0, result.output
    assert "--- chunk 0: characters 0-" in result.output
    other = run(
        str(note), "--chunks", NCINDEX_MODEL_DIR=str(models), NCINDEX_DENSE_MODEL="BAAI/bge-small"
    )
    assert other.exit_code == 1
    assert f"model files missing under {models}: expected {models}/bge-small" in other.output


def test_a_model_folder_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    """``ncindex models`` and ``extract --chunks`` ended in a traceback (FileExistsError)."""
    blocker = tmp_path / "models"
    blocker.write_text("a file where the folder should be")
    note = tmp_path / "kiln.md"
    note.write_text("# Kiln\nFire the stoneware kiln to cone six.")
    said = f"cannot write the models into NCINDEX_MODEL_DIR ({blocker}): File exists"
    for args in (["models"], ["extract", str(note), "--chunks"]):
        result = CliRunner().invoke(main, args, env={"NCINDEX_MODEL_DIR": str(blocker)})
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert said in result.output
