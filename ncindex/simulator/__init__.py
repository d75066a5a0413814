"""The Nextcloud simulator: an in-memory Nextcloud that answers in Nextcloud's real formats.

Tests and the demo talk to it over real HTTP::

    from ncindex.simulator import NextcloudSimulator, serve_simulator

    sim = NextcloudSimulator()
    sim.add_user("alice", password="alice-pw", display_name="Alice Adams")
    fid = sim.put_file("alice", "/Notes/Plan.md", b"# Plan")
    with serve_simulator(sim) as server:
        ...  # server.url, e.g. http://127.0.0.1:PORT

See ``/work/shared/reference/nextcloud-api.md`` §7 for the behaviour it reproduces.
"""

from ncindex.simulator.deck import DeckError
from ncindex.simulator.eventfilter import FilterError, mongo_match
from ncindex.simulator.events import WEBHOOK_COMPATIBLE_EVENTS
from ncindex.simulator.faults import Fault, FaultInjector
from ncindex.simulator.phpjson import php_json_encode
from ncindex.simulator.sample import (
    SAMPLE_ACCOUNTS,
    SAMPLE_ADMIN,
    SAMPLE_USERS,
    SampleSummary,
    load_sample_corpus,
    sample_documents,
    sample_queries,
)
from ncindex.simulator.server import SimulatorServer, serve_simulator
from ncindex.simulator.simulator import NextcloudSimulator
from ncindex.simulator.state import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    StateError,
)
from ncindex.simulator.webhooks import Delivery, JobArgumentError

__all__ = [
    "SAMPLE_ACCOUNTS",
    "SAMPLE_ADMIN",
    "SAMPLE_USERS",
    "WEBHOOK_COMPATIBLE_EVENTS",
    "AlreadyExistsError",
    "ConflictError",
    "DeckError",
    "Delivery",
    "Fault",
    "FaultInjector",
    "FilterError",
    "ForbiddenError",
    "JobArgumentError",
    "NextcloudSimulator",
    "NotFoundError",
    "SampleSummary",
    "SimulatorServer",
    "StateError",
    "load_sample_corpus",
    "mongo_match",
    "php_json_encode",
    "sample_documents",
    "sample_queries",
    "serve_simulator",
]
