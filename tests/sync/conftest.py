"""Fixtures for the reconciliation tests: the whole stack with the grace period off, and a
producer app to send tasks with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery

from ncindex.ingest.queueing import celery_app
from support import Stack


@pytest.fixture
def rstack(stack: Stack) -> Stack:
    """The ``stack`` with ``reconcile_grace_seconds`` 0 (a missing document is re-checked on
    the first scan that misses it)."""
    stack.settings.reconcile_grace_seconds = 0
    return stack


@pytest.fixture
def producer(stack: Stack) -> Iterator[Celery]:
    """A producer-only Celery app on the stack's broker."""
    app = celery_app(stack.settings)
    yield app
    app.close()
