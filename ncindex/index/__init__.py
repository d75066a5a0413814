"""The write path: a document's indexing as explicit steps — read the stored version, classify,
fetch and extract, chunk, embed, write, clean up (:mod:`.steps`) — composed per task by
:mod:`.indexing`, with access removal (:mod:`.access`), the one lock helper (:mod:`.locks`), the
dead letter (:mod:`.deadletter`) and model changes (:mod:`.reindex`)."""
