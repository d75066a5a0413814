"""ncindex: a continuously synced, verified hybrid-search index of a Nextcloud.

The shared library the three apps (``webhook_receiver``, ``workers``, ``search_api``) import.
"""

__version__ = "0.1.0"
