"""Entry module for ``celery -A workers.worker worker``: the Celery app built from the
environment's settings."""

import workers.heartbeat  # noqa: F401  (liveness file, JSON logs, task context: signals)
from ncindex.settings import settings_or_exit
from workers.celery_app import create_celery

app = create_celery(settings_or_exit())
