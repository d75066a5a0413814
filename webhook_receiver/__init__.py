"""Webhook receiver: takes Nextcloud webhook_listeners deliveries and queues tasks.

``create_app(settings)`` is the app factory; ``webhook_receiver.wsgi:app`` serves it under
gunicorn.
"""

from webhook_receiver.app import create_app

__all__ = ["create_app"]
