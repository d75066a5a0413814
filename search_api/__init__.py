"""Search API: filtered hybrid search, verified against Nextcloud as the caller.

``create_app(settings)`` is the app factory; ``search_api.wsgi:app`` serves it under gunicorn.
"""

from search_api.app import create_app

__all__ = ["create_app"]
