"""Embedding: the offline model folder (:mod:`.models`), the dense + BM25 embedder
(:mod:`.embedder`), calls shared between tasks (:mod:`.batching`) and the live models with
their collections (:mod:`.live_models`)."""
