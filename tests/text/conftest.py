"""Shared fixtures of the text tests: the offline models built once per session into a
temporary folder (from the installed packages, nothing downloaded) and a chunker on them."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from ncindex.embedding.models import ModelPaths, install_models, model_max_tokens
from ncindex.text.chunking import Chunker


@pytest.fixture(scope="session")
def text_model_paths(tmp_path_factory: pytest.TempPathFactory) -> ModelPaths:
    return install_models(tmp_path_factory.mktemp("text-models"))


@pytest.fixture(scope="session")
def make_chunker(text_model_paths: ModelPaths):
    @functools.cache
    def make(max_tokens: int = 200, overlap_tokens: int = 32) -> Chunker:
        return Chunker.from_model_dir(
            text_model_paths.dense_dir,
            max_tokens=max_tokens,
            overlap_tokens=overlap_tokens,
            model_max_tokens=model_max_tokens(text_model_paths.dense_dir),
        )

    return make


@pytest.fixture(scope="session")
def chunker(make_chunker) -> Chunker:
    """The production sizes: 200-token chunks, 32-token overlap (Settings defaults)."""
    return make_chunker(200, 32)


@pytest.fixture(scope="session")
def model_dir(text_model_paths: ModelPaths) -> Path:
    return text_model_paths.dense_dir.parent
