"""Entry module for ``celery -A workers.worker worker``: the Celery app built from the
environment's settings."""

from ncindex.settings import Settings
from workers.celery_app import create_celery

app = create_celery(Settings())
