"""Entry module for ``celery -A workers.worker worker``: the Celery app built from the
environment's settings."""

import workers.heartbeat  # liveness file, JSON logs, task context: signals connected at import
from ncindex.settings import settings_or_exit
from workers.celery_app import create_celery

app = create_celery(settings_or_exit())
workers.heartbeat.heartbeat_interval()  # a bad NCINDEX_HEARTBEAT_INTERVAL stops it here
