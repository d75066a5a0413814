"""The read path: the search service (:mod:`.service`), its filters (:mod:`.filter_fields`,
:mod:`.filters`), verify-on-read (:mod:`.verify`) and the RCP/1 server (:mod:`.rcp`)."""
