"""What each document type is in Nextcloud: Deck cards (:mod:`.deck_card`), News items
(:mod:`.news_item`) and which files are indexed (:mod:`.eligibility`)."""
