"""Beat's task for the search page's sign-ins: Login Flow app passwords nothing will use are
deleted in Nextcloud (:mod:`ncindex.web.revocations`)."""

from __future__ import annotations

from celery import shared_task

from ncindex import names
from ncindex.web.revocations import revocations
from workers.base import NcindexTask


@shared_task(bind=True, base=NcindexTask, name=names.REVOKE_APP_PASSWORDS, ignore_result=True)
def revoke_app_passwords(self: NcindexTask) -> int:
    """Beat, every :data:`~ncindex.web.revocations.RETRY_SECONDS`: delete the app passwords of
    due entries no live session holds (:meth:`~ncindex.web.revocations.Revocations.sweep`).
    Returns how many were deleted; a Redis failure raises (the next tick sweeps again)."""
    return revocations(self.services).sweep()
