"""What each document type is in Nextcloud: one module per doc type — notes (:mod:`.note`),
files (:mod:`.file`), Deck cards (:mod:`.deck_card`), News items (:mod:`.news_item`) — each a
:class:`~.base.Source` (list, fetch, verify, etag, event routes) in the one registry
(:mod:`.registry`); which files are indexed, and as what (:mod:`.eligibility`)."""
