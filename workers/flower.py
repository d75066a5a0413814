"""Entry module for ``celery -A workers.flower flower``: the producer app built from the
environment's settings (:func:`ncindex.ingest.queueing.celery_app`, no task code), so Flower
reads the deployment's queues and events under its namespace (``NCINDEX_NAMESPACE``).

Flower shows every task's arguments (user ids, paths) and can revoke tasks, so it refuses to
start (exit status 1, one line) when it would listen beyond loopback without a login
(:func:`exposure`): the Helm chart and ``deploy/compose.yaml`` require ``FLOWER_BASIC_AUTH``,
and ``deploy/Procfile`` binds it to ``127.0.0.1`` unless ``FLOWER_ADDRESS`` says otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ncindex.ingest.queueing import celery_app
from ncindex.settings import settings_or_exit
from ncindex.urls import is_loopback_host


def exposure(argv: Sequence[str]) -> str | None:
    """Why the Flower that ``argv`` (``sys.argv`` of ``celery … flower [options]``) starts
    would serve anyone who reaches its port, or ``None``: it asks for a login (basic auth or
    OAuth: ``--basic-auth``, ``--auth``), listens on a loopback address or a unix socket, or
    ``argv`` runs no ``flower`` command. Flower's options are read as Flower reads them
    (``flower.command``: its ``FLOWER_*`` variables, then the configuration file and the
    command line), into Flower's own option set."""
    if "flower" not in argv:
        return None
    from flower.command import apply_env_options, apply_options
    from tornado.options import options

    apply_env_options()
    apply_options(argv[0], list(argv[list(argv).index("flower") + 1 :]))
    if options.basic_auth or options.auth or options.unix_socket:
        return None
    address = str(options.address or "")
    if is_loopback_host(address):
        return None
    return (
        f"Flower would listen on {address or 'every interface'} without a login: whoever "
        "reaches its port sees every task's arguments and may revoke tasks. Set "
        "FLOWER_BASIC_AUTH=user:password (as the Helm chart and deploy/compose.yaml do), or "
        "listen on loopback (FLOWER_ADDRESS=127.0.0.1, deploy/Procfile's default)"
    )


app = celery_app(settings_or_exit())
if (problem := exposure(sys.argv)) is not None:
    raise SystemExit(f"ncindex: {problem}")
