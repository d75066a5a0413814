"""Entry module for ``celery -A workers.flower flower``: the producer app built from the
environment's settings (:func:`ncindex.ingest.queueing.celery_app`, no task code), so Flower
reads the deployment's queues and events under its namespace (``NCINDEX_NAMESPACE``)."""

from ncindex.ingest.queueing import celery_app
from ncindex.settings import settings_or_exit

app = celery_app(settings_or_exit())
