"""Dense embeddings through fastembed, from local files only (DESIGN §8), and BM25 sparse
vectors from the analysis chain (:mod:`ncindex.embedding.analyzer`).

One :class:`Embedder` per process, shared by every thread: the search API's request threads
and an in-process Celery worker use the same loaded models. Loading takes a lock; embedding
does not need one (fastembed's non-parallel path only reads the ONNX Runtime session, whose
``run`` is thread-safe, and the ``tokenizers`` tokenizer, whose ``encode_batch`` takes it
immutably).

The dense model is registered with fastembed once per process under a private name (the
sentence-transformers name is already one of fastembed's hub models) and loaded from
``Settings.model_dir`` with ``specific_model_path`` and ``local_files_only=True``. BM25 needs no
model files: :mod:`ncindex.embedding.analyzer` turns text into terms and weights. Nothing is
downloaded.
If the packaged default model's folder is missing it is built from the installed packages
(:func:`ncindex.embedding.models.install_models`, a local copy taking well under a second).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.embedding import analyzer, cpu_limit
from ncindex.embedding.models import (
    PACKAGED_DENSE_MODEL,
    ModelPaths,
    dense_dir_name,
    load_tokenizer,
    model_max_tokens,
    model_paths,
    ready_model,
)
from ncindex.errors import ModelError
from ncindex.settings import Settings
from ncindex.store.port import SparseVector

if TYPE_CHECKING:
    from fastembed import TextEmbedding
    from tokenizers import Tokenizer

# Dense models registered with fastembed in this process: private name → dimension.
# fastembed's registry is process-global and refuses a second registration of one name.
_REGISTERED: dict[str, int] = {}
_REGISTER_LOCK = threading.Lock()

#: What one model call costs besides its token slots, in token slots (one text × one token):
#: all-MiniLM-L6-v2 int8 on one ONNX thread took about 5.7 ms a call plus 0.35 ms a slot
#: (x86_64, batches of 1–16 texts of 10–200 words).
CALL_COST_TOKENS = 16

# sentence-transformers pooling modes (1_Pooling/config.json keys) → fastembed PoolingType name.
_POOLING_KEYS = {
    "pooling_mode_mean_tokens": "MEAN",
    "pooling_mode_cls_token": "CLS",
}


class Embedder:
    """Embeds chunk texts (dense + BM25) and queries with the offline models of ``settings``.

    Built from :class:`~ncindex.settings.Settings` (``model_dir``, ``dense_model``,
    ``embed_batch_size``, ``embed_threads``). Models load on first use or at :meth:`load`
    (call it at start-up, off the request path). Safe to use from several threads at once.

    Dense vectors are lists of ``dense_dim`` floats with unit L2 norm (cosine-ready); sparse
    vectors are BM25 term weights (documents) or query term counts (queries) of
    :mod:`~ncindex.embedding.analyzer`, to be scored with Qdrant's IDF modifier. Failures to
    load raise :class:`ncindex.embedding.models.ModelError` (also raised at construction for a
    ``dense_model`` name that cannot name a folder); a dense model that failed to load is
    retried on the next call, and BM25, which loads nothing, works without it.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._paths: ModelPaths = model_paths(settings.model_dir, settings.dense_model)
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._dense: TextEmbedding | None = None
        self._tokenizer: Tokenizer | None = None
        self._dense_dim: int | None = None
        self._dense_embedded = 0

    # --- properties ------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The dense model's name as configured (``Settings.dense_model``), e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2"``; goes into payloads and collection names."""
        return self._settings.dense_model

    @property
    def paths(self) -> ModelPaths:
        """The model folders this embedder loads from."""
        return self._paths

    @property
    def dense_dim(self) -> int:
        """Dimension of the dense vectors, measured on the loaded model (loads it if needed)."""
        self._load_dense()
        assert self._dense_dim is not None
        return self._dense_dim

    @property
    def declared_dim(self) -> int:
        """Dimension the dense model's ``config.json`` declares (``hidden_size``), read without
        loading the model (which checks it against a real embedding when it loads). Raises
        ``ModelError`` if the files are missing or declare no dimension."""
        return _register_dense(self._ensure_files().dense_dir)[1]

    @property
    def max_tokens(self) -> int:
        """Longest input of the dense model, tokens including the special tokens
        (``model_max_length`` of its ``tokenizer_config.json``; 256 for all-MiniLM-L6-v2)."""
        return model_max_tokens(self._ensure_files().dense_dir)

    @property
    def tokenizer(self) -> Tokenizer:
        """The dense model's ``tokenizers.Tokenizer`` with truncation and padding turned off, for
        sizing chunks in the model's tokens. Loaded from ``tokenizer.json`` without the ONNX
        model; the same object on every call (``encode`` on it is thread-safe)."""
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = load_tokenizer(self._ensure_files().dense_dir)
            return self._tokenizer

    @property
    def concurrent_calls(self) -> int:
        """How many :meth:`embed_documents` calls can run at once without the model's threads
        outnumbering the cores: CPUs this process may use (:func:`~ncindex.embedding.cpu_limit.
        usable_cpus`, a container's CPU limit counted) ÷ ``Settings.embed_threads``, at least 1;
        1 when ``embed_threads`` is unset (then each call uses every usable core)."""
        threads = self._settings.embed_threads
        return 1 if threads is None else max(1, cpu_limit.usable_cpus() // threads)

    @property
    def threads(self) -> int | None:
        """ONNX Runtime threads per model call: ``Settings.embed_threads``; unset, the CPUs this
        process may use when a cpuset or a cgroup CPU quota limits it
        (:func:`~ncindex.embedding.cpu_limit.limited_cpus`: ONNX Runtime's own default counts
        the host's cores), else ``None`` (ONNX Runtime's default)."""
        return self._settings.embed_threads or cpu_limit.limited_cpus()

    @property
    def loaded(self) -> bool:
        """Whether the dense model is loaded (for readiness probes; BM25 loads nothing)."""
        return self._dense is not None

    @property
    def analyzer_version(self) -> str:
        """Version of the BM25 analysis chain
        (:data:`~ncindex.embedding.analyzer.ANALYZER_VERSION`),
        written into every point's ``analyzer`` payload field."""
        return analyzer.ANALYZER_VERSION

    @property
    def dense_embedded(self) -> int:
        """Chunk texts embedded densely by :meth:`embed_documents` since this object was made."""
        return self._dense_embedded

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Load the dense model now if not loaded yet (about a second); idempotent, thread-safe.

        Raises :class:`~ncindex.embedding.models.ModelError` if the model files are missing (and
        cannot be built from the installed packages) or the model does not load; Celery's
        ``SoftTimeLimitExceeded`` raised while it loads (a task out of time) passes through.
        """
        self._load_dense()

    def _load_dense(self) -> TextEmbedding:
        if self._dense is not None:
            return self._dense
        with self._lock:
            if self._dense is not None:
                return self._dense
            paths = self._ensure_files()
            from fastembed import TextEmbedding

            name, expected = _register_dense(paths.dense_dir)
            try:
                dense = TextEmbedding(
                    name,
                    threads=self.threads,
                    specific_model_path=str(paths.dense_dir),
                    local_files_only=True,
                )
                probe = next(iter(dense.embed(["dimension probe"], parallel=None)))
            except SoftTimeLimitExceeded:  # a task's time ran out while it loaded: not the model
                raise
            except Exception as exc:  # fastembed and onnxruntime raise assorted types
                raise ModelError(
                    f"cannot load the dense model from {paths.dense_dir}: {exc}"
                ) from exc
            dim = int(probe.shape[-1])
            if dim != expected:
                raise ModelError(f"dense model gives {dim} dimensions, its config.json {expected}")
            self._dense_dim = dim
            self._dense = dense
            return dense

    def _ensure_files(self) -> ModelPaths:
        return ready_model(self._settings.model_dir, self._settings.dense_model)

    # --- embedding -------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[tuple[list[float], SparseVector]]:
        """Embed chunk texts: one ``(dense, sparse)`` pair per text, in the order given.

        Texts are grouped by their length in model tokens (:func:`_token_batches`: batches of
        at most ``Settings.embed_batch_size``, cut where padding a short text to a long one
        would cost more than another model call); results are put back in input order. Runs
        in the calling thread (``parallel=None``: fastembed's worker processes fail inside
        Celery prefork workers) and releases the GIL while the model runs. Input longer than
        the model's limit (256 tokens) is truncated by the model — chunk first. Raises
        :class:`~ncindex.embedding.models.ModelError` if the dense model cannot load.
        """
        if not texts:
            return []
        dense = self.embed_documents_dense(texts)
        return list(zip(dense, self.embed_documents_sparse(texts), strict=True))

    def embed_documents_dense(self, texts: Sequence[str]) -> list[list[float]]:
        """The dense half of :meth:`embed_documents` alone: one unit vector of ``dense_dim``
        floats per text, in input order, batched by token length the same way (the same vectors
        :meth:`embed_documents` gives). Raises ``ModelError`` if the dense model cannot load."""
        if not texts:
            return []
        model = self._load_dense()
        batch = self._settings.embed_batch_size
        out: list[list[float]] = [[] for _ in texts]
        for idx in self._dense_batches(texts):
            group = [texts[i] for i in idx]
            for i, d in zip(idx, model.embed(group, batch_size=batch, parallel=None), strict=True):
                out[i] = _dense_list(d)
            self._count(len(group))
        return out

    def embed_documents_sparse(self, texts: Sequence[str]) -> list[SparseVector]:
        """The BM25 half of :meth:`embed_documents` alone: the document term weights of
        :func:`~ncindex.embedding.analyzer.document_vector`, in input order. Loads nothing."""
        return [analyzer.document_vector(t) for t in texts]

    def embed_query(self, text: str) -> tuple[list[float], SparseVector]:
        """Embed a search query for both halves: ``(dense vector of dense_dim floats (fastembed's
        ``query_embed``), BM25 query vector)``. Raises ``ModelError`` if the dense model cannot
        load."""
        return self.embed_query_dense(text), self.embed_query_sparse(text)

    def embed_query_dense(self, text: str) -> list[float]:
        """The dense half of :meth:`embed_query`: ``dense_dim`` floats, unit norm."""
        return _dense_list(next(iter(self._load_dense().query_embed(text))))

    def embed_query_sparse(self, text: str) -> SparseVector:
        """The BM25 half of :meth:`embed_query` alone (each query term weighted by its count,
        :func:`~ncindex.embedding.analyzer.query_vector`), so search can answer sparse-only when
        the dense half fails: it loads nothing, so it works even when the dense model cannot
        load."""
        return analyzer.query_vector(text)

    def _dense_batches(self, texts: Sequence[str]) -> list[list[int]]:
        """Indices of ``texts`` in dense-model batches: :func:`_token_batches` on their lengths
        in the model's tokens (special tokens included, before the model's truncation)."""
        lengths = [len(e.ids) for e in self.tokenizer.encode_batch(list(texts))]
        return _token_batches(lengths, self._settings.embed_batch_size)

    def _count(self, dense: int) -> None:
        with self._count_lock:
            self._dense_embedded += dense


# --- helpers -------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object")
    return data


def _register_dense(dense_dir: Path) -> tuple[str, int]:
    """Register the model in ``dense_dir`` with fastembed once per process; return its private
    name and the dimension its config declares.

    Dimension: ``hidden_size`` of its ``config.json`` (checked against a real embedding at
    load). Pooling: from ``1_Pooling/config.json`` when present (sentence-transformers layout),
    else mean; output normalised (all-MiniLM-L6-v2's ``modules.json`` ends with Normalize).
    """
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    name = f"ncindex-local/{dense_dir_name(str(dense_dir))}"
    with _REGISTER_LOCK:
        if name in _REGISTERED:
            return name, _REGISTERED[name]
        config = _read_json(dense_dir / "config.json")
        dim = config.get("hidden_size")
        if not isinstance(dim, int) or dim <= 0:
            raise ModelError(f"no hidden_size in {dense_dir}/config.json")
        pooling = "MEAN"
        pooling_file = dense_dir / "1_Pooling" / "config.json"
        if pooling_file.is_file():
            modes = _read_json(pooling_file)
            chosen = [v for k, v in _POOLING_KEYS.items() if modes.get(k)]
            if not chosen:
                raise ModelError(f"unsupported pooling in {pooling_file}")
            pooling = chosen[0]
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType[pooling],
            normalization=True,
            # never fetched: the model always loads with specific_model_path + local_files_only
            sources=ModelSource(hf=PACKAGED_DENSE_MODEL),
            dim=dim,
            model_file="model.onnx",
            description="ncindex offline model (see ncindex.embedding.models)",
        )
        _REGISTERED[name] = dim
        return name, dim


def _token_batches(
    lengths: Sequence[int], size: int, call_tokens: int = CALL_COST_TOKENS
) -> list[list[int]]:
    """Indices ``0 … len(lengths) - 1`` cut into batches of at most ``size``, shortest first,
    so that the model's work is least.

    A batch is padded to its longest text, so it costs ``len(batch) × longest`` token slots,
    plus ``call_tokens`` slots for the call itself. Batches are runs of the texts sorted by
    ``lengths`` (tokens per text); the cheapest cut is found by dynamic programming
    (``len(lengths) × size`` steps). A mix of two 200-token chunks and one of 20 thus becomes
    two calls instead of padding the short one to 200.
    """
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    # best[j]: least cost of the first j sorted texts; take[j]: size of the last batch there
    best = [0] * (len(order) + 1)
    take = [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        longest = lengths[order[j - 1]]
        best[j], take[j] = min(
            (best[j - k] + k * longest + call_tokens, k) for k in range(1, min(size, j) + 1)
        )
    batches, j = [], len(order)
    while j:
        batches.append(order[j - take[j] : j])
        j -= take[j]
    return batches[::-1]


def _dense_list(vector: Any) -> list[float]:
    return [float(x) for x in vector.tolist()]
