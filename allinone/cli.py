"""The ``ncindex`` command line (click): ``up``, ``models``, ``webhooks``, ``doctor``, ``eval``.

Every command reads the same :class:`~ncindex.settings.Settings` from the environment
(``NCINDEX_*``) as the apps do.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from allinone.stopping import StopSignals
from ncindex import __version__
from ncindex.errors import NcindexError
from ncindex.settings import Settings
from ncindex.telemetry import configure_logging

if TYPE_CHECKING:
    from allinone.embedded import Embedded
    from ncindex.nextcloud.client import NextcloudClient


class _Commands(click.Group):
    """Reports configuration and Nextcloud errors as one line (exit 1), not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = "NCINDEX_" + "_".join(str(p) for p in first["loc"]).upper()
            raise click.ClickException(f"setting {name}: {first['msg']}") from None
        except (NcindexError, ValueError, KeyError) as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncindex")
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
    from ncindex.embedding.models import install_models

    paths = install_models(settings.model_dir)
    click.echo(f"dense model: {paths.dense_dir}\nsparse model: {paths.sparse_dir}")


@main.command()
@click.option("--no-sample", is_flag=True, help="Do not load the sample corpus (simulator only).")
@click.pass_obj
def up(settings: Settings, no_sample: bool) -> None:
    """Run everything in one process on the embedded engine (see README)."""
    from allinone import embedded
    from ncindex.errors import RedisTooOld

    # handlers first: a signal while starting stops it once it has started (the watchdog
    # bounds that too), instead of leaving a private redis-server or the store half-open
    signals = StopSignals(settings.shutdown_grace)
    try:
        try:
            running = embedded.start(settings, load_sample=not no_sample)
        except RedisTooOld as exc:
            raise click.ClickException(str(exc)) from exc
        if running.redis is not None:
            signals.children.append(running.redis.process.pid)
        _serve(running, settings, signals)
    finally:
        signals.restore()


def _serve(running: Embedded, settings: Settings, signals: StopSignals) -> None:
    """Print what a user needs, wait for a stop signal, stop."""
    url = running.url
    click.echo(f"\nncindex is up: {url}  (receiver {url}/hooks/nextcloud, search {url}/v1/search)")
    redis_owner = "a private redis-server" if running.redis else "NCINDEX_REDIS_URL or the default"
    click.echo(f"Redis: {running.settings.redis_url} ({redis_owner})")
    if running.webhooks is not None and running.webhooks.refused:
        click.echo("Webhooks Nextcloud refused (ncindex runs without them):")
        for line in running.webhooks.missing_lines():
            click.echo(f"  - {line}")
    for line in _webhook_lines(
        running, chosen_secret=bool(settings.webhook_secret.get_secret_value())
    ):
        click.echo(line)
    if running.simulator is not None:
        from ncindex.simulator.sample import SAMPLE_ACCOUNTS

        user, password = "alice", running.settings.password_for("alice")
        users = ", ".join(f"{uid} / {pw}" for uid, pw in SAMPLE_ACCOUNTS.items())
        click.echo(
            f"Serving the bundled sample Nextcloud at {running.settings.nextcloud_url} "
            f"({running.sample.documents if running.sample else 0} documents, indexing in the "
            f"background). Users and app passwords: {users}."
        )
        click.echo("Try:\n")
        body = json.dumps({"query": "vitamin D deficiency and bone health", "limit": 5})
        click.echo(
            f"  curl -s -u {user}:{password} -H 'Content-Type: application/json' \\\n"
            f"       -d '{body}' {url}/v1/search\n"
        )
    grace = running.settings.shutdown_grace
    click.echo(
        f"Stop with Ctrl-C or SIGTERM: running tasks get {grace:g} s to finish, the others go "
        "back to their queues; a second signal after that ends the process at once."
    )
    if running.sample is not None:
        threading.Thread(target=_report_sample, args=(running, signals), daemon=True).start()
    signals.wait()
    click.echo("stopping")
    running.close()
    click.echo("stopped")


def _webhook_lines(running: Embedded, *, chosen_secret: bool) -> list[str]:
    """What a user needs to post a webhook by hand: the receiver's URL, the secret header
    and its value (the variable's name when the user chose it), and a ``curl`` posting a
    ``NodeWrittenEvent`` envelope in webhook_listeners' format (``ncindex.ingest.events``;
    reference/nextcloud-api.md §1.2) — for a sample file when the simulator runs."""
    settings = running.settings
    header = settings.webhook_secret_header
    secret = (
        "$NCINDEX_WEBHOOK_SECRET" if chosen_secret else settings.webhook_secret.get_secret_value()
    )
    hook = f"{running.url}/hooks/nextcloud"
    file_id, user, path = 42, "alice", "/Documents/Plan.md"  # placeholders: one of your files
    sample = running.sample
    if sample is not None:
        user, path, file_id = next(
            (o, p, f) for o, p, f in sample.placements.values() if p.startswith("/Documents/")
        )
    envelope = {
        "event": {
            "node": {"id": file_id, "path": f"/{user}/files{path}"},
            "class": "OCP\\Files\\Events\\Node\\NodeWrittenEvent",
        },
        "user": {"uid": user, "displayName": user.capitalize()},
        "time": int(time.time()),
    }
    which = (
        "a sample file of " + user
        if sample is not None
        else "replace the id and path with a file of yours"
    )
    value = (
        "the value of NCINDEX_WEBHOOK_SECRET"
        if chosen_secret
        else f"{secret}  (random for this run; set NCINDEX_WEBHOOK_SECRET to choose it)"
    )
    return [
        f"Webhook receiver: POST {hook}",
        f"Secret header: {header}: {value}",
        f"Post a webhook by hand ({which}; answered 202):\n",
        f'  curl -s -H "{header}: {secret}" -H "Content-Type: application/json" \\\n'
        f"       -d {shlex.quote(json.dumps(envelope))} {hook}\n",
    ]


def _report_sample(running: Embedded, signals: StopSignals) -> None:
    """Say once when every sample document is current in the store
    (:meth:`~allinone.embedded.Embedded.sample_current`, seen twice 1 s apart)."""
    started = time.monotonic()
    seen = 0
    while not signals.wait(1.0):
        seen = seen + 1 if running.sample_current() else 0
        if seen == 2:
            seconds = time.monotonic() - started
            click.echo(
                f"Sample corpus indexed: {running.sample.documents} documents current in the "
                f"store after {seconds:.0f} s."
            )
            return


@main.group()
def webhooks() -> None:
    """Manage the webhook_listeners registrations pointing at this deployment."""


def _admin(settings: Settings) -> NextcloudClient:
    from ncindex.runtime import Services

    return Services(settings).account(settings.webhook_admin)


@webhooks.command("register")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.pass_obj
def webhooks_register(settings: Settings, as_json: bool) -> None:
    """Register one webhook per event class (idempotent).

    Prints each class with ``registered``, ``already`` or ``refused`` and Nextcloud's reason;
    exits 1 only when a class the index cannot work without (file created, written,
    deleted, renamed) is refused — an optional one is skipped with what it costs.
    """
    from ncindex.ingest.registration import register

    result = register(_admin(settings), settings)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "classes": [
                        {
                            "class": o.event_class,
                            "result": o.status,
                            "id": o.webhook_id,
                            "reason": o.reason,
                            "required": o.required,
                            "cost": o.cost,
                        }
                        for o in result.outcomes
                    ],
                    "removed": result.removed,
                    "ok": result.ok,
                }
            )
        )
    else:
        click.echo(result.table())
        if result.removed:
            click.echo(f"removed duplicate registrations: {result.removed}")
    if not result.ok:
        raise SystemExit(1)


@webhooks.command("list")
@click.pass_obj
def webhooks_list(settings: Settings) -> None:
    """List the registrations pointing at this deployment."""
    from ncindex.ingest.registration import list_registrations

    for hook in list_registrations(_admin(settings), settings):
        click.echo(f"{hook['id']}\t{hook['event']}\t{hook['uri']}")


@webhooks.command("remove")
@click.pass_obj
def webhooks_remove(settings: Settings) -> None:
    """Delete every registration pointing at this deployment."""
    from ncindex.ingest.registration import remove

    click.echo(json.dumps({"removed": remove(_admin(settings), settings)}))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the lines as a JSON list.")
@click.pass_obj
def doctor(settings: Settings, as_json: bool) -> None:
    """Check the configured Nextcloud: version, apps, accounts, webhooks, public URL.

    Prints one line per finding with a verdict (ok, warn, fail, note); exits 1 when a line
    fails.
    """
    from ncindex.doctor import failed, render, run_checks

    lines = run_checks(settings)
    if as_json:
        click.echo(
            json.dumps(
                [{"check": x.check, "verdict": x.verdict, "detail": x.detail} for x in lines]
            )
        )
    else:
        click.echo(render(lines))
    if failed(lines):
        raise SystemExit(1)


@main.command("eval")
@click.argument(
    "dataset", type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path)
)
@click.option(
    "--via",
    type=click.Choice(["library", "product", "both"]),
    default="library",
    show_default=True,
    help="library: the product's parts in-process (fast); product: simulator → webhooks → "
    "workers → /v1/search over HTTP (hybrid modes only); both: run both and compare.",
)
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["bm25", "dense", "hybrid_rrf", "hybrid_dbsf"]),
    help="Modes to evaluate (repeatable; default: all the path offers).",
)
@click.option(
    "--model",
    "model_names",
    multiple=True,
    help="Dense model to evaluate (repeatable, to compare models; default NCINDEX_DENSE_MODEL).",
)
@click.option("--split", default="test", show_default=True, help="qrels/<split>.tsv to use.")
@click.option("--queries", type=click.IntRange(1), help="Evaluate a subset of judged queries…")
@click.option("--docs", type=click.IntRange(1), help="…over a corpus cut to this many documents.")
@click.option(
    "--cache",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite file caching dense chunk vectors (library path) across runs.",
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def eval_command(
    settings: Settings,
    dataset: Path,
    via: str,
    modes: tuple[str, ...],
    model_names: tuple[str, ...],
    split: str,
    queries: int | None,
    docs: int | None,
    cache: Path | None,
    json_out: Path | None,
) -> None:
    """Retrieval quality on a BEIR-layout DATASET folder (corpus.jsonl, queries.jsonl,
    qrels/<split>.tsv): nDCG@10, Recall@10, Recall@100, MRR@10 and the zero-result rate per
    mode, under the current settings; per model with several --model options."""
    from evaluation import MODES, load_beir
    from evaluation.beir import DatasetError
    from evaluation.product import PRODUCT_MODES
    from evaluation.runner import run_library, run_product, table
    from ncindex.embedding.embedder import Embedder

    try:
        data = load_beir(dataset, split)
        if queries or docs:
            data = data.subset(queries or len(data.qrels), docs or len(data.corpus))
    except (DatasetError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{data.name}: {len(data.corpus)} documents, {len(data.qrels)} judged queries")
    report: dict[str, object] = {"dataset": data.name, "queries": len(data.qrels)}
    rows: dict[str, dict[str, float]] = {}
    echo = click.echo
    names = list(dict.fromkeys(model_names)) or [settings.dense_model]
    per_model: dict[str, dict[str, object]] = {}
    for name in names:
        run = settings.model_copy(update={"dense_model": name})
        embedder = Embedder(run)
        label = f"{name}: " if len(names) > 1 else ""
        out = per_model[name] = {}
        if via in ("library", "both"):
            wanted = list(modes) or list(MODES)
            metrics, facts = run_library(
                run, data, embedder=embedder, modes=wanted, cache_path=cache, echo=echo
            )
            out["library"] = {m: v.as_dict() for m, v in metrics.items()} | {"facts": facts}
            rows |= {f"{label}{m} (library)": v.as_dict() for m, v in metrics.items()}
        if via in ("product", "both"):
            wanted = [m for m in (modes or PRODUCT_MODES) if m in PRODUCT_MODES]
            if not wanted:
                raise click.ClickException(f"the product path runs only {', '.join(PRODUCT_MODES)}")
            metrics, facts = run_product(run, data, embedder=embedder, modes=wanted, echo=echo)
            out["product"] = {m: v.as_dict() for m, v in metrics.items()} | {"facts": facts}
            rows |= {f"{label}{m} (product)": v.as_dict() for m, v in metrics.items()}
    if len(names) == 1:
        report |= per_model[names[0]]
    else:
        report["models"] = per_model
    click.echo(table(rows))
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


_SCAN_TYPES = ("note", "file", "deck_card", "news_item")


@main.command()
@click.option("--user", "users", multiple=True, help="Account to scan (repeatable; default all).")
@click.option(
    "--doc-type",
    "doc_types",
    multiple=True,
    type=click.Choice(_SCAN_TYPES),
    help="Doc type to scan (repeatable; default every type with a scanner).",
)
@click.option(
    "--apply", is_flag=True, help="Enqueue the changes and store scan state (default: report)."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON report per scan, with changes.")
@click.pass_obj
def reconcile(
    settings: Settings,
    users: tuple[str, ...],
    doc_types: tuple[str, ...],
    apply: bool,
    as_json: bool,
) -> None:
    """Compare Nextcloud with the index and report what differs; --apply enqueues the fixes.

    Runs the scan code of the ``ncindex.reconcile_scan`` task in this process. A dry run
    (the default) enqueues nothing and leaves the stored scan state alone.
    """
    from ncindex.errors import StoreUnavailable, UnsupportedDocType
    from ncindex.index.indexing import Indexer
    from ncindex.ingest.queueing import celery_app
    from ncindex.runtime import Services
    from ncindex.sync.reconcile import Reconciler, scan_types

    services = Services(settings)
    unknown = [u for u in users if u not in settings.accounts]
    if unknown:
        raise click.UsageError(f"not a configured account: {', '.join(unknown)}")
    try:
        services.store  # noqa: B018  (open it now to report a busy embedded store clearly)
    except StoreUnavailable as exc:
        raise click.ClickException(
            f"cannot open the vector store ({exc}); the embedded store allows one process — "
            "stop `ncindex up` or use a Qdrant server (NCINDEX_QDRANT_URL)"
        ) from exc
    reconciler = Reconciler(services, Indexer(services), celery_app(settings) if apply else None)
    failed = False
    try:
        for doc_type in doc_types or [t.value for t in scan_types()]:
            for user in users or list(settings.accounts):
                try:
                    report = reconciler.scan(user, doc_type, apply=apply)
                except UnsupportedDocType as exc:
                    click.echo(f"{doc_type}: {exc.detail}", err=True)
                    break
                failed |= report.error is not None
                if as_json:
                    click.echo(json.dumps(report.to_json()))
                    continue
                click.echo(_describe(report))
    finally:
        if reconciler.producer is not None:
            reconciler.producer.close()  # type: ignore[attr-defined]
        services.close()
    if failed:
        raise SystemExit(1)


def _describe(report: object) -> str:
    from ncindex.sync.reconcile import ScanReport

    assert isinstance(report, ScanReport)
    head = f"{report.user} {report.doc_type}: "
    if report.error:
        return head + f"listing failed ({report.error}); nothing enqueued"
    if report.unavailable:
        return head + f"app not available ({report.unavailable}); skipped"
    counts = report.counts()
    changes = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "in sync"
    line = (
        f"{head}listed {report.listed}, indexed {report.indexed}, {report.requests} requests; "
        f"{changes}"
    )
    if report.guard:
        line += f"; guard {report.guard}"
    if report.forbidden:
        line += f"; {report.forbidden} folders not readable (403), skipped"
    if report.applied:
        line += f"; enqueued {report.enqueued}"
        if report.coalesced:
            line += f" ({report.coalesced} already pending)"
    else:
        line += f"; would enqueue {len(report.index) + len(report.remove)} (dry run)"
    return line


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@click.pass_obj
def status(settings: Settings, as_json: bool) -> None:
    """Queue depths, last scan per user and doc type, index lag, dead letters."""
    import redis as redis_lib

    from ncindex.sync.status import collect_status

    client = redis_lib.Redis.from_url(
        settings.redis_url, socket_timeout=5, socket_connect_timeout=2
    )
    try:
        data = collect_status(client, settings.names)
    except redis_lib.RedisError as exc:
        raise click.ClickException(f"Redis at {settings.redis_url}: {exc}") from exc
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(
        "queues: "
        + ", ".join(f"{k} {v}" for k, v in data["queues"].items())
        + f"; reserved {data['reserved']}"
    )
    click.echo(f"index lag: {data['index_lag_seconds']} s")
    if not data["scans"]:
        click.echo("scans: none recorded")
    for key, scan in data["scans"].items():
        changes = ", ".join(f"{k} {v}" for k, v in scan["changes"].items() if v) or "in sync"
        state = (
            f"failed: {scan['error']}"
            if scan.get("error")
            else f"app not available: {scan['unavailable']}"
            if scan.get("unavailable")
            else changes
        )
        age = scan["in_sync_age_seconds"]
        synced = "never in sync yet" if age is None else f"in sync {age} s ago"
        click.echo(
            f"scan {key}: at {scan['at']}, listed {scan['listed']}, {scan['requests']} requests, "
            f"{state}, {synced}"
        )
    letters = data["dead_letters"]
    click.echo(f"dead letters: {sum(e['size'] for e in letters.values()) if letters else 0}")
    for key, entry in letters.items():
        click.echo(f"  {key} ({entry['type']}, {entry['size']}): {entry['sample']}")
    refused = data["accounts_refused"]
    click.echo(f"accounts Nextcloud refuses (401): {len(refused)}")
    for user, entry in refused.items():
        click.echo(
            f"  {user}: since {entry.get('at')}, {entry.get('where', '')} — check its app "
            "password and its login name (NCINDEX_LOGINS)"
        )


@main.command()
@click.option("--model", "model", help="Build this dense model's collection, then switch to it.")
@click.option("--back", is_flag=True, help="Swap the live and the standby model (instant).")
@click.option("--finish", is_flag=True, help="Stop keeping the second model; drop its collection.")
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="With --model or --finish: wait up to this many seconds for the workers to be done.",
)
@click.pass_obj
def reindex(
    settings: Settings, model: str | None, back: bool, finish: bool, wait_seconds: float | None
) -> None:
    """Change the dense model without downtime; with no option, show the models.

    --model NAME: the workers build NAME's collection (its ONNX and tokenizer files in
    NCINDEX_MODEL_DIR/<last part of NAME>) while search keeps using the live model, then
    switch to it atomically; the old model stays current as the standby. --back switches
    back. --finish drops the second model. Compare models first with `ncindex eval DIR
    --model A --model B`.
    """
    from ncindex import names
    from ncindex.errors import ReindexError
    from ncindex.index.indexing import Indexer
    from ncindex.index.reindex import Reindexer, progress, require_model_files
    from ncindex.ingest.queueing import PUBLISH_RETRY, celery_app
    from ncindex.runtime import Services
    from ncindex.store import model_slug

    if sum((model is not None, back, finish)) > 1:
        raise click.UsageError("choose one of --model, --back, --finish")
    services = Services(settings)
    reindexer = Reindexer(services, Indexer(services))  # here only the pointers are used
    try:
        if back:
            moved = reindexer.back()
            click.echo(f"live: {moved.active}; standby: {moved.standby}")
            return
        if model is not None:
            require_model_files(settings, model)  # here, before a worker finds out
        if model is not None and reindexer.pointers().active == model_slug(model):
            raise click.ClickException(f"model {model!r} is already live")
        if model is not None or finish:
            before = progress(services).get("seq")
            task, kwargs = (
                (names.REINDEX_MODEL, {"model": model})
                if model is not None
                else (names.REINDEX_FINISH, {})
            )
            celery_app(settings).send_task(
                task, kwargs=kwargs, queue=names.INDEX, retry_policy=PUBLISH_RETRY
            )
            click.echo(f"queued {task} {kwargs or ''}".rstrip())
            if wait_seconds is not None:
                _wait_reindex(services, before, model is not None, wait_seconds)
        _show_models(reindexer.pointers(), progress(services))
    except ReindexError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        services.close()


def _wait_reindex(services: Any, before: str | None, build: bool, seconds: float) -> None:
    from ncindex.index.reindex import progress

    done = {"switched", "failed"} if build else {"dropped", "failed"}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = progress(services)
        if state.get("seq") != before and state.get("state") in done:
            if state["state"] == "failed":
                raise click.ClickException(f"reindex failed: {state.get('error')}")
            return
        time.sleep(1)
    raise click.ClickException(f"not done after {seconds:g} s; see `ncindex reindex`")


def _show_models(pointers: Any, state: dict[str, str]) -> None:
    click.echo(f"live: {pointers.active or 'none yet'}")
    if pointers.standby:
        click.echo(f"standby: {pointers.standby} (kept current; `ncindex reindex --back`)")
    if pointers.building:
        click.echo(f"building: {pointers.building}")
    if state:
        line = ", ".join(f"{k} {state[k]}" for k in sorted(state))
        click.echo(f"last step: {line}")
