"""The write path: a document read from Nextcloud, extracted, chunked, embedded and written
(:mod:`.indexing`), the dead letter (:mod:`.deadletter`) and model changes (:mod:`.reindex`)."""
