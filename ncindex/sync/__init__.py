"""Keeping the index equal to Nextcloud without webhooks: the scans (:mod:`.reconcile`) and
what an operator sees of them (:mod:`.status`)."""
