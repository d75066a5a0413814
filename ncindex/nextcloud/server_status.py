"""What Nextcloud's ``/status.php`` says of the server, for ``ncindex doctor`` and ``ncindex
status``.

nextcloud/server ``status.php`` answers, without authentication, a JSON object of
``installed``, ``maintenance``, ``needsDbUpgrade`` (``OCP\\Util::needUpgrade()``: the code is
newer than the database), ``version`` (dotted numbers), ``versionstring``
(``OC_Util::getVersionString``, the release as shown, ``"31.0.4"``), ``edition`` and
``productname`` (read at a stored commit of the file; newer servers add ``extendedSupport``).
It answers in every state the other routes refuse, which is why it is asked: ``lib/base.php``
``OC::checkInstalled`` lets it through on a server not installed, and ``OC::handleRequest``
(which it does not run) answers every other route 503 in maintenance mode
(``checkMaintenanceMode``) or while the upgrade waits (``printUpgradePage``). ``OC::init``
answers it 400 ``{"error": "Trusted domain error.", "code": 15}`` when the host asked is not
in ``trusted_domains``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import httpx

UNCONFIGURED = "not configured: NCINDEX_NEXTCLOUD_URL is unset (`ncindex up` serves its simulator)"
"""The summary of a status without a Nextcloud URL."""

CHECK_URL = (
    "check NCINDEX_NEXTCLOUD_URL: the address Nextcloud's web interface is reached at, with "
    "its sub-path if it has one (https://host/nextcloud)"
)
"""What to do when ``NCINDEX_NEXTCLOUD_URL`` leads nowhere or to something else."""


@dataclass(frozen=True)
class ServerStatus:
    """One answer of ``/status.php`` at ``url``: ``error`` says why there is none (not
    reachable, or not a JSON object with HTTP 200); ``version`` is ``versionstring`` (or
    ``version`` without it). Not ``configured``: no Nextcloud URL is set (``ncindex up`` then
    serves its simulator), nothing was asked and nothing is wrong."""

    url: str
    configured: bool = True
    error: str | None = None
    installed: bool = False
    maintenance: bool = False
    needs_db_upgrade: bool = False
    version: str = ""

    @property
    def problem(self) -> str | None:
        """Why Nextcloud cannot serve the indexer now, or ``None`` when it can."""
        if not self.configured:
            return None
        if self.error is not None:
            return self.error
        if not self.installed:
            return "Nextcloud is not installed"
        if self.maintenance:
            return f"Nextcloud {self.version} is in maintenance mode"
        if self.needs_db_upgrade:
            return f"Nextcloud {self.version} waits for its upgrade to run (occ upgrade)"
        return None

    def summary(self) -> str:
        """One line for people: the problem, or ``Nextcloud <version> at <url>``."""
        if not self.configured:
            return UNCONFIGURED
        return self.problem or " ".join(filter(None, ("Nextcloud", self.version, "at", self.url)))

    def as_dict(self) -> dict[str, Any]:
        """The fields, ``problem`` and ``summary``, for JSON."""
        return asdict(self) | {"problem": self.problem, "summary": self.summary()}


def server_status(
    http: httpx.Client | None, url: str | None, timeout: float | None = None
) -> ServerStatus:
    """``GET /status.php`` with ``http`` (whose base URL is ``url``; ``None`` for both when
    no Nextcloud is configured: answered without a request), within ``timeout`` seconds
    (``None``: the client's own). Never raises: a connection failure or a wrong answer is the
    status's ``error``."""
    if http is None or not url:
        return ServerStatus(url or "", configured=False)
    try:
        response = http.get(
            "/status.php", timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        )
    except httpx.HTTPError as exc:
        return ServerStatus(
            url, error=f"not reachable at {url}: {exc} — {CHECK_URL}, and that Nextcloud runs there"
        )
    try:
        body = response.json()
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        body = None
    if response.status_code == 400 and isinstance(body, dict) and body.get("code") == 15:
        host = response.request.url.host
        return ServerStatus(
            url,
            error=f"Nextcloud at {url} does not trust the host {host!r}: add it to "
            "trusted_domains in its config.php",
        )
    # status.php answers 500 without a body when Nextcloud itself fails (nextcloud/server
    # status.php: its `catch (Exception $ex)` sets STATUS_INTERNAL_SERVER_ERROR); a proxy in
    # front answers 502/503/504 with a page of its own: either way no "is it Nextcloud?"
    if response.status_code >= 500:
        return ServerStatus(
            url,
            error=f"{url}/status.php answered HTTP {response.status_code}: unavailable — "
            "Nextcloud, or a proxy in front of it, fails: their logs say why",
        )
    if response.status_code != 200 or not isinstance(body, dict):
        shape = "" if isinstance(body, dict) else " without a JSON object (is it Nextcloud?)"
        return ServerStatus(
            url, error=f"{url}/status.php answered HTTP {response.status_code}{shape} — {CHECK_URL}"
        )
    return ServerStatus(
        url,
        installed=bool(body.get("installed")),
        maintenance=bool(body.get("maintenance")),
        needs_db_upgrade=bool(body.get("needsDbUpgrade")),
        version=str(body.get("versionstring") or body.get("version") or ""),
    )
