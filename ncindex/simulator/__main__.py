"""``python -m ncindex.simulator``: serve the Nextcloud simulator on its own, to point a
deployment of ncindex at it as at a real Nextcloud (``NCINDEX_NEXTCLOUD_URL``).

It prints the URL, then reads Python statements from standard input with ``sim`` (the
:class:`~ncindex.simulator.NextcloudSimulator`) in scope: what an admin does in the web
interface or with ``occ`` (``sim.delete_user("carol")``, ``sim.disable_user("bob")``,
``sim.share("alice", "/Shared", "bob")``), as ``docs/SIMULATOR.md`` lists. End of input stops
it. Users can also be made with ``--user``; everything else a client does goes over HTTP.
"""

from __future__ import annotations

import argparse
import code

from ncindex.simulator.server import serve_simulator
from ncindex.simulator.simulator import NextcloudSimulator


def _user(spec: str) -> tuple[str, str, str | None]:
    """``uid:app-password[:login name]`` → its parts; argparse turns the ValueError into a
    usage error naming the option."""
    uid, sep, rest = spec.partition(":")
    password, _, login = rest.partition(":")
    if not uid or not sep or not password:
        raise ValueError(spec)
    return uid, password, login or None


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m ncindex.simulator",
        description="Serve the Nextcloud simulator on its own; then read Python statements "
        "(with `sim` in scope) from standard input until its end.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="listen port (0: a free one)")
    parser.add_argument(
        "--web-root", default="", help="serve under a sub-path, e.g. /nextcloud (none)"
    )
    parser.add_argument("--version", default="33.0.2", help="Nextcloud version, 30-34 (33.0.2)")
    parser.add_argument(
        "--user",
        type=_user,
        action="append",
        default=[],
        metavar="UID:APP_PASSWORD[:LOGIN]",
        help="a user (repeatable); LOGIN when the login name is not the uid",
    )
    parser.add_argument(
        "--admin", action="append", default=[], metavar="UID", help="make UID an admin"
    )
    parser.add_argument(
        "--delivery-delay",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="webhook deliveries wait this long, as background jobs do (0.5)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Serve until standard input ends (or Ctrl-C)."""
    args = build_parser().parse_args(argv)
    sim = NextcloudSimulator(
        delivery_delay=(args.delivery_delay, args.delivery_delay),
        version=args.version,
        web_root=args.web_root,
    )
    for uid, password, login in args.user:
        sim.add_user(uid, password, admin=uid in args.admin, login_name=login)
    server = serve_simulator(sim, host=args.host, port=args.port)
    print(f"Nextcloud simulator {args.version} at {server.url}", flush=True)
    try:
        code.interact(banner="", local={"sim": sim}, exitmsg="")
    except KeyboardInterrupt:
        pass
    finally:
        server.close(close_simulator=True)


if __name__ == "__main__":
    main()
