"""Fixtures of the search tests; the helpers they use live in ``search_support``."""

from search_support import api, corpus, corpus_docs, ro_api, ro_served, served

__all__ = ["api", "corpus", "corpus_docs", "ro_api", "ro_served", "served"]
