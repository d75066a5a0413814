"""Settings for every ncindex process, read once from the environment (prefix ``NCINDEX_``).

One :class:`Settings` object is built at start-up and handed to the app factories
(``webhook_receiver.create_app``, ``search_api.create_app``) and to the Celery app factory
(``workers.celery_app.create_celery``); nothing reads the environment after that.
Tests build their own ``Settings(...)`` instead of patching globals.

Every field below is documented in README.md ("Settings") with its default and unit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import limits
import pydantic_settings
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from ncindex.globs import glob_regex
from ncindex.names import DEFAULT_NAMESPACE, NAMESPACE_PATTERN, Names

U32_MAX = 4_294_967_295
"""The largest value of Qdrant's 32-bit parameters (shards, replication, write consistency),
used as the upper bound of every integer of the collection layout (the others are 64-bit in
Qdrant): a mistyped huge number is refused here with its variable named, not by the engine at
start (a value past 2^64 made Qdrant Edge raise ``OverflowError``)."""

_MIME_PATTERN = re.compile(r"[A-Za-z0-9*][A-Za-z0-9!#$&^_.+*-]*/[A-Za-z0-9*][A-Za-z0-9!#$&^_.+*-]*")
"""An entry of ``NCINDEX_INDEX_MIME_TYPES``: ``type/subtype`` (RFC 6838 names), where ``*``
stands for any run of characters (``text/*``)."""

RECONCILE_PERIODS = {"note": 900, "file": 1800, "deck_card": 1800, "news_item": 3600}
"""The default seconds between reconcile scans per doc type (``NCINDEX_RECONCILE_PERIODS``
gives others for some or all of them)."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The log levels ``NCINDEX_LOG_LEVEL`` takes (any case): Python's ``logging`` names."""


class Settings(BaseSettings):
    """All configuration, validated by pydantic; bad values raise ``pydantic.ValidationError``.

    Accounts are a mapping of Nextcloud user id to app password (``NCINDEX_ACCOUNTS`` as a
    JSON object, or ``NCINDEX_ACCOUNTS_FILE`` naming a JSON file, e.g. a mounted Kubernetes
    Secret, whose values may also be ``{"password": …, "login": …}``). An account whose login
    name is not its user id (LDAP, e-mail logins) names it in ``logins`` (or the file's
    ``login``): Nextcloud accepts an app password only with the login name it was created
    under, while deliveries and paths name the user id.

    Exactly one vector store is used: a Qdrant server (``qdrant_url``) or the embedded
    engine on disk (``qdrant_path``); with neither, the embedded engine runs under ``data_dir``.
    """

    # NaN and infinity are refused as such ("finite number"), not by a misleading bound; an
    # error never repeats the value, which may be a password (NCINDEX_ACCOUNTS)
    model_config = SettingsConfigDict(
        env_prefix="NCINDEX_", extra="ignore", allow_inf_nan=False, hide_input_in_errors=True
    )

    # --- Nextcloud -------------------------------------------------------------------------
    nextcloud_url: str | None = Field(
        None, description="Base URL of Nextcloud; unset ⇒ `ncindex up` serves the simulator."
    )
    accounts: dict[str, SecretStr] = Field(
        default_factory=dict, description="User id → app password of the accounts to index."
    )
    accounts_file: Path | None = Field(
        None,
        description='JSON file with the accounts mapping; a value may be `{"password": …, '
        '"login": …}`.',
    )
    logins: dict[str, str] = Field(
        default_factory=dict,
        description="User id → login name, for accounts that sign in with another name than "
        "their user id (LDAP, e-mail); requests authenticate with it.",
    )
    admin_user: str | None = Field(
        None, description="Account used for webhook registration (defaults to the first account)."
    )
    http_timeout: float = Field(10.0, gt=0, description="Nextcloud request timeout, seconds.")
    http_max_connections: int = Field(20, ge=1, description="Connection pool size per client.")
    verify_tls: bool = Field(True, description="Verify Nextcloud's TLS certificate.")

    # --- Webhooks ---------------------------------------------------------------------------
    webhook_secret: SecretStr = Field(
        SecretStr(""), description="Shared secret Nextcloud sends in `webhook_secret_header`."
    )
    webhook_secret_header: str = Field(
        "X-Ncindex-Secret",
        # an HTTP field name (RFC 9110 5.1: a token); an empty or spaced name was registered
        # with Nextcloud as given, and every delivery was then refused 401
        pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
        description="Header carrying it.",
    )
    webhook_max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest accepted delivery body, bytes."
    )
    public_url: str = Field(
        "http://127.0.0.1:8080",
        description="URL at which Nextcloud reaches this deployment (webhook target base).",
    )

    # --- Queues -----------------------------------------------------------------------------
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0", description="Broker and cache Redis (7.0 or later)."
    )
    namespace: str = Field(
        DEFAULT_NAMESPACE,
        pattern=NAMESPACE_PATTERN,
        description="First segment of every Redis key of this deployment (see ncindex.names).",
    )
    task_soft_time_limit: int = Field(240, ge=1, description="Task soft time limit, seconds.")
    task_time_limit: int = Field(300, ge=1, description="Task hard time limit, seconds.")
    visibility_timeout: int = Field(
        900, ge=1, description="Redis redelivery timeout for unacked tasks, seconds."
    )
    lock_ttl: int = Field(
        360,
        ge=1,
        description="Lock expiry of a document and of a user's scan of a doc type, seconds "
        "(above the hard limit).",
    )
    shutdown_grace: float = Field(
        20.0,
        ge=0,
        description="`ncindex up`: seconds running tasks may take to finish after SIGTERM or "
        "SIGINT before they go back to their queues and the process exits.",
    )

    # --- Vector store -----------------------------------------------------------------------
    qdrant_url: str | None = Field(None, description="Qdrant server URL (server engine).")
    qdrant_api_key: SecretStr | None = Field(None, description="Qdrant server API key.")
    qdrant_path: Path | None = Field(None, description="Folder of the embedded engine.")
    collection_prefix: str = Field("ncindex", description="Collection name prefix.")
    qdrant_shard_number: int = Field(
        1,
        ge=1,
        le=U32_MAX,
        description="Shards of a collection ncindex creates (Qdrant server; on a cluster, a "
        "multiple of its nodes).",
    )
    qdrant_replication_factor: int = Field(
        1,
        ge=1,
        le=U32_MAX,
        description="Copies of each shard in a collection ncindex creates (Qdrant server).",
    )
    qdrant_write_consistency_factor: int = Field(
        1,
        ge=1,
        le=U32_MAX,
        description="Replicas that must confirm a write (Qdrant server; at most the replication "
        "factor).",
    )
    qdrant_hnsw_m: int = Field(
        16,
        ge=0,
        le=U32_MAX,
        description="HNSW links per point of the whole-collection graph (0: none).",
    )
    qdrant_hnsw_ef_construct: int = Field(
        100, ge=4, le=U32_MAX, description="HNSW candidate list size while building the graph."
    )
    qdrant_hnsw_payload_m: int = Field(
        16,
        ge=0,
        le=U32_MAX,
        description="HNSW links per point of the graph built per tenant (`acl` value, the "
        "tenant index); 0: none.",
    )
    qdrant_full_scan_threshold_kb: int = Field(
        60_000,
        ge=10,
        le=U32_MAX,
        description="A filtered dense search scans the points the filter lets through instead "
        "of walking the HNSW graph when their vectors are under this many kilobytes (Qdrant's "
        "hnsw_config.full_scan_threshold: at least 10, default 10,000; 60,000 KB is 40,000 "
        "384-dimension vectors; at the depth ncindex prefetches a scan of 22,000 measured "
        "faster than the graph, benchmarks/RESULTS.md, Scale).",
    )
    qdrant_sparse_full_scan_threshold: int = Field(
        5_000,
        ge=1,
        le=U32_MAX,
        description="A filtered BM25 search scores the points the filter lets through instead "
        "of walking the inverted index when the filter may let fewer than this many through "
        "(Qdrant's sparse index full_scan_threshold, points).",
    )
    qdrant_sparse_full_scan_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Embedded engine (Qdrant Edge): each optimisation raises the BM25 "
        "full-scan threshold of the segments it builds to this share of the shard's points, "
        "if above `qdrant_sparse_full_scan_threshold` (an existing store takes it at its next "
        "optimisation). Walking the inverted index costs what its posting lists hold, which "
        "grows with the collection; scoring the points a filter lets through costs what they "
        "are (benchmarks/scale_reading.md). 0: the fixed threshold alone.",
    )
    qdrant_indexing_threshold_kb: int = Field(
        20000,
        ge=0,
        le=U32_MAX,
        description="A segment's vectors are indexed (HNSW, quantisation) once they exceed this "
        "many kilobytes (Qdrant's optimizers indexing_threshold); 0: never.",
    )
    qdrant_max_segment_size_kb: int = Field(
        0,
        ge=0,
        le=U32_MAX,
        description="Largest segment, in kilobytes of its largest vector field, that the "
        "optimisers merge into (Qdrant's optimizers max_segment_size): it bounds what a later "
        "optimisation rebuilds, at the price of more segments (README, Collection layout). "
        "0: the engine's own.",
    )
    qdrant_hnsw_ef: int = Field(
        128,
        ge=1,
        le=U32_MAX,
        description="HNSW search beam (candidates kept while walking the graph; Qdrant uses at "
        "least the number of hits asked for). Higher: closer to exact search, slower.",
    )
    qdrant_oversampling: float = Field(
        2.0,
        ge=1.0,
        le=16.0,
        description="With int8 quantisation: candidates drawn from the quantised vectors per "
        "hit asked for, then rescored on the originals; never more than qdrant_hnsw_ef in all, "
        "so a prefetch deeper than that draws just what it asks.",
    )
    qdrant_hnsw_ef_per_candidate: float = Field(
        1.0,
        ge=1.0,
        le=16.0,
        description="HNSW beam per candidate a dense search draws (hits asked for × "
        "oversampling, at most qdrant_hnsw_ef): a deep prefetch gets a beam of at least this "
        "many times its candidates, so its tail, which the fusion normalises over, stays "
        "close to exact.",
    )
    qdrant_acorn: bool = Field(
        False,
        description="ACORN filtered HNSW search (Qdrant 1.16+): also walks neighbours of "
        "neighbours when the filter cuts the graph; closer to exact under selective filters, "
        "many times slower (benchmarks/RESULTS.md, Scale).",
    )
    qdrant_quantization: Literal["int8", "none"] = Field(
        "int8",
        description="Dense vector quantisation: scalar int8 kept in RAM, search rescored on the "
        "original vectors; `none` keeps float32 only.",
    )
    qdrant_on_disk_vectors: bool = Field(
        True, description="Original dense vectors on disk (memory-mapped) rather than in RAM."
    )
    qdrant_on_disk_payload: bool = Field(True, description="Payloads on disk rather than in RAM.")
    qdrant_on_disk_payload_index: bool = Field(
        True,
        description="Payload indexes memory-mapped on disk rather than read into RAM when a "
        "collection opens: the embedded engine opens a shard ~4x faster (its optimiser swaps "
        "in a new shard while searches and writes wait) and holds less memory, but filtered "
        "searches cost more at a million points (benchmarks/RESULTS.md, Scale). A Qdrant "
        "server's collections get `on_disk` indexes too (less memory; unmeasured there).",
    )
    qdrant_preload_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Embedded engine: when a shard opens (at start, and after each background "
        "optimisation swaps one in), read its payloads, original vectors, BM25 vectors and "
        "payload indexes into the page cache in the background, in that order, skipping any "
        "file that would pass this share of the memory the machine reports available "
        "(MemAvailable: not a container's limit); 0 (default) reads nothing ahead. At a "
        "million chunks of one user the engine query's median fell by a fifth and the "
        "search's by 4 %, its p95 not at all, and the search process's resident memory rose "
        "by 0.7 GB of mapped file pages (README, Collection layout).",
    )
    edge_optimize_after_points: int = Field(
        20_000,
        ge=0,
        le=U32_MAX,
        description="Embedded engine: optimise (merge segments, build HNSW) in the background "
        "once this many points are outside indexed segments; 0: never (every search scans "
        "the points its filter lets through).",
    )
    edge_optimize_check_seconds: float = Field(
        60.0,
        ge=1.0,
        le=86_400.0,
        description="Embedded engine: how often the optimiser checks, seconds (1 to 86,400).",
    )
    data_dir: Path = Field(Path("var"), description="Working folder of `ncindex up`.")

    # --- Embedding and chunking -------------------------------------------------------------
    model_dir: Path = Field(
        Path.home() / ".cache" / "ncindex" / "models",
        description="Folder holding the offline embedding models (built by `ncindex models`).",
    )
    dense_model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        description="Dense model of a new index (later: `ncindex reindex --model`).",
    )
    model_check_seconds: float = Field(
        2.0, gt=0, le=60, description="How often a process re-reads which model is live, seconds."
    )
    embed_batch_size: int = Field(16, ge=1, description="Most chunks in one embedding batch.")
    index_batch_docs: int = Field(
        32,
        ge=1,
        le=256,
        description="Most files and notes one indexing task takes when many are sent at once "
        "(a scan, a folder walk, a tag event): one embedding run, one write and one recheck "
        "for all of them. 1 ⇒ one task per document.",
    )
    embed_threads: int | None = Field(
        None,
        ge=1,
        description="ONNX threads per model call; unset ⇒ all cores. A worker runs cores ÷ "
        "this many calls at once: 1 suits a threads pool.",
    )
    chunk_tokens: int = Field(
        200, ge=16, le=256, description="Largest chunk, in the dense model's tokens."
    )
    chunk_overlap_tokens: int = Field(32, ge=0, description="Overlap between chunks, tokens.")
    max_document_chars: int = Field(
        2_000_000, ge=1000, description="Extracted text beyond this is cut, characters."
    )
    max_download_bytes: int = Field(
        50_000_000, ge=1024, description="Files larger than this are not downloaded, bytes."
    )

    # --- Search -----------------------------------------------------------------------------
    search_default_limit: int = Field(10, ge=1, le=100, description="Results per page.")
    search_overfetch: int = Field(
        3, ge=1, le=10, description="Candidates fetched per result slot before verification."
    )
    prefetch_limit: int = Field(
        100,
        ge=10,
        le=1000,
        description="Fewest candidates of a search's BM25 prefetch (a 10-result page asks 360).",
    )
    dense_prefetch_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="The dense prefetch's depth as a share of the BM25 prefetch's, rounded "
        "up (a 10-result page: 180 of 360). At scale the dense half costs what its depth does "
        "(its HNSW beam is as wide); measured in benchmarks/RESULTS.md, Fusion tuning and Scale.",
    )
    fusion: Literal["rrf", "dbsf"] = Field(
        "dbsf", description="Default fusion (DBSF measured best; benchmarks/RESULTS.md)."
    )
    bm25_feedback_docs: int = Field(
        3,
        ge=0,
        le=20,
        description="Hybrid searches fused by DBSF expand the BM25 query with terms of this "
        "many best documents of a first pass (pseudo-relevance feedback); 0 ⇒ off.",
    )
    bm25_feedback_first_depth: int = Field(
        60,
        ge=1,
        le=3000,
        description="Depth of the BM25 branch in the first pass of a search expanded by "
        "feedback (at most the pool): that pass only picks the feedback documents, and the "
        "expanded BM25 branch is asked as deep as the pool. A BM25 branch that walks its posting "
        "lists (a filter letting most points through) costs more the deeper it is; measured in "
        "benchmarks/RESULTS.md, Fusion tuning and Scale.",
    )
    verify_concurrency: int = Field(8, ge=1, description="Parallel verification requests.")
    user_cache_seconds: int = Field(
        60, ge=0, description="How long a resolved credential → user id is cached, seconds."
    )
    ui_session_seconds: int = Field(
        8 * 3600,
        ge=60,
        description="How long a search-page sign-in lasts without use, seconds.",
    )
    search_rate_limit: str = Field(
        "600/minute",
        description="Requests per caller to /v1/search, context, /rcp and /mcp, one shared "
        "count (flask-limiter syntax, e.g. `600/minute;20/second`); empty ⇒ unlimited.",
    )
    mcp_allowed_hosts: list[str] = Field(
        default_factory=lambda: [
            "127.0.0.1",
            "127.0.0.1:*",
            "localhost",
            "localhost:*",
            "[::1]",
            "[::1]:*",
        ],
        description="`Host` values the MCP server (/mcp) answers (DNS-rebinding protection of "
        "the MCP SDK's transport; `name:*` allows `name` with any port or none); others are "
        "421 `host_not_allowed`; empty ⇒ no check.",
    )
    mcp_allowed_origins: list[str] = Field(
        default_factory=lambda: [
            origin
            for host in ("127.0.0.1", "localhost", "[::1]")
            for origin in (f"http://{host}", f"http://{host}:*")  # port 80 sends none
        ],
        description="`Origin` values the MCP server accepts from browsers (a request without "
        "`Origin` is not checked; `scheme://name:*` allows any port or none); others are 403 "
        "`origin_not_allowed` while `mcp_allowed_hosts` is set. They are also the only origins "
        "whose browser-based MCP clients get CORS answers (never `*`).",
    )

    # --- Notes ------------------------------------------------------------------------------
    notes_path: str = Field("Notes", description="Default notes folder, relative to files root.")
    note_extensions: list[str] = Field(
        default_factory=lambda: ["txt", "org", "markdown", "md", "note"],
        description="File extensions the Notes app treats as notes (Notes 6.0.x); a leading "
        "dot and the case are ignored.",
    )

    deck_webhooks: bool = Field(
        False,
        description="Also register Deck card and board-share events (Deck ≥ 1.18 only; an "
        "older Deck refuses them, which `webhooks register` reports and skips).",
    )

    # --- Pipeline ---------------------------------------------------------------------------
    debounce_seconds: float = Field(
        2.0, ge=0, description="Events for one document within this window coalesce, seconds."
    )
    index_include_globs: list[str] = Field(
        default_factory=lambda: ["**"],
        description="Path globs (files root relative; `**` crosses folders, `*` does not, a "
        "glob without a leading `/` matches at any depth) a file must match to be indexed.",
    )
    index_exclude_globs: list[str] = Field(
        default_factory=list, description="Path globs never indexed (exclusion wins)."
    )
    index_mime_types: list[str] = Field(
        default_factory=lambda: [
            "text/*",
            "application/xhtml+xml",
            "application/pdf",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/vnd.oasis.opendocument.text",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            "application/vnd.oasis.opendocument.presentation",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "application/vnd.oasis.opendocument.spreadsheet",
            "application/csv",
            "application/epub+zip",
            "application/rtf",
            "message/rfc822",
            "image/png",
            "image/jpeg",
            "image/tiff",
            "image/webp",
        ],
        description="MIME types (`text/*` patterns allowed) of files indexed; a generic type "
        "(`application/octet-stream`) is judged by the extension.",
    )
    index_required_tags: list[str] = Field(
        default_factory=list,
        description="System tag gate: when set, only files (and notes) carrying one of these tags "
        "are indexed.",
    )
    index_excluded_tags: list[str] = Field(
        default_factory=list,
        description="Files (and notes) carrying one of these system tags are never "
        "indexed (exclusion wins over the gate).",
    )
    max_pdf_pages: int = Field(
        500,
        ge=1,
        description="PDF pages, slides, sheets or e-book chapters read at most per document.",
    )
    max_sheet_rows: int = Field(
        20_000, ge=1, description="Rows read at most per spreadsheet sheet or CSV/TSV file."
    )
    extract_max_seconds: float = Field(
        60.0,
        gt=0,
        description="Wall-clock budget for reading one document (pages, slides, OCR), seconds; "
        "below task_soft_time_limit.",
    )
    ocr_enabled: bool = Field(
        True,
        description="OCR images (PNG, JPEG, TIFF, WebP) and PDF pages without a text layer with "
        "Tesseract, where it is installed (`/readyz` and `ncindex doctor` say when it is not).",
    )
    ocr_languages: str = Field(
        "eng",
        pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
        description="Tesseract languages, `+`-joined (`eng+deu`); each needs its "
        "`tesseract-ocr-<lang>` package.",
    )
    ocr_max_pages: int = Field(
        20, ge=1, description="Pages (scanned PDF pages, TIFF frames) OCR'd at most per document."
    )
    dead_letter_after: int = Field(
        3,
        ge=1,
        description="Deliveries of one document that end without finishing (a killed worker) "
        "before it is parked in the dead letter.",
    )

    # --- Reconciliation ---------------------------------------------------------------------
    reconcile_periods: dict[str, int] = Field(
        default_factory=lambda: dict(RECONCILE_PERIODS),
        description="Seconds between reconcile scans, per doc type (JSON object); a type it "
        "leaves out keeps its default period (`reconcile_disable` turns a scan off).",
    )
    reconcile_disable: list[str] = Field(
        default_factory=list, description="Doc types whose periodic scan is turned off."
    )
    reconcile_grace_seconds: int = Field(
        900,
        ge=0,
        description="A document missing from listings this long is re-checked and evicted, "
        "seconds (0 ⇒ on the first scan that misses it).",
    )
    reconcile_max_removal_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A scan that would remove more than this share of a user's documents of "
        "one type is held until a second scan agrees.",
    )
    reconcile_guard_min_docs: int = Field(
        10, ge=0, description="Removals up to this many documents are never held."
    )
    reconcile_full_walk_seconds: int = Field(
        86400,
        ge=0,
        description="A file scan walks every folder, unchanged ones too, when the last full "
        "walk is this old, seconds (repairs what changes no folder etag: a tag whose webhook "
        "was lost, a document lost from the index; 0 ⇒ every scan).",
    )
    reconcile_notes_chunk_size: int = Field(
        200, ge=1, description="Notes per page of the Notes list (`chunkSize`)."
    )
    reconcile_page_requests: int = Field(
        100,
        ge=1,
        description="Requests to Nextcloud one reconcile scan task makes (a folder PROPFIND, a "
        "Notes chunk) before it keeps the listing so far in Redis and hands the rest to the "
        "next task: a big account's scan is paged, and resumes at the last page kept after a "
        "worker dies.",
    )

    # --- Runtime ----------------------------------------------------------------------------
    log_level: str = Field(
        "INFO",
        description="Log level (DEBUG, INFO, WARNING, ERROR). Unset, `ncindex up` logs warnings "
        "and errors once it is up and prints the indexing's progress instead.",
    )
    log_json: bool = Field(True, description="JSON log lines (false: console rendering).")
    host: str = Field("127.0.0.1", description="`ncindex up` listen address.")
    port: int = Field(8080, ge=0, le=65535, description="`ncindex up` listen port.")

    @field_validator("nextcloud_url", "qdrant_url", "public_url")
    @classmethod
    def _http_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or (not value and info.field_name != "public_url"):
            return value  # unset (public_url has no unset: an empty one is refused below)
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if info.field_name == "nextcloud_url" and (parts.username or parts.password):
            # every link that opens a result in Nextcloud starts with it (open_url, MCP's url),
            # and each account signs in with its own app password
            raise ValueError(
                "must not hold a user name or password (accounts go in NCINDEX_ACCOUNTS)"
            )
        if info.field_name == "public_url" and (
            parts.query or parts.fragment or parts.path.rstrip("/").endswith("/hooks/nextcloud")
        ):
            # /hooks/nextcloud is appended to it: the full delivery URL was registered as
            # …/hooks/nextcloud/hooks/nextcloud, a path the receiver does not serve
            raise ValueError(
                "must be the deployment's base URL, without /hooks/nextcloud or ?query"
            )
        return value.rstrip("/")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        # the schemes redis-py's from_url, kombu's Redis transport and the rate limiter's
        # storage all read; anything else failed later, in each process, with a traceback
        parts = urlsplit(value)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        if parts.scheme != "unix" and not parts.hostname:
            raise ValueError("must name a host, such as redis://127.0.0.1:6379/0")
        return value

    @field_validator("qdrant_path", mode="before")
    @classmethod
    def _empty_path_is_unset(cls, value: object) -> object:
        # an empty NCINDEX_QDRANT_PATH would be Path("."), the working folder
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("data_dir", "model_dir", mode="before")
    @classmethod
    def _empty_folder_is_default(cls, value: object, info: ValidationInfo) -> object:
        # an empty NCINDEX_DATA_DIR or NCINDEX_MODEL_DIR was Path("."): the store, or the
        # models built where they are missing, went into whatever the working folder was
        if isinstance(value, str) and not value.strip():
            field = cls.model_fields[str(info.field_name)]
            return field.get_default(call_default_factory=True)
        return value

    @field_validator("index_include_globs", "index_exclude_globs")
    @classmethod
    def _compiled_globs(cls, value: list[str]) -> list[str]:
        # a glob that does not compile raised re.error in every file's classification
        for number, pattern in enumerate(value):
            try:
                glob_regex(pattern)
            except re.error as exc:
                raise ValueError(f"glob {number} is not a valid path glob: {exc.msg}") from None
        return value

    @field_validator("index_mime_types")
    @classmethod
    def _mime_patterns(cls, value: list[str]) -> list[str]:
        # an entry that is no type/subtype (``garbage``, ``text``) matched no file, silently
        for number, pattern in enumerate(value):
            if not _MIME_PATTERN.fullmatch(pattern):
                raise ValueError(
                    f"entry {number} is not a MIME type or pattern such as text/markdown or text/*"
                )
        return value

    @field_validator("index_required_tags", "index_excluded_tags")
    @classmethod
    def _tag_names(cls, value: list[str]) -> list[str]:
        # no system tag has an empty name: a required "" let no file through, silently
        if any(not name.strip() for name in value):
            raise ValueError("a tag name is empty")
        return value

    @field_validator("note_extensions")
    @classmethod
    def _bare_extensions(cls, value: list[str]) -> list[str]:
        # compared with a file's extension without its dot, in lower case: ".md" or "MD"
        # matched no note, and notes were indexed as plain files
        bare = [ext.strip().removeprefix(".").lower() for ext in value]
        if any(not ext for ext in bare):
            raise ValueError("an extension is empty")
        return bare

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r} (known: {', '.join(LOG_LEVELS)})")
        return level

    @field_validator("search_rate_limit")
    @classmethod
    def _parse_rate_limit(cls, value: str) -> str:
        if value.strip():
            items = limits.parse_many(value)  # ValueError for a bad limit string
            if any(item.amount < 1 for item in items):
                # 0/minute answered every search 429; empty is the way to turn it off
                raise ValueError("a limit of 0 requests refuses every request (empty: none)")
        return value

    @field_validator("reconcile_periods", "reconcile_disable")
    @classmethod
    def _known_doc_types(cls, value: Any) -> Any:
        known = {"note", "file", "deck_card", "news_item"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown doc types {unknown}; known: {sorted(known)}")
        if isinstance(value, dict) and any(int(v) < 10 for v in value.values()):
            raise ValueError("reconcile periods must be at least 10 seconds")
        if isinstance(value, dict):
            # {"file": 600} changes the file scans' period; beat scheduled only the types
            # listed, so the others' periodic scans were gone without a word
            return RECONCILE_PERIODS | value
        return value

    @model_validator(mode="after")
    def _load_accounts_file(self) -> Settings:
        if self.accounts_file is not None:
            try:
                raw = json.loads(self.accounts_file.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ValueError(
                    f"accounts_file {self.accounts_file} cannot be read: {exc.strerror or exc}"
                ) from None
            except ValueError as exc:  # UnicodeDecodeError and json.JSONDecodeError among them
                raise ValueError(f"accounts_file {self.accounts_file} is not JSON: {exc}") from None
            if not isinstance(raw, dict):
                raise ValueError("accounts_file must hold a JSON object of user id → app password")
            passwords, logins = _account_entries(raw)
            self.accounts = passwords | self.accounts
            self.logins = logins | self.logins
        for user, password in self.accounts.items():
            # an empty user id or app password was taken: every request of it was refused 401
            if not user.strip():
                raise ValueError("accounts: a user id is empty (NCINDEX_ACCOUNTS or the file)")
            if not password.get_secret_value():
                raise ValueError(
                    f"accounts: {user!r} has an empty app password (NCINDEX_ACCOUNTS or the file)"
                )
        if set(self.logins) - set(self.accounts):
            # a login of no account (a user id misspelt) was ignored: that account kept
            # signing in with its user id, refused 401
            raise ValueError(
                "logins names a user id that is not a configured account: each key of "
                "NCINDEX_LOGINS must be one of NCINDEX_ACCOUNTS (or the accounts file)"
            )
        if self.admin_user and self.admin_user not in self.accounts:
            # webhook registration authenticates with the admin's app password from accounts
            raise ValueError(
                "admin_user is not a configured account: "
                "NCINDEX_ADMIN_USER must name one of NCINDEX_ACCOUNTS (or the accounts file)"
            )
        if self.qdrant_url and self.qdrant_path:
            raise ValueError(
                "qdrant_url and qdrant_path are both set: NCINDEX_QDRANT_URL (a Qdrant server) "
                "and NCINDEX_QDRANT_PATH (the embedded engine) exclude each other"
            )
        if self.task_soft_time_limit >= self.task_time_limit:
            raise ValueError("task_soft_time_limit must be below task_time_limit")
        if self.task_time_limit >= self.visibility_timeout:
            raise ValueError("task_time_limit must be below visibility_timeout")
        if self.lock_ttl <= self.task_time_limit:
            raise ValueError("lock_ttl must exceed task_time_limit")
        if self.extract_max_seconds >= self.task_soft_time_limit:
            # the task would be stopped (SoftTimeLimitExceeded: the document parked as failed)
            # before the extraction gave up on its own and indexed what it had read
            raise ValueError(
                "extract_max_seconds must be below task_soft_time_limit: a document still "
                "being read at NCINDEX_TASK_SOFT_TIME_LIMIT is parked as failed, not indexed "
                "with what NCINDEX_EXTRACT_MAX_SECONDS let it read"
            )
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunk_overlap_tokens must be below chunk_tokens")
        if self.qdrant_write_consistency_factor > self.qdrant_replication_factor:
            raise ValueError(
                "qdrant_write_consistency_factor must not exceed qdrant_replication_factor"
            )
        return self

    def password_for(self, user: str) -> str:
        """The app password of ``user``; raises ``KeyError`` for an account not configured."""
        return self.accounts[user].get_secret_value()

    def login_for(self, user: str) -> str:
        """The login name account ``user`` authenticates with (its user id unless ``logins``
        names another)."""
        return self.logins.get(user) or user

    @property
    def names(self) -> Names:
        """The Redis keys of this deployment (:class:`~ncindex.names.Names` of ``namespace``)."""
        return Names(self.namespace)

    @property
    def webhook_admin(self) -> str:
        """Account that registers webhooks: ``admin_user`` or the first configured account."""
        if self.admin_user:
            return self.admin_user
        if not self.accounts:
            raise ValueError("no Nextcloud accounts configured (NCINDEX_ACCOUNTS)")
        return next(iter(self.accounts))


def _account_entries(raw: dict[str, Any]) -> tuple[dict[str, SecretStr], dict[str, str]]:
    """An accounts file's ``user id → password`` or ``user id → {"password", "login"}``
    entries as passwords and login names; ``ValueError`` names a bad entry."""
    passwords: dict[str, SecretStr] = {}
    logins: dict[str, str] = {}
    for user, value in raw.items():
        if isinstance(value, dict):
            password, login = value.get("password"), value.get("login")
            if not isinstance(password, str) or not password:
                raise ValueError(f'accounts_file: {user!r} needs a non-empty "password"')
            if login is not None and (not isinstance(login, str) or not login):
                raise ValueError(f'accounts_file: {user!r}: "login" must be a non-empty string')
            unknown = sorted(set(value) - {"password", "login"})
            if unknown:
                raise ValueError(f"accounts_file: {user!r}: unknown keys {unknown}")
            passwords[str(user)] = SecretStr(password)
            if login:
                logins[str(user)] = login
        else:
            passwords[str(user)] = SecretStr(str(value))
    return passwords, logins


def url_without_password(url: str) -> str:
    """``url`` with its user and password left out (a Redis URL may carry a password), for
    messages: ``redis://:pw@host:6379/0`` → ``redis://host:6379/0``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


class SettingsError(ValueError):
    """Raised by :func:`load_settings` when the environment's settings do not validate; the
    message is one line naming every bad ``NCINDEX_`` variable, never a value
    (:func:`settings_problems`)."""


def settings_problems(exc: ValidationError) -> str:
    """Every error of ``exc`` (raised by :class:`Settings`) on one line, ``"; "``-separated:
    each as ``setting NCINDEX_<NAME>[<part>…]: <message> [<pydantic error type>]``, a rule
    across settings as ``settings: …``; never the value, which may be a secret."""
    return "; ".join(
        (
            f"setting NCINDEX_{str(error['loc'][0]).upper()}"
            + "".join(f"[{part}]" for part in error["loc"][1:])
            if error["loc"]
            else "settings"
        )
        + f": {error['msg']} [{error['type']}]"
        for error in exc.errors()
    )


def load_settings() -> Settings:
    """The settings of an app module (``search_api.wsgi``, ``webhook_receiver.wsgi``,
    ``mcp_server.asgi``) and of the ``ncindex`` command from the environment. Raises
    :class:`SettingsError`
    (a ``ValueError``) with :func:`settings_problems`'s line and no chained pydantic error:
    in a gunicorn worker an exception, unlike ``SystemExit``, stops gunicorn ("Worker failed
    to boot") instead of booting the worker again and again."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(settings_problems(exc)) from None
    except pydantic_settings.SettingsError as exc:
        # a JSON-valued setting (NCINDEX_ACCOUNTS, …) whose text is not JSON; pydantic-settings
        # names the field, not the variable
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"NCINDEX_{field.group(1).upper()}" if field else "a JSON-valued setting"
        raise SettingsError(f"setting {name}: not valid JSON [json_invalid]") from None


def settings_or_exit() -> Settings:
    """The settings of a process's entry point (gunicorn's configuration file, the Celery
    worker, beat and Flower): :func:`load_settings`, but a bad setting raises ``SystemExit``
    (status 1) whose message is ``ncindex: `` and the line, so the process stops with that line
    instead of a traceback."""
    try:
        return load_settings()
    except SettingsError as exc:
        raise SystemExit(f"ncindex: {exc}") from None
