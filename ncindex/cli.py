"""The ``ncindex`` command line (click): ``up``, ``models``, ``webhooks register|list|remove``.

Every command reads the same :class:`~ncindex.settings.Settings` from the environment
(``NCINDEX_*``) as the apps do.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from typing import TYPE_CHECKING

import click

from ncindex.settings import Settings
from ncindex.telemetry import configure_logging

if TYPE_CHECKING:
    from ncindex.embedded import Embedded
    from ncindex.nextcloud.client import NextcloudClient


@click.group()
@click.pass_context
def main(ctx: click.Context) -> None:
    """ncindex: a verified hybrid-search index of a Nextcloud."""
    settings = Settings()
    configure_logging(settings.log_level, json_lines=settings.log_json)
    ctx.obj = settings


@main.command()
@click.pass_obj
def models(settings: Settings) -> None:
    """Assemble the offline embedding models into NCINDEX_MODEL_DIR (no download)."""
    from ncindex.models import install_models

    paths = install_models(settings.model_dir)
    click.echo(f"dense model: {paths.dense_dir}\nsparse model: {paths.sparse_dir}")


@main.command()
@click.option("--no-sample", is_flag=True, help="Do not load the sample corpus (simulator only).")
@click.pass_obj
def up(settings: Settings, no_sample: bool) -> None:
    """Run everything in one process on the embedded engine (see README)."""
    from ncindex import embedded

    running = embedded.start(settings, load_sample=not no_sample)
    url = running.url
    click.echo(f"\nncindex is up: {url}  (receiver {url}/hooks/nextcloud, search {url}/v1/search)")
    if running.simulator is not None:
        user, password = "alice", running.settings.password_for("alice")
        click.echo(
            f"Serving the bundled sample Nextcloud at {running.settings.nextcloud_url} "
            f"({running.sample.documents if running.sample else 0} documents, indexing in the "
            "background)."
        )
        click.echo("Try:\n")
        body = json.dumps({"query": "vitamin D deficiency and bone health", "limit": 5})
        click.echo(
            f"  curl -s -u {user}:{password} -H 'Content-Type: application/json' \\\n"
            f"       -d '{body}' {url}/v1/search\n"
        )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if running.sample is not None:
        threading.Thread(target=_report_sample, args=(running, stop), daemon=True).start()
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        click.echo("stopping")
        running.close()


def _report_sample(running: Embedded, stop: threading.Event) -> None:
    """Say once when the sample corpus is fully indexed."""
    started = time.monotonic()
    while not stop.wait(2.0):
        if running.documents_indexed() >= running.sample.documents:
            seconds = time.monotonic() - started
            click.echo(
                f"Sample corpus indexed: {running.sample.documents} documents in {seconds:.0f} s."
            )
            return


@main.group()
def webhooks() -> None:
    """Manage the webhook_listeners registrations pointing at this deployment."""


def _admin(settings: Settings) -> NextcloudClient:
    from ncindex.runtime import Services

    return Services(settings).account(settings.webhook_admin)


@webhooks.command("register")
@click.pass_obj
def webhooks_register(settings: Settings) -> None:
    """Register one webhook per event class (idempotent)."""
    from ncindex.webhooks import register

    result = register(_admin(settings), settings)
    click.echo(
        json.dumps({"created": result.created, "kept": result.kept, "removed": result.removed})
    )


@webhooks.command("list")
@click.pass_obj
def webhooks_list(settings: Settings) -> None:
    """List the registrations pointing at this deployment."""
    from ncindex.webhooks import list_registrations

    for hook in list_registrations(_admin(settings), settings):
        click.echo(f"{hook['id']}\t{hook['event']}\t{hook['uri']}")


@webhooks.command("remove")
@click.pass_obj
def webhooks_remove(settings: Settings) -> None:
    """Delete every registration pointing at this deployment."""
    from ncindex.webhooks import remove

    click.echo(json.dumps({"removed": remove(_admin(settings), settings)}))
