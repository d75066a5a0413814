"""Celery workers: the app factory (:mod:`workers.celery_app`) and tasks (:mod:`workers.tasks`)."""
