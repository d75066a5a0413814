"""The search page in a real browser: Playwright driving Debian's ``chromium`` against
``ncindex up`` (a child process) and the simulator (in this process, over HTTP, so the test
can play the user approving the sign-in and look at the app passwords afterwards).

One module-scoped deployment; the steps run in order in one test per user, as a person would
use the page. With ``NCINDEX_SCREENSHOTS=<folder>`` the main states are saved there as PNG
(``docs/screenshots`` holds one such run); otherwise into the test's temporary folder.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import redis
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Route,
    expect,
    sync_playwright,
)

from ncindex.documents import titled_text
from ncindex.redis_server import free_port
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.simulator.server import SimulatorServer
from ncindex.text.snippets import make_snippet, snippet

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 86_400
XSS_TITLE = "<img src=x onerror=window.__xss=1>"
XSS_TEXT = (
    "Lighthouse lens incident <script>window.__xss=2</script> "
    '<img src=x onerror="window.__xss=3"> was logged by the keeper.'
)


class Deployment:
    """The simulator with alice's and bob's documents, and ``ncindex up`` in front of it."""

    def __init__(
        self,
        tmp: Path,
        redis_url: str,
        model_dir: Path,
        *,
        documents: bool = True,
        setup: Callable[[NextcloudSimulator], object] | None = None,
        **env: str,
    ) -> None:
        """``setup`` (the simulator) runs after the users are added and the documents
        written, before ``ncindex up`` starts: what it adds is there for the first scan."""
        self.sim = NextcloudSimulator(delivery_delay=(0.0, 0.0))
        for user, password in PASSWORDS.items():
            self.sim.add_user(user, password, user.title(), admin=user == "admin")
        if documents:
            self.write_documents()
        if setup is not None:
            setup(self.sim)
        self.sim_server: SimulatorServer = serve_simulator(self.sim, host="127.0.0.1", port=0)
        self.url = f"http://127.0.0.1:{free_port()}"
        self.redis_url = redis_url
        self.namespace = f"ui-test-{tmp.name.lower()}"
        env = os.environ | {
            "PYTHONPATH": str(ROOT),
            "NCINDEX_NEXTCLOUD_URL": self.sim_server.url,
            "NCINDEX_ACCOUNTS": json.dumps(PASSWORDS),
            "NCINDEX_ADMIN_USER": "admin",
            "NCINDEX_WEBHOOK_SECRET": "ui-test-secret",
            "NCINDEX_REDIS_URL": redis_url,
            "NCINDEX_NAMESPACE": self.namespace,
            "NCINDEX_DATA_DIR": str(tmp / "data"),
            "NCINDEX_MODEL_DIR": str(model_dir),
            "NCINDEX_PORT": self.url.rsplit(":", 1)[1],
            "NCINDEX_LOG_LEVEL": "WARNING",
            **env,
        }
        self.log = (tmp / "ncindex-up.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from allinone.cli import main; main()", "up"],
            env=env,
            cwd=tmp,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def write_documents(self) -> None:
        """alice's notes and files (one with a hostile name and text) and bob's, with tags."""
        sim = self.sim
        self.ids = {
            "plan": sim.put_file(
                "alice",
                "/Projects/Lighthouse/plan.md",
                b"Lighthouse plan: polish the lens and replace the brass fittings.",
                mtime=T0,
            ),
            "note": sim.put_file(
                "alice",
                "/Notes/Lighthouse.md",
                b"# Lighthouse\n\nRemember the **foghorn oil** and the lens cloth.\n\n"
                b"- a _spare_ [wick](https://example.org/wick)",
                mtime=T0 + 40 * DAY,
            ),
            "archive": sim.put_file(
                "alice",
                "/Archive/old-lens.md",
                b"Archived lighthouse lens measurements from the old tower.",
                mtime=T0 + 80 * DAY,
            ),
            "xss": sim.put_file(
                "alice", f"/Projects/{XSS_TITLE}.md", XSS_TEXT.encode(), mtime=T0 + 10 * DAY
            ),
            "bob": sim.put_file(
                "bob",
                "/Bob Private/soup.md",
                b"The lighthouse keeper's lens-cleaning soup recipe.",
                mtime=T0 + 20 * DAY,
            ),
        }
        archive, secret = sim.create_tag("archive"), sim.create_tag("bob-secret")
        sim.assign_tag("alice", "/Archive/old-lens.md", archive)
        sim.assign_tag("bob", "/Bob Private/soup.md", secret)

    def wait_ready(self, timeout: float = 120) -> None:
        """Until ``/readyz`` answers 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "ncindex up exited"
            try:
                if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError("ncindex up did not become ready in time")

    def wait_indexed(self, timeout: float = 120) -> None:
        """Until ``/v1/tags`` shows both users' tags (every document indexed with its tags)."""
        deadline = time.monotonic() + timeout
        expected = {"alice": ["archive"], "bob": ["bob-secret"]}
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "ncindex up exited"
            try:
                seen = {
                    user: httpx.get(
                        f"{self.url}/v1/tags", auth=(user, PASSWORDS[user]), timeout=5
                    ).json()["tags"]
                    for user in expected
                }
                folders = httpx.get(
                    f"{self.url}/v1/folders", auth=("alice", "alice-pw"), timeout=5
                ).json()["folders"]
                if seen == expected and "/Projects/Lighthouse" in folders and "/Notes" in folders:
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        raise AssertionError("ncindex up did not index the documents in time")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        self.sim_server.close(close_simulator=True)


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, model_dir: Path
) -> Iterator[Deployment]:
    running = Deployment(tmp_path_factory.mktemp("ui"), redis_url, model_dir)
    try:
        running.wait_indexed()
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("NCINDEX_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def titles(page: Page) -> list[str]:
    return sorted(page.locator("#results .title").all_text_contents())


def expect_titles(page: Page, wanted: list[str]) -> None:
    expect(page.locator("#results .title")).to_have_count(len(wanted))
    assert titles(page) == sorted(wanted)


def remove_chip(page: Page, label: str) -> None:
    page.get_by_role("button", name=f"Remove filter {label}").click()


ALICE_ALL = ["plan.md", "Lighthouse", "old-lens.md", XSS_TITLE + ".md"]


def test_alice_signs_in_with_login_flow_filters_and_signs_out(
    deployment: Deployment, browser: Browser, shots: Path
) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.url) if r.url.endswith("/v1/search") else None)
    response = page.goto(deployment.url + "/")
    assert response is not None
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    expect(page.locator("#signed-out")).to_be_visible()
    page.screenshot(path=shots / "signed-out.png")

    # Login Flow v2: the page opens Nextcloud's login page, the user approves there
    with context.expect_page() as popup_info:
        page.get_by_role("button", name="Sign in with Nextcloud").click()
    popup = popup_info.value
    approve_in_nextcloud(popup, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    app_passwords = deployment.sim.tree.user("alice").passwords
    assert len(app_passwords) == 2  # hers and the one the flow made for ncindex
    # the credential is server-side: the page's scripts see a session cookie they cannot read
    assert page.evaluate("document.cookie") == ""
    cookie = next(c for c in context.cookies() if c["name"] == "ncindex_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

    # search with the keyboard; the page asks for each result's explain
    page.locator("#q").fill("lighthouse lens")
    with page.expect_response(lambda r: r.url.endswith("/v1/search")) as answered:
        page.keyboard.press("Enter")
    assert answered.value.request.post_data_json == {
        "query": "lighthouse lens",
        "explain": True,
        "limit": 10,
    }
    answer = answered.value.json()
    expect_titles(page, ALICE_ALL)
    assert page.locator("#results .snippet mark").count() > 0
    # the document whose title and text hold <script> and <img onerror> stays inert text
    xss = page.locator("#results li", has_text="onerror=window.__xss=1").first
    assert xss.locator(".title").text_content() == XSS_TITLE + ".md"
    assert "<script>" in (xss.locator(".snippet").text_content() or "")
    assert page.locator("#results img, #results script").count() == 0
    assert page.evaluate("window.__xss") is None and dialogs == []
    plan = page.locator("#results li", has_text="polish the lens")
    href = plan.locator(".title").get_attribute("href")
    assert href == f"{deployment.sim_server.url}/index.php/f/{deployment.ids['plan']}"
    note = page.locator("#results li", has_text="foghorn oil").locator(".title")
    assert note.get_attribute("href") == (
        f"{deployment.sim_server.url}/index.php/apps/notes/note/{deployment.ids['note']}"
    )
    # a note's Markdown is not shown as syntax; its marks stay on the words they marked
    note_snippet = page.locator("#results li", has_text="foghorn oil").locator(".snippet")
    expect(note_snippet).to_have_text(
        "Lighthouse Remember the foghorn oil and the lens cloth. - a spare wick"
    )
    expect(note_snippet.locator("mark")).to_have_text(["Lighthouse", "lens"])
    # a date to the minute as the user's locale writes it; the full time in the title
    modified = plan.locator("time.modified")
    assert modified.get_attribute("datetime") == "2026-01-01T00:00:00.000Z"
    assert re.search(r"\d:\d\d:\d\d", modified.get_attribute("title") or "")
    on_screen = modified.text_content() or ""
    assert re.search(r"\d:\d\d", on_screen) and not re.search(r"\d:\d\d:\d\d", on_screen)
    assert on_screen == page.evaluate(
        "new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'short'})"
        ".format(new Date('2026-01-01T00:00:00Z'))"
    )
    # the folder and tag lists say how to pick several
    expect(page.locator("#pickers-hint")).to_be_visible()
    for picker in ("#folders", "#tags"):
        expect(page.locator(picker)).to_have_accessible_description(
            re.compile(r"^To pick several, hold Ctrl")
        )
    page.screenshot(path=shots / "results.png", full_page=True)

    # "Why it matched": the server's ranks in each branch, fused score and matched terms
    plan_answer = next(r for r in answer["results"] if r["doc_id"] == str(deployment.ids["plan"]))
    why = plan_answer["explain"]
    assert why["dense"] and why["sparse"]  # "lighthouse lens" is in plan.md: both branches
    explain = plan.locator(".explain")
    expect(explain.locator("dl")).not_to_be_visible()
    explain.get_by_text("Why it matched").click()
    expect(explain.locator("dl")).to_be_visible()
    rows = dict(
        zip(
            explain.locator("dt").all_text_contents(),
            explain.locator("dd").all_text_contents(),
            strict=True,
        )
    )
    feedback = ["Feedback words"] if why["feedback_terms"] else []
    assert list(rows) == ["Dense", "BM25", "Fused score", "Matched words", *feedback]
    for label, branch in (("Dense", why["dense"]), ("BM25", why["sparse"])):
        shown = re.fullmatch(r"rank (\d+), score (\S+)", rows[label])
        assert shown, rows[label]
        assert (int(shown[1]), float(shown[2])) == (branch["rank"], branch["score"])
    assert float(rows["Fused score"]) == why["fused_score"]
    # the terms are stems ("len"); their offsets into the snippet's text give the words shown
    plain = html.unescape(re.sub(r"</?mark>", "", plan_answer["snippet"]))
    words = [plain[t["start"] : t["end"]] for t in why["matched_terms"]]
    assert {w.lower() for w in words} == {"lighthouse", "lens"}
    first_of_each = [w for i, w in enumerate(words) if w.lower() not in map(str.lower, words[:i])]
    assert rows["Matched words"] == ", ".join(first_of_each)

    # doc-type chip
    page.get_by_label("Notes").check()
    expect_titles(page, ["Lighthouse"])
    remove_chip(page, "Type: Notes")
    expect_titles(page, ALICE_ALL)
    assert not page.get_by_label("Notes").is_checked()

    # modified-after chip; an inverted range is refused before sending
    page.locator("#after").fill("2026-02-01T00:00")
    expect_titles(page, ["Lighthouse", "old-lens.md"])
    sent = len(searches)
    page.locator("#before").fill("2026-01-15T00:00")
    expect(page.locator("#status")).to_contain_text("must be earlier")
    page.wait_for_timeout(300)
    assert len(searches) == sent  # refused before sending
    page.locator("#before").fill("")
    remove_chip(page, "After 2026-02-01 00:00")
    expect_titles(page, ALICE_ALL)

    # folder chips: the caller's own folders, multi-select
    folders = page.locator("#folders option").all_text_contents()
    assert "/Projects/Lighthouse" in folders and "/Bob Private" not in folders
    page.locator("#folders").select_option(["/Projects/Lighthouse", "/Archive"])
    expect_titles(page, ["plan.md", "old-lens.md"])
    remove_chip(page, "Folder: /Archive")
    expect_titles(page, ["plan.md"])
    remove_chip(page, "Folder: /Projects/Lighthouse")
    expect_titles(page, ALICE_ALL)

    # tag chip
    assert page.locator("#tags option").all_text_contents() == ["archive"]
    page.locator("#tags").select_option("archive")
    expect_titles(page, ["old-lens.md"])
    remove_chip(page, "Tag: archive")
    expect_titles(page, ALICE_ALL)

    # advanced: fusion as a chip; the URL holds query and filters, a reload restores them
    page.locator("#advanced summary").click()
    page.locator("#fusion").select_option("rrf")
    page.locator("#folders").select_option(["/Projects"])
    expect_titles(page, ["plan.md", XSS_TITLE + ".md"])
    expect(page.get_by_role("button", name="Remove filter Fusion: RRF")).to_be_visible()
    assert "q=lighthouse+lens" in page.url and "folder=%2FProjects" in page.url
    page.screenshot(path=shots / "filters.png", full_page=True)
    page.reload()
    expect_titles(page, ["plan.md", XSS_TITLE + ".md"])
    assert page.locator("#q").input_value() == "lighthouse lens"

    # show context: the neighbouring chunks, as text
    page.locator("#results li", has_text="polish the lens").get_by_role(
        "button", name="Show context"
    ).click()
    context_box = page.locator("#results li", has_text="polish the lens").locator(".context")
    expect(context_box).to_contain_text("replace the brass fittings")
    page.screenshot(path=shots / "context.png", full_page=True)

    # phone width
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=shots / "phone.png", full_page=True)
    page.set_viewport_size({"width": 1100, "height": 900})

    # nothing found: there are no news items in /Projects
    page.get_by_label("News").check()
    expect(page.locator("#status")).to_contain_text("No results")
    expect(page.locator("#results li")).to_have_count(0)
    page.screenshot(path=shots / "empty.png")

    # sign-out deletes the app password in Nextcloud, and the session
    sign_out_deleting_the_app_password(page, deployment)
    expect(page.locator("#signed-out")).to_be_visible()
    page.screenshot(path=shots / "signed-out-after.png")
    context.close()


def test_bob_with_a_typed_app_password_never_sees_alices_folders_or_tags(
    deployment: Deployment, browser: Browser
) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(deployment.url + "/")
    page.get_by_label("User name").fill("bob")
    page.get_by_label("App password").fill("wrong")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.locator("#status")).to_contain_text("did not accept")
    page.get_by_label("App password").fill(PASSWORDS["bob"])
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.locator("#user-name")).to_have_text("Signed in as bob")
    expect(page.locator("#tags option")).to_have_count(1)
    assert page.locator("#tags option").all_text_contents() == ["bob-secret"]
    # the folder list arrives by its own request: waited for, as the tags are
    expect(page.locator("#folders option")).to_have_text(["/Bob Private"])
    search(page, "lighthouse lens")
    expect_titles(page, ["soup.md"])
    # a shared search link names alice's folder: bob's page shows it, the index finds nothing
    # and the page says, in its own words (its pickers, no endpoint), that the folder holds
    # nothing bob can read, as it would a folder nobody has
    page.goto(deployment.url + "/?q=lighthouse&folder=%2FProjects")
    expect(page.locator("#status")).to_have_text(
        "No results. No document you can read is in the folder “/Projects”: pick one from Folders."
    )
    # bob's app password is revoked in Nextcloud: the next search ends the session plainly
    flows = deployment.sim.app_state["login_flows"]
    assert flows.delete_app_password("bob", PASSWORDS["bob"])
    try:
        page.goto(deployment.url + "/?q=lighthouse+lens")
        expect(page.locator("#status")).to_contain_text("Your sign-in ended")
        expect(page.locator("#signed-out")).to_be_visible()
    finally:
        # the module's later tests sign bob in: they passed only while the search API's
        # credential cache (NCINDEX_USER_CACHE_SECONDS, 60 s) still held bob's old sign-in
        deployment.sim.add_app_password("bob", PASSWORDS["bob"])
    context.close()


def test_rate_limited_state_is_said_plainly(
    tmp_path: Path, redis_url: str, model_dir: Path, browser: Browser, shots: Path
) -> None:
    """A real per-caller limit of 4 requests a minute: the sign-in (counted against its login
    name), folders, tags and the first search use it up, the next search is refused 429 — the
    page says when to retry."""
    with bob_without_documents(
        tmp_path, redis_url, model_dir, browser, NCINDEX_SEARCH_RATE_LIMIT="4/minute"
    ) as page:
        search(page, "lighthouse")
        expect(page.locator("#status")).to_contain_text("No results")
        page.keyboard.press("Enter")
        expect(page.locator("#status")).to_contain_text("Too many searches: try again in")
        page.screenshot(path=shots / "rate-limited.png")


@contextlib.contextmanager
def bob_without_documents(
    tmp_path: Path, redis_url: str, model_dir: Path, browser: Browser, **env: str
) -> Iterator[Page]:
    """A page signed in as bob on a deployment of its own (``env`` its settings) without
    documents, its lists loaded; the deployment is closed afterwards."""
    running = Deployment(tmp_path, redis_url, model_dir, documents=False, **env)
    try:
        running.wait_ready()
        page = browser.new_context().new_page()
        open_signed_in(page, running.url, "bob")
        expect(page.locator("#tags option")).to_have_text(["No tags on your documents"])
        yield page
    finally:
        running.close()


def test_a_nextcloud_that_is_down_is_named(
    tmp_path: Path, redis_url: str, model_dir: Path, browser: Browser
) -> None:
    """Nextcloud stops answering while ncindex runs (its credential cache off, so the next
    search asks Nextcloud who the caller is): the search is refused 503 and the page says that
    Nextcloud is what is unavailable — not that the search service is down — and no results;
    a sign-in then is said to be impossible for that reason."""
    running = Deployment(tmp_path, redis_url, model_dir, NCINDEX_USER_CACHE_SECONDS="0")
    try:
        running.wait_indexed()
        page = browser.new_context().new_page()
        open_signed_in(page, running.url, "alice")
        search(page, "brass fittings")
        expect(page.locator("#results .title", has_text="plan.md")).to_have_count(1)
        running.sim_server.close()  # Nextcloud is down; ncindex is not
        with page.expect_response("**/v1/search") as answer:
            page.locator("#go").click()
        assert answer.value.status == 503
        expect(page.locator("#status")).to_have_text(
            "Search is unavailable right now: Nextcloud is unavailable. Try again shortly."
        )
        expect(page.locator("#results li")).to_have_count(0)
        # signing in again meanwhile is refused for the same reason, said as a sign-in's
        # (it read "Search is unavailable", though no search was made)
        page.get_by_role("button", name="Sign out").click()
        expect(page.locator("#status")).to_have_text("Signed out.")
        cannot = "You cannot sign in right now: Nextcloud is unavailable. Try again shortly."
        sign_in_with_password(page, "alice")
        expect(page.locator("#status")).to_have_text(cannot)
        page.locator("#status").evaluate("(box) => { box.textContent = ''; }")
        page.get_by_role("button", name="Sign in with Nextcloud").click()
        expect(page.locator("#status")).to_have_text(cannot)
    finally:
        running.close()


def sign_in_with_password(page: Page, user: str) -> None:
    page.get_by_label("User name").fill(user)
    page.get_by_label("App password").fill(PASSWORDS[user])
    page.get_by_role("button", name="Sign in", exact=True).click()


def sign_out_deleting_the_app_password(page: Page, deployment: Deployment) -> None:
    """Press "Sign out" as alice: the page says the app password was deleted, and Nextcloud
    holds only alice's own again (the one the Login Flow made is gone)."""
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#status")).to_contain_text("app password was deleted")
    assert deployment.sim.tree.user("alice").passwords == {PASSWORDS["alice"]}


def start_login_flow(context: BrowserContext, page: Page, url: str) -> Page:
    """Open the page at ``url`` and press "Sign in with Nextcloud": the Nextcloud window it
    opens, once the page says it waits for the approval."""
    page.goto(url + "/")
    with context.expect_page() as popup_info:
        page.get_by_role("button", name="Sign in with Nextcloud").click()
    expect(page.locator("#status")).to_contain_text("Waiting for you to approve")
    return popup_info.value


def approve_in_nextcloud(popup: Page, user: str) -> None:
    """Grant the Login Flow in Nextcloud's page ``popup`` as ``user``, then close it."""
    popup.locator("#user").fill(user)
    popup.locator("#password").fill(PASSWORDS[user])
    popup.locator("#submit-grant").click()
    expect(popup.locator("h1")).to_have_text("Account connected")
    popup.close()


def open_signed_in(page: Page, url: str, user: str) -> None:
    """Open the page at ``url`` and sign in as ``user`` with the app password."""
    page.goto(url + "/")
    sign_in_with_password(page, user)
    expect(page.locator("#user-name")).to_have_text(f"Signed in as {user}")


def search(page: Page, query: str) -> None:
    """Type ``query`` into the search box and press Enter."""
    page.locator("#q").fill(query)
    page.keyboard.press("Enter")


def test_an_ended_session_and_an_unreachable_server_are_said_and_recovered_from(
    deployment: Deployment, browser: Browser
) -> None:
    """A session that ended while the page sat open (Redis expired it) does not make a right
    app password look refused; a server that cannot be reached is said, not a spinner; a
    failed search leaves no old results under its message; names shown without bidi controls."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(deployment.url + "/")
    expect(page.locator("#signed-out")).to_be_visible()
    sessions = redis.Redis.from_url(deployment.redis_url)
    ended = list(sessions.scan_iter(match=f"{deployment.namespace}:ui-session:*"))
    assert ended  # the anonymous session the page holds
    sessions.delete(*ended)
    sign_in_with_password(page, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice")
    # the folder list is loaded (its arrival restores the query from the URL)
    expect(page.locator("#folders option", has_text="/Projects").first).to_be_attached()
    page.locator("#q").fill("brass fittings")
    search = page.locator("#go")
    search.click()
    expect(page.locator("#results .title", has_text="plan.md")).to_have_count(1)

    page.route("**/v1/search", lambda route: route.abort())
    with page.expect_event("requestfailed") as failed:  # the route's abort: no answer at all
        search.click()
    assert failed.value.url.endswith("/v1/search")
    expect(page.locator("#status")).to_have_text(
        "The search service cannot be reached; check the connection and try again."
    )
    expect(page.locator("#results li")).to_have_count(0)
    page.unroute("**/v1/search")

    spoof = "report\u202egpj.exe"  # shown raw, it reads "reportexe.jpg"
    answer = {
        "results": [
            {"doc_type": "file", "doc_id": "1", "title": spoof, "score": 1.0,
             "snippet": "x", "char_start": 0, "char_end": 1, "chunk_index": 0,
             "modified_at": T0, "path": f"/Projects/{spoof}", "url": None}
        ],
        "verification": {}, "degraded": False, "model": "m", "timings_ms": {},
    }  # fmt: skip
    page.route("**/v1/search", lambda route: route.fulfill(json=answer))
    search.click()
    expect(page.locator("#results .title")).to_have_text("reportgpj.exe")
    expect(page.locator("#results .where")).to_have_text("/Projects/reportgpj.exe")
    context.close()


def fake_answer(limit: int, found: int) -> dict[str, object]:
    """A search answer of ``min(limit, found)`` files named ``doc-N.md``, best first."""
    results = [
        {"doc_type": "file", "doc_id": str(i), "title": f"doc-{i}.md", "score": 1 - i / 1000,
         "snippet": "tides", "char_start": 0, "char_end": 5, "chunk_index": 0,
         "modified_at": T0, "path": f"/Tides/doc-{i}.md", "url": None,
         "open_url": f"https://cloud.example/index.php/f/{i}"}
        for i in range(min(limit, found))
    ]  # fmt: skip
    return {"results": results, "verification": {}, "degraded": False, "model": "m",
            "timings_ms": {}}  # fmt: skip


def test_more_results_asks_for_a_longer_page(deployment: Deployment, browser: Browser) -> None:
    """The "More results" button asks the search on screen again, as it was sent, for one more
    page (the API has no offset: verification decides what a page holds) and moves focus to
    the result after those shown; it is not offered under a short answer, stops at the API's
    100, keeps the list when it fails, and goes with the results on signing out."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    more = page.get_by_role("button", name="More results")
    search(page, "lighthouse")
    expect(page.locator("#results li")).to_have_count(len(ALICE_ALL))  # the real answer
    expect(more).to_be_hidden()

    asked: list[tuple[str, int]] = []
    failing: list[bool] = []

    def answer(route: Route) -> None:
        body = route.request.post_data_json
        asked.append((body["query"], body["limit"]))
        if failing:
            route.fulfill(status=503, json={"code": "backend_unavailable", "detail": "down"})
            return
        route.fulfill(json=fake_answer(body["limit"], 25 if body["query"] == "tides" else 500))

    page.route("**/v1/search", answer)
    search(page, "tides")
    expect(page.locator("#results li")).to_have_count(10)
    page.locator("#q").fill("edited, not searched")  # More asks what is on screen
    more.click()
    expect(page.locator("#results li")).to_have_count(20)
    expect(page.locator("#results .title").nth(10)).to_be_focused()
    failing.append(True)
    more.click()
    expect(page.locator("#status")).to_have_class(re.compile("error"))
    # said beside the button too: the status line is out of sight above the results
    expect(page.locator("#more-problem")).to_have_text(
        "Search is unavailable right now: down. Try again shortly."
    )
    expect(page.locator("#results li")).to_have_count(20)  # the list stays, to try again
    expect(more).to_be_visible()
    failing.clear()
    more.click()
    expect(page.locator("#results li")).to_have_count(25)
    expect(page.locator("#more-problem")).to_be_hidden()
    expect(more).to_be_hidden()  # 25 of the 30 asked: that was all
    assert asked == [("tides", 10), ("tides", 20), ("tides", 30), ("tides", 30)]

    asked.clear()
    page.locator("#q").fill("everything")
    page.keyboard.press("Enter")  # a new search starts at one page again
    expect(page.locator("#results li")).to_have_count(10)
    for shown in range(20, 101, 10):
        more.click()
        expect(page.locator("#results li")).to_have_count(shown)
    expect(more).to_be_hidden()
    # the end of "More results" is not the end of what matches: said, with what to do
    expect(page.locator("#status")).to_have_text(
        "100 results, the most one search shows: add words or a filter to narrow it."
    )
    assert asked == [("everything", n) for n in range(10, 101, 10)]

    search(page, "tides")
    expect(more).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#status")).to_contain_text("Signed out")
    sign_in_with_password(page, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice")
    expect(page.locator("#results li")).to_have_count(0)
    expect(more).to_be_hidden()
    context.close()


def test_a_page_is_the_servers_default_limit(
    tmp_path: Path, redis_url: str, model_dir: Path, browser: Browser
) -> None:
    """With ``NCINDEX_SEARCH_DEFAULT_LIMIT=3`` the API answers 3 results, but the page asked for
    10 (its own ``PAGE = 10``, said to be "the API's default limit"): it asks for the server's
    default, from ``GET /ui/session``'s ``default_limit``, and "More results" for as many more."""
    with bob_without_documents(
        tmp_path, redis_url, model_dir, browser, NCINDEX_SEARCH_DEFAULT_LIMIT="3"
    ) as page:
        asked: list[int] = []

        def answer(route: Route) -> None:
            asked.append(route.request.post_data_json["limit"])
            route.fulfill(json=fake_answer(asked[-1], 500))

        page.route("**/v1/search", answer)
        search(page, "tides")
        expect(page.locator("#results li")).to_have_count(3)
        page.get_by_role("button", name="More results").click()
        expect(page.locator("#results li")).to_have_count(6)
        assert asked == [3, 6]


def test_a_links_date_without_a_time_is_the_start_of_that_day_where_the_user_is(
    deployment: Deployment, browser: Browser
) -> None:
    """``?before=2026-01-05`` was refused ("is no date and time") though the API and the
    README's examples take ``2026-01-05``: it is the start of that day in the browser's time
    zone, as the page's dates and times are (Berlin: 23:00 UTC the day before)."""
    context = browser.new_context(timezone_id="Europe/Berlin")
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    with page.expect_request("**/v1/search") as request:
        page.goto(deployment.url + "/?q=lighthouse%20lens&after=2025-12-01&before=2026-01-05")
    body = request.value.post_data_json
    assert (body["modified_after"], body["modified_before"]) == (
        "2025-11-30T23:00:00Z",
        "2026-01-04T23:00:00Z",
    )
    expect_titles(page, ["plan.md"])  # modified 2026-01-01; the others later
    expect(page.locator("#before")).to_have_value("2026-01-05T00:00")
    expect(page.locator("#chips li")).to_have_text(
        ["After 2025-12-01 00:00×", "Before 2026-01-05 00:00×"]
    )
    context.close()


def test_a_links_query_is_shown_without_bidi_controls(
    deployment: Deployment, browser: Browser
) -> None:
    """A link's ``?q=%E2%80%AEgpj.exe`` showed in the query box as "exe.jpg" (U+202E RIGHT-TO-LEFT
    OVERRIDE), though titles are shown without such characters: the box takes the link's query
    without bidi overrides, embeddings and isolates (U+202A-U+202E, U+2066-U+2069), and
    searches what it shows."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    controls = "".join(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
    link = "\u202egpj.exe " + controls + "lens\u2069"
    with page.expect_request("**/v1/search") as request:
        page.goto(deployment.url + "/?q=" + quote(link))
    assert request.value.post_data_json["query"] == "gpj.exe lens"
    expect(page.locator("#q")).to_have_value("gpj.exe lens")
    context.close()


def test_a_links_query_of_bidi_controls_alone_is_refused(
    deployment: Deployment, browser: Browser
) -> None:
    """A link's ``?q=%E2%80%AE%E2%81%A6`` (U+202E, U+2066) left the box empty once its bidi
    controls were taken away, and the page made no search and said nothing of the link's
    query: its search is refused, saying so, as a link the form cannot take whole is."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.url.endswith("/v1/search") else None)
    page.goto(deployment.url + "/?q=" + quote("\u202e\u2066"))
    expect(page.locator("#status")).to_have_text(
        LINK_REFUSED + "query is nothing but bidi controls (invisible). Change the search "
        "above, or search again without it."
    )
    expect(page.locator("#q")).to_have_value("")
    assert sent == []
    context.close()


def test_results_other_than_they_seem_are_said(deployment: Deployment, browser: Browser) -> None:
    """A typo finds no document holding the word: the results, the nearest in meaning, are
    said to hold none of the words (they read as matches of it); quotes are said not to make a
    phrase search (results without the phrase looked like a broken search); a context that
    cannot be loaded is said in its result, under the button (the status line was out of
    sight, and the button seemed to do nothing), and pressing again asks again; results
    Nextcloud could not confirm are said in the status line, and so are results left out
    (with none shown, the page said "No results. Try other words"). A Deck card, which has no
    path, had its date behind a lone "·", and said nothing of the board it is on: it shows its
    board and stack where a file shows its path; a title without a link (a news item whose link
    is not http(s)) could not take the focus "Skip to the results" gives. "Show context" showed
    only the chunks: it says where the document is as the result list does, from the context
    answer ("Board › Stack" of a card, a news item's link)."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    search(page, "lighthuose")
    expect(page.locator("#status")).to_have_text(
        re.compile(r"^\d+ results?\. The keyword search found no word of your query as written")
    )
    search(page, '"fittings brass"')
    expect(page.locator("#status")).to_have_text(
        re.compile(r"^\d+ results?\. Quotes do not search for an exact phrase: the words are")
    )
    search(page, "brass fittings")
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))

    plan = page.locator("#results li", has_text="polish the lens")
    page.route(
        "**/context?*", lambda r: r.fulfill(status=503, json={"detail": "Nextcloud is unavailable"})
    )
    plan.get_by_role("button", name="Show context").click()
    expect(plan.get_by_role("alert")).to_have_text(
        "The context is unavailable right now: Nextcloud is unavailable. Try again shortly."
    )
    page.unroute("**/context?*")
    plan.get_by_role("button", name="Show context").click()
    expect(plan.locator(".context")).to_contain_text("replace the brass fittings")
    expect(plan.get_by_role("alert")).to_have_count(0)

    # Nextcloud did not answer the checks: results shown unconfirmed, or left out
    # (NCINDEX_UNVERIFIED_RESULTS=drop), which read as "try other words"
    unconfirmed = fake_answer(10, 2)
    unconfirmed["results"][1]["verified"] = False  # type: ignore[index]
    dropped = fake_answer(10, 0) | {"verification": {"withheld": 3}}
    # a news item whose link is not http(s) has no open_url; a Deck card has no path
    odd = fake_answer(10, 3)
    odd["results"][0] |= {"doc_type": "news_item", "open_url": None, "url": "javascript:x"}  # type: ignore[index]
    odd["results"][1] |= {"doc_type": "deck_card", "path": None}  # type: ignore[index]
    placed = {"board_title": "Harbour ‮work", "stack_title": "To do"}  # a bidi control
    odd["results"][2] |= {"doc_type": "deck_card", "path": None} | placed  # type: ignore[index]
    answers = [unconfirmed, dropped, odd]
    page.route("**/v1/search", lambda r: r.fulfill(json=answers.pop(0)))
    search(page, "tides")
    expect(page.locator("#status")).to_have_text(
        "2 results. Nextcloud could not confirm 1 of them just now: it is marked below."
    )
    search(page, "tides again")
    expect(page.locator("#status")).to_have_text(
        "No results shown. 3 results left out: Nextcloud could not confirm them just now. "
        "Try again shortly."
    )
    search(page, "odd ones")
    card_meta = page.locator("#results .meta").nth(1)  # only its date: no "· " before it
    expect(card_meta).to_have_text(card_meta.locator("time").text_content() or "-")
    placed_meta = page.locator("#results .meta").nth(2)  # its board and stack, then its date
    expect(placed_meta).to_have_text(
        "Harbour work › To do · " + (placed_meta.locator("time").text_content() or "-")
    )
    expect(page.locator("#results .meta").first).to_have_text(re.compile(r"^javascript:x · \w"))
    page.locator("#q").focus()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # "Skip to the results", to a title without a link
    expect(page.locator("#results .title").first).to_be_focused()

    # "Show context" showed the chunks alone: it now says where the document is as the result
    # list does, from the context answer's own check (the card has moved since the search)
    def context_of(route: Route) -> None:
        doc_type = route.request.url.split("/v1/documents/")[1].split("/")[0]
        chunk = {"chunk_index": 0, "text": "Tides at noon", "char_start": 0, "char_end": 13}
        place = {
            "deck_card": {"board_title": "Fleet", "stack_title": "Inbox"},
            "news_item": {"url": "https://news.example/tides", "feed_id": "4"},
        }[doc_type]
        answer = {"doc_type": doc_type, "doc_id": "0", "title": "Tides", "chunk_count": 1}
        route.fulfill(json=answer | {"chunks": [chunk]} | place)

    page.route("**/context?*", context_of)
    for nth, where in ((2, "Fleet › Inbox"), (0, "https://news.example/tides")):
        result = page.locator("#results li").nth(nth)
        result.get_by_role("button", name="Show context").click()
        expect(result.locator(".context p")).to_have_text([where, "Tides at noon"])
        expect(result.locator(".context .context-where")).to_have_text(where)
    context.close()


def note_result_page(
    deployment: Deployment,
    browser: Browser,
    snippet: str,
    query: str,
    result: dict[str, object] | None = None,
) -> tuple[BrowserContext, Page]:
    """A page of Alice's, in a context of its own, showing her search for ``query`` answered by
    a stand-in with one note (or the ``result`` given: its fields over the stand-in's) whose
    server snippet is ``snippet``."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    answer = fake_answer(10, 1)
    fields = result or {"doc_type": "note"}
    answer["results"][0] |= fields | {"snippet": snippet}  # type: ignore[index]
    page.route("**/v1/search", lambda r: r.fulfill(json=answer))
    search(page, query)
    return context, page


def expect_note_snippet(
    deployment: Deployment,
    browser: Browser,
    snippet: str,
    query: str,
    shown: str,
    marks: int,
    result: dict[str, object] | None = None,
) -> None:
    """Alice's search for ``query`` shows a note (or the ``result`` given: its fields over
    the stand-in's) whose server snippet is ``snippet`` (the search answered by a stand-in) as
    the text ``shown``, with ``marks`` marks, each on the query's word."""
    context, page = note_result_page(deployment, browser, snippet, query, result)
    located = page.locator("#results .snippet")
    expect(located).to_have_text(shown)
    expect(located.locator("mark")).to_have_text([query] * marks)
    context.close()


def test_a_notes_numbered_lists_code_and_tables_are_not_shown_as_markdown(
    deployment: Deployment, browser: Browser
) -> None:
    """A note's snippet showed the Markdown of numbered lists, code and tables raw. A run of
    three consecutive numbered markers is shown as bullets (a lone "5. " ending a sentence
    stays), code fences with their language and the backticks around code go (the code stays
    as written, "**kwargs" too), and so do a table's pipes and its "|---|" row; a "-" bullet
    stays as it is, and every mark still wraps the word it marked. (The fences open and close
    their lines, as in a note: the server's snippet keeps its line breaks.)"""
    raw = (
        "Steps 1. Fill the <mark>lamp</mark> 2. Trim the wick 3. Light it\n```bash\n"
        "<mark>lamp</mark>-check "
        "--all\n```\nRun `<mark>lamp</mark> on` and `**kwargs` | Part | Count | |---|---:| "
        "| <mark>lamp</mark> | 3 | in chapter 5. It ends - done"
    )
    shown = (
        "Steps • Fill the lamp • Trim the wick • Light it lamp-check --all Run lamp on and "
        "**kwargs "
        "Part Count lamp 3 in chapter 5. It ends - done"
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 4)


def test_numbers_and_pipes_of_prose_in_a_note_s_snippet_are_shown(
    deployment: Deployment, browser: Browser
) -> None:
    """Two numbers with a marker's dot were taken for a numbered list and hidden: German
    ordinal dates ("am 1. und 2. Dezember" showed "am • und • Dezember", "vom 3. bis 4. Mai"
    too); so were numbers with no item between them ("24. 25. 26. Dezember"). Three pipes
    between spaces were taken for a table's: a shell pipeline lost its pipes. Such a snippet
    is shown as it came, its marks kept."""
    prose = (
        "Die <mark>Sitzung</mark> ist am 1. und 2. Dezember, vom 3. bis 4. Mai nicht; "
        "Termine: 24. 25. 26. Dezember. Log: ls -l | grep <mark>Sitzung</mark> | sort | uniq"
    )
    shown = prose.replace("<mark>", "").replace("</mark>", "")
    expect_note_snippet(deployment, browser, prose, "Sitzung", shown, 2)


def test_a_hash_in_a_notes_prose_is_no_heading(deployment: Deployment, browser: Browser) -> None:
    """A "#" run and a space after any whitespace was hidden as a heading's, so "Ticket # 42"
    showed "Ticket 42". An ATX heading opens a line (CommonMark 0.31 §4.2): now that the
    server's snippet keeps its line breaks as "\n", only a "#" run at the snippet's start or
    after a "\n" is hidden."""
    raw = "Ticket # 42 is about the <mark>lamp</mark>\n## Wiring the <mark>lamp</mark>"
    shown = "Ticket # 42 is about the lamp Wiring the lamp"
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 2)


def test_a_notes_emphasis_and_bullets_are_read_as_commonmark_reads_them(
    deployment: Deployment, browser: Browser
) -> None:
    """A note's snippet hid every "*", "_" or "__" beside a word, paired or not, and showed
    every " * " as a bullet: "my__init__.py" lost its closing "__", "the __init method" and
    "**kwargs" their underscores and asterisks, "2 * 3" became "2 • 3". Emphasis is now hidden
    only where CommonMark pairs its delimiters (left- and right-flanking runs; "_" inside a word
    is none; an asterisk with whitespace on both sides is none), also across code, and a "*"
    bullet only at the start of a line (the server's snippet keeps its line breaks as "\n");
    "**bold**", "_em_", "*it*", "~~struck~~" and real bullets are still hidden, and the marks
    stay on their words."""
    raw = (
        "Call <mark>lamp</mark>.setup() in my__init__.py, not the __init method; "
        "2 * 3 lamps * cost, **kwargs too, snake_case_name. **Bold** _em_ *it* "
        "~~struck~~ *see `x_y` here*\n* real <mark>lamp</mark> bullet\n* another *one*"
    )
    shown = (
        "Call lamp.setup() in my__init__.py, not the __init method; 2 * 3 lamps * cost, "
        "**kwargs too, snake_case_name. Bold em it struck see x_y here • real lamp bullet "
        "• another one"
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 2)


def test_a_notes_backslash_escapes_are_read_as_commonmark_reads_them(
    deployment: Deployment, browser: Browser
) -> None:
    """A note's snippet showed the backslashes of CommonMark's escapes (0.31 §2.4), and an
    escaped "*" or backtick still paired as emphasis or code: "\\*not emphasis\\*" showed
    "\\not emphasis\\". A backslash before ASCII punctuation is now hidden and the character
    shown as written (not a delimiter, bullet, heading, list marker, link or code), "\\\\" is
    one backslash, a backslash before anything else stays, and one inside a code span escapes
    nothing; the HTML the server escaped stays text, and the mark inside an escaped word stays
    on it. Checked against markdown-it-py's CommonMark rendering of the same text."""
    raw = (
        r"\*not emphasis\* and \*<mark>lamp</mark>\* 1\. item 2\. item 3\. item, \\*em*, "
        r"a\b C:\dir, `a\*b` \`not code`, \[no link\](x) *real \* one*"
        "\n"
        r"\* not a bullet"
        "\n"
        r"\# not a heading \&lt;b&gt;"
    )
    shown = (
        r"*not emphasis* and *lamp* 1. item 2. item 3. item, \em, a\b C:\dir, a\*b "
        r"`not code`, [no link](x) real * one * not a bullet # not a heading <b>"
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 1)


def test_a_notes_lines_code_blocks_and_hard_breaks_are_read_as_commonmark_reads_them(
    deployment: Deployment, browser: Browser
) -> None:
    """Three edges of a note's snippet, as the server makes it (make_snippet, the function
    POST /v1/search calls) and the page shows it:

    - a window cut where a list item's line starts showed "…* trim": the server dropped the line
      break it cut at, and a "*" after "…" may as well be the "2 * 3" of prose. It keeps it now
      ("…\n* trim"), and the page shows the item's bullet;
    - a fenced code block's backslashes were read as escapes and its "*all*" as emphasis
      (CommonMark 0.31.2 §4.5: a code block's text is literal): "C:\\tmp\\*.log" showed
      "C:\\tmp*.log". Its fences go, its code stays as written;
    - a backslash ending a line (a hard line break, §6.7) was shown; it goes, the break showing
      as a space as a soft one does, unless the next line opens a block ("# Notes", "- dash"),
      where the paragraph ends and the backslash is text.

    A "```" inside a line is a code span (§4.5: a fence opens its line). Checked against
    markdown-it-py's CommonMark rendering of the same text."""
    note = (
        "The keeper wrote a long introduction about the tower and its history. " * 3
        + "\n* trim the \\*spare\\* lamp wick\\\n  then wipe the glass\n"
        + "```sh\nlamp --dry-run C:\\tmp\\*.log *all*\n```\n"
        + "Light the lamp at dusk\\\n# Notes\n"
        + "More words about weather and ships. " * 5
    )
    raw = make_snippet(note, "lamp", max_chars=140)
    assert raw.startswith("…\n* trim")
    shown = (
        "… • trim the *spare* lamp wick then wipe the glass lamp --dry-run C:\\tmp\\*.log *all* "
        "Light the lamp at dusk\\ Notes More…"
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 3)
    raw = (
        "Ring 2 * 3 times; \\`x` then \\\nthe <mark>lamp</mark>\\\nwith a \\\n- dash list"
        "\nLight it ```bash <mark>lamp</mark>-check --all ``` now"
    )
    shown = (
        "Ring 2 * 3 times; `x` then the lamp with a \\ - dash list "
        "Light it bash lamp-check --all now"
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 2)


def test_a_notes_backtick_runs_heading_backslashes_and_cut_fences_are_read_as_commonmark_does(
    deployment: Deployment, browser: Browser
) -> None:
    """Three edges of the page's reading of a note's snippet, each checked against
    markdown-it-py's CommonMark rendering of the same text:

    - a code span opens at a whole run of backticks and closes at a run as long (CommonMark
      0.31.2 §6.1): a "```" inside a line that no run of three closes is text, but the page
      opened a span at its last backtick ("Type `` to open a fence, then ls` the wick"), and
      ``` `x` ``` (a span holding backticks) showed "`` x` ```";
    - a heading's line ending in a backslash holds no hard line break (§6.7, §4.2: a heading is
      one line), its backslash is text: "# Keeper's lamp log\\" lost it;
    - a fence opening the snippet's last line took the server's "…" of its cut for the block's
      language and hid it.

    Guards of the fenced blocks (§4.5), which pass before too: a fence of four backticks is
    not closed by three, nor a "~~~" block by "```"; code stays as written (escapes, "*",
    "<b>"); a backslash before a mark is text; an unclosed block runs to the snippet's end, and
    markup in it is text, never HTML."""
    raw = (
        "# Keeper&#x27;s <mark>lamp</mark> log\\\nType ``` to open a fence, then `ls` the "
        "wick\\\nthen wipe the glass\n```sh…"
    )
    shown = "Keeper's lamp log\\ Type ``` to open a fence, then ls the wick then wipe the glass …"
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 1)
    raw = "Quote it as ``` `x` ``` by the <mark>lamp</mark>"
    expect_note_snippet(deployment, browser, raw, "lamp", "Quote it as `x` by the lamp", 1)
    raw = (
        "````\n*not* &lt;b&gt;\\*lit\\*&lt;/b&gt; <mark>lamp</mark>\n```\n~~~\n````\n~~~\n"
        "```\nthe <mark>lamp</mark>\\\n~~~\n* item \\<mark>lamp</mark>\n```html\n"
        "&lt;img src=x onerror=window.__xss=9&gt;&lt;/mark&gt;"
    )
    shown = (
        "*not* <b>\\*lit\\*</b> lamp ``` ~~~ ``` the lamp\\ • item \\lamp "
        "<img src=x onerror=window.__xss=9></mark>"
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 3)


def test_a_notes_paragraph_breaks_are_kept_and_end_its_hard_breaks(
    deployment: Deployment, browser: Browser
) -> None:
    """A blank line was one "\\n" in a note's snippet, shown as a space: a paragraph's end read
    as its next sentence, and a backslash ending the paragraph was hidden as a hard line break
    (CommonMark 0.31 §6.7: none at a block's end; the backslash is text). The server keeps a
    blank line as "\\n\\n" (make_snippet, the function POST /v1/search calls), and the page
    shows it as a line break, the backslash before it as written. Checked against
    markdown-it-py's CommonMark rendering of the same text (two paragraphs, "C:\\")."""
    note = "Keep the spare lamp in C:\\\n\n\nThe second paragraph about the lamp\nwraps here"
    raw = make_snippet(note, "lamp", markdown=True)
    assert "C:\\\n\nThe second" in raw
    shown = "Keep the spare lamp in C:\\ The second paragraph about the lamp wraps here"
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 2)
    context, page = note_result_page(deployment, browser, raw, "lamp")
    located = page.locator("#results .snippet")
    expect(located.locator("br")).to_have_count(1)
    assert located.inner_text().split("\n") == [
        "Keep the spare lamp in C:\\",
        "The second paragraph about the lamp wraps here",
    ]
    context.close()


def test_a_notes_indented_code_and_a_block_its_cut_opened_in_are_shown_as_code(
    deployment: Deployment, browser: Browser
) -> None:
    """A note's indented code block (CommonMark 0.31.2 §4.4) was read as prose: the server
    dropped its lines' indentation, and the page read its backslashes as escapes and its "*"
    as emphasis ("C:\\tmp\\*.log" showed "C:\\tmp*.log"). A snippet cut inside a fenced block
    whose opening line it cut off read the block's closing fence as an opening one (§4.5): the
    code was read as prose and the prose after it shown raw. The server now keeps a code line's
    indentation and re-opens a block its window starts in ("```\\n…"); the page shows both
    blocks' code as written, in a code element keeping its lines, and reads the prose around
    them. Checked against markdown-it-py's CommonMark rendering of the same text."""
    note = (
        "Clean the lamp with:\n\n    lamp --dry-run C:\\tmp\\*.log *all*\n\t  # not a heading\n"
        "\nThen *polish* it."
    )
    raw = make_snippet(note, "lamp", markdown=True)
    shown = (
        "Clean the lamp with: lamp --dry-run C:\\tmp\\*.log *all*   # not a heading Then polish it."
    )
    expect_note_snippet(deployment, browser, raw, "lamp", shown, 2)
    fenced = (
        "The keeper wrote a long introduction about the tower. " * 2
        + "\n```sh\n"
        + "".join(f"step {i} --path C:\\tmp\\*.log *all*\n" for i in range(8))
        + "lamp --check\n```\n**Done** with the lamp\n"
    )
    raw = make_snippet(fenced, "lamp", max_chars=120, markdown=True)
    assert raw.startswith("```\n…")
    context, page = note_result_page(deployment, browser, raw, "lamp")
    code = page.locator("#results .snippet .code-block")
    expect(code).to_have_count(1)
    expect(code).to_contain_text("C:\\tmp\\*.log *all*\nlamp --check")
    expect(page.locator("#results .snippet")).to_contain_text("Done with the lamp")
    expect(page.locator("#results .snippet mark")).to_have_text(["lamp", "lamp"])
    context.close()


def test_a_notes_first_line_and_a_line_after_a_closing_fence_indented_are_code(
    deployment: Deployment, browser: Browser
) -> None:
    """A note's chunk opening with an indented code block (the markdown splitter keeps its
    indentation) lost its first line's indentation in the snippet, so the page read that line as
    prose; and an indented line right after a fenced block's closing line, an indented code
    block (CommonMark 0.31.2 §4.4: no paragraph is open there; markdown-it-py renders two
    ``<pre>``), lost its indentation at the server and was read as a paragraph by the page
    (its lookbehind wanted a blank line). Both are code boxes now, written as they are."""
    note = "    C:\\tmp\\*.log *lamp*\n    two\n\nThen *polish* it."
    raw = make_snippet(note, "lamp", markdown=True)
    assert raw.startswith("    ")
    context, page = note_result_page(deployment, browser, raw, "lamp")
    code = page.locator("#results .snippet .code-block")
    expect(code).to_have_text(["C:\\tmp\\*.log *lamp*\ntwo"])
    expect(page.locator("#results .snippet")).to_contain_text("Then polish it.")
    context.close()
    fenced = "Run:\n```\nlamp --check\n```\n    C:\\tmp\\*.log *all*\nThen *polish* it."
    raw = make_snippet(fenced, "lamp", markdown=True)
    assert "\n```\n    C:" in raw
    context, page = note_result_page(deployment, browser, raw, "lamp")
    code = page.locator("#results .snippet .code-block")
    expect(code).to_have_text(["lamp --check", "C:\\tmp\\*.log *all*"])
    expect(page.locator("#results .snippet")).to_contain_text("Then polish it.")
    context.close()


def test_a_notes_code_line_after_a_first_line_its_window_cut_is_code(
    deployment: Deployment, browser: Browser
) -> None:
    """A window starting inside a note's first line of indented code (a long one) cuts off its
    indentation ("…"); the server keeps the next code line's ("\n    more code": a line after
    a code line), but the page's INDENTED_CODE wanted a blank line, the text's start or "…\n"
    before it, and showed that line as prose. An indented line after the line a cut started
    in is code (the server keeps no other line's indentation)."""
    note = "    " + "word " * 80 + "lamp here\n    C:\\tmp\\*.log *x*\n\nThen *polish* it."
    raw = make_snippet(note, "lamp", markdown=True)
    assert raw.startswith("…") and "here\n    C:" in raw
    context, page = note_result_page(deployment, browser, raw, "lamp")
    expect(page.locator("#results .snippet .code-block")).to_have_text(["C:\\tmp\\*.log *x*"])
    expect(page.locator("#results .snippet")).to_contain_text("Then polish it.")
    context.close()


def test_show_context_reads_the_chunks_as_the_snippet_is_read(
    deployment: Deployment, browser: Browser
) -> None:
    """ "Show context" showed every chunk's text raw: a note's "**Bold**", "# heading" and
    backslash escapes, a Deck card's description Markdown. Each chunk is now shown as the
    result's snippet is (a note's and a card's description without Markdown, a card's title as
    written, a file's headings ncindex wrote hidden, other text as written), its lines and code
    kept; its markup stays text, never HTML."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    answer = fake_answer(10, 4)
    kinds = [
        {"doc_type": "note", "path": "/Notes/Tides.md"},
        {"doc_type": "deck_card", "path": None},
        {"doc_type": "file", "path": "/Tides/slides.pptx"},
        {"doc_type": "file", "path": "/Tides/raw.txt"},
    ]
    for result, kind in zip(answer["results"], kinds, strict=True):  # type: ignore[call-overload]
        result |= kind
    page.route("**/v1/search", lambda r: r.fulfill(json=answer))
    search(page, "tides")
    texts = [
        "# Tides\r\n\r\n**Bold** \\*x\\* <b>no</b> `a*b*`  \n\n\tC:\\*.log *all*\n",
        "*Tides* card\n\n**Bold** <img src=x onerror=window.__xss=1>",
        "# Slide 1: Tides\n**as written**",
        "# raw *text*",
    ]

    def context_of(route: Route) -> None:
        doc_id = route.request.url.split("/v1/documents/")[1].split("/")[1]
        kind, text = kinds[int(doc_id)], texts[int(doc_id)]
        chunk = {"chunk_index": 0, "text": text, "char_start": 0, "char_end": len(text)}
        answer = {"doc_type": kind["doc_type"], "doc_id": doc_id, "title": "Tides"}
        route.fulfill(json=answer | {"chunk_count": 1, "chunks": [chunk], "path": kind["path"]})

    page.route("**/context?*", context_of)
    shown = [
        "Tides\n\nBold *x* <b>no</b> a*b*\n\nC:\\*.log *all*\n",
        "*Tides* card\n\nBold <img src=x onerror=window.__xss=1>",
        "Slide 1: Tides\n**as written**",
        "# raw *text*",
    ]
    for nth, text in enumerate(shown):
        result = page.locator("#results li").nth(nth)
        result.get_by_role("button", name="Show context").click()
        hit = result.locator(".context .hit")
        expect(hit).to_have_count(1)
        assert hit.text_content() == text
    expect(page.locator("#results .context .code-block")).to_have_text("C:\\*.log *all*")
    assert page.locator("#results .context b, #results .context img").count() == 0
    assert page.evaluate("window.__xss") is None
    context.close()


def test_show_context_keeps_a_note_s_table_rows_on_their_lines(
    deployment: Deployment, browser: Browser
) -> None:
    """A context chunk keeps its lines (app.css .context), but a note's table lost them: the
    pipe ending each row went with its line break, so "| A1 | tide |" and the rows after it
    read as one line, "A1 tide A2 x after". Each row is a line of its own, the "|---|" row gone
    without leaving a blank line; the snippet's rows (one <br> each) stay as they were."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    answer = fake_answer(10, 1)
    answer["results"][0] |= {"doc_type": "note", "path": "/Notes/Tides.md"}  # type: ignore[index]
    page.route("**/v1/search", lambda r: r.fulfill(json=answer))
    search(page, "tides")
    text = "Tides\n\n| Box | Owner |\n|---|---|\n| A1 | tide |\n| A2 | x |\nafter"

    def context_of(route: Route) -> None:
        chunk = {"chunk_index": 0, "text": text, "char_start": 0, "char_end": len(text)}
        route.fulfill(
            json={"doc_type": "note", "doc_id": "0", "title": "Tides", "path": "/Notes/Tides.md"}
            | {"chunk_count": 1, "chunks": [chunk]}
        )

    page.route("**/context?*", context_of)
    result = page.locator("#results li").first
    result.get_by_role("button", name="Show context").click()
    hit = result.locator(".context .hit")
    expect(hit).to_have_count(1)
    lines = [line.strip() for line in hit.inner_text().split("\n")]
    assert lines == ["Tides", "", "Box Owner", "A1 tide", "A2 x", "after"]
    context.close()


def test_headings_ncindex_wrote_into_a_file_s_text_are_not_shown_raw(
    deployment: Deployment, browser: Browser
) -> None:
    """A slide's snippet began "# Slide 1: Journal club" (the sample's PPTX, searched for
    "vitamin D"): the headings ncindex's own extraction writes into slides, sheets, e-mails,
    events, contacts and e-books showed their hashes. They go at the start of a line; the
    rest of such a file's text is not Markdown and stays as written ("2 * 3", "a_b_c",
    "**kwargs", a "#" inside a line), and a file read as plain text keeps its "#"."""
    raw = (
        "# Slide 1: Journal club: <mark>vitamin</mark> D\nRaise 2 * 3, a_b_c, **kwargs #1"
        "\n## Slide 2: Methods"
    )
    shown = "Slide 1: Journal club: vitamin D Raise 2 * 3, a_b_c, **kwargs #1 Slide 2: Methods"
    slides = {"doc_type": "file", "path": "/Documents/Formats/Journal club.pptx"}
    expect_note_snippet(deployment, browser, raw, "vitamin", shown, 1, slides)
    plain = {"doc_type": "file", "path": "/Documents/run.sh"}
    expect_note_snippet(
        deployment, browser, "# <mark>vitamin</mark> dose", "vitamin", "# vitamin dose", 1, plain
    )


SHEET = "# Sheet: Freezer A\nBox | Contents | Owner\nA1 | HeLa | Alice\nA2 | CHO | Bob"
MAIL = (
    "# Seminar: Cell cycle\nFrom: Alice <alice@example.org>\nTo: Lab <lab@example.org>\n"
    "Date: Mon, 7 Dec 2026\n\nDear all, the seminar is on Monday."
)


def test_a_heading_whose_first_word_is_marked_loses_its_hashes(
    deployment: Deployment, browser: Browser
) -> None:
    """A query matching a heading's first word left its "#" in the snippet: "# Sheet: Freezer
    A" for "sheet freezer", "# Seminar: …" for "seminar" (the server's snippet,
    make_snippet, is "# <mark>Sheet</mark>: …": the text before the mark, "# ", was read
    alone and no heading's text followed it). A sheet's, an e-mail's, a slide's, a note's and
    a Deck card description's heading now lose their hashes whether or not a mark starts them,
    the marks still on the query's words."""
    cases = [
        ("/Lab/Freezer.xlsx", "file", SHEET, "sheet", "Sheet: Freezer A"),
        ("/Mail/Seminar.eml", "file", MAIL, "seminar", "Seminar: Cell cycle"),
        (
            "/Talks/Journal club.pptx",
            "file",
            "# Slide 1: Journal club\nVitamin D",
            "slide",
            "Slide 1: Journal club",
        ),
        ("/Notes/Tides.md", "note", "# Tides\nThe spring tide", "tides", "Tides"),
        (None, "deck_card", "Harbour\n\n## Winch\nGrease it", "winch", "Harbour Winch"),
    ]
    for path, doc_type, text, query, start in cases:
        raw = make_snippet(text, query, markdown=doc_type != "file")
        assert f"# <mark>{query.capitalize()}</mark>" in raw
        fields = {"doc_type": doc_type, "path": path, "snippet_title_chars": 7}
        context, page = note_result_page(deployment, browser, raw, query, fields)
        located = page.locator("#results .snippet")
        expect(located).to_contain_text(start)
        assert "#" not in located.text_content()
        expect(located.locator("mark").first).to_have_text(query.capitalize())
        context.close()


NOTE_LINES = (
    "# Tides\nThe spring tide table\nwraps here\n- [ ] drain ocelot nodes\n"
    "- [x] snapshot volumes\n* tide gauge\n1. first\n2. second tide\n\n"
    "| Box | Owner |\n|---|---|\n| A1 | tide |"
)


def shown_lines(
    deployment: Deployment, browser: Browser, text: str, query: str, result: dict[str, object]
) -> list[str]:
    """The lines (as a reader sees them: the snippet's inner text) of the snippet the server
    makes of ``text`` for ``query`` (make_snippet, Markdown for a note and a Deck card), shown
    for a result of the stand-in with ``result``'s fields."""
    markdown = result["doc_type"] != "file"
    raw = make_snippet(text, query, max_chars=400, markdown=markdown)
    context, page = note_result_page(deployment, browser, raw, query, result)
    located = page.locator("#results .snippet")
    expect(located.locator("mark").first).to_be_attached()
    lines = [line.strip() for line in located.inner_text().split("\n")]
    context.close()
    return lines


def test_line_breaks_that_are_structure_are_shown_and_layout_wraps_are_not(
    deployment: Deployment, browser: Browser
) -> None:
    """The server keeps a line break as "\\n" in the snippet, which HTML shows as a space:
    an e-mail's header lines read "From: … To: … Date: …" as one line, a sheet's rows ran
    together, a note's task items read "☐ drain ocelot nodes ☑ snapshot volumes". A line
    break is now shown where it is the text's structure: every one of a file ncindex writes
    line by line (slides, sheets, e-mails, events, contacts); in a note or a Deck card's
    description before a list item, a task or a heading, after a heading, and between a
    table's rows (CommonMark 0.31.2 §4.2, §5.2, §5.3; GFM §4.10). A note's soft line break
    (§6.8) and a line break of prose (a PDF's, an e-book's: a layout wrap) stay a space."""
    mail = {"doc_type": "file", "path": "/Mail/Seminar.eml"}
    assert shown_lines(deployment, browser, MAIL, "seminar", mail) == [
        "Seminar: Cell cycle",
        "From: Alice <alice@example.org>",
        "To: Lab <lab@example.org>",
        "Date: Mon, 7 Dec 2026",
        "Dear all, the seminar is on Monday.",
    ]
    sheet = {"doc_type": "file", "path": "/Lab/Freezer.ods"}
    assert shown_lines(deployment, browser, SHEET, "freezer", sheet) == [
        "Sheet: Freezer A",
        "Box | Contents | Owner",
        "A1 | HeLa | Alice",
        "A2 | CHO | Bob",
    ]
    note = {"doc_type": "note", "path": "/Notes/Tides.md"}
    assert shown_lines(deployment, browser, NOTE_LINES, "tide", note) == [
        "Tides",
        "The spring tide table wraps here",
        "☐ drain ocelot nodes",
        "☑ snapshot volumes",
        "• tide gauge",
        "1. first",
        "2. second tide",
        "Box Owner",
        "A1 tide",
    ]
    card = {"doc_type": "deck_card", "path": None, "snippet_title_chars": 7}
    description = "Harbour\n\nCheck the winch\n- [ ] drain ocelot nodes\n- [x] snapshot winch"
    assert shown_lines(deployment, browser, description, "winch", card) == [
        "Harbour",
        "Check the winch",
        "☐ drain ocelot nodes",
        "☑ snapshot winch",
    ]
    prose = "The lamp of the lighthouse\nwraps at the page's edge\n\nA new lamp paragraph"
    for path in ("/Docs/Lamp.pdf", "/Books/Lamp.epub", "/Docs/lamp.txt"):
        assert shown_lines(
            deployment, browser, prose, "lamp", {"doc_type": "file", "path": path}
        ) == [
            "The lamp of the lighthouse wraps at the page's edge",
            "A new lamp paragraph",
        ]


def test_a_line_after_a_code_box_or_a_thematic_break_starts_a_line_of_its_own(
    deployment: Deployment, browser: Browser
) -> None:
    """A line break before a list item or a table row was shown as one (<br>) where the note
    ran on, but also right after a fenced code block, whose box already ends the line: a list
    or a table after a code block stood a blank line below it, a paragraph did not. And the line
    after a thematic break or a setext heading's underline ("***", "---", "===": one line each,
    CommonMark 0.31.2 §4.1, §4.3) ran on after it ("*** more tide"), though the break before
    it was shown. (The fenced block's own "- x" line stays as written in its box.)"""
    note = {"doc_type": "note", "path": "/Notes/Tides.md"}
    fenced = "Intro tide\n```\n- x in code\n```\n"
    for after, shown in [
        ("- tide item\n- next", ["- tide item", "- next"]),
        ("| A | tide |\n|---|---|\n| 1 | x |", ["A tide", "1 x"]),
        ("after tide text", ["after tide text"]),
    ]:
        assert shown_lines(deployment, browser, fenced + after, "tide", note) == [
            "Intro tide",
            "- x in code",
            *shown,
        ]
    for rule in ("***", "---", "==="):
        text = f"tide one\n{rule}\nmore tide"
        assert shown_lines(deployment, browser, text, "tide", note) == [
            "tide one",
            rule,
            "more tide",
        ]


CARD_TITLE = "# 12 Crane *winch* `check`"
CARD_DESCRIPTION = (
    "**Grease** the _winch_ before the storm.\n\n- [ ] task: test the winch cable\n"
    "- [x] order new hooks"
)


def add_card(sim: NextcloudSimulator) -> object:
    """A card on alice's board "Harbour", stack "To do": :data:`CARD_TITLE` (plain text in
    Deck) over :data:`CARD_DESCRIPTION` (Markdown)."""
    board = sim.deck_create_board("alice", "Harbour")
    stack = sim.deck_create_stack("alice", board, "To do")
    return sim.deck_create_card("alice", stack, CARD_TITLE, CARD_DESCRIPTION)


def test_a_deck_cards_description_is_read_as_markdown_and_its_title_as_written(
    tmp_path: Path, redis_url: str, model_dir: Path, browser: Browser
) -> None:
    """A Deck card's snippet showed its description's Markdown raw ("**Grease**", "- [ ] task"),
    though Deck edits and shows the description as Markdown (nextcloud/deck
    src/components/card/Description.vue). It is read as a note's is now, found through a real
    search of the simulator's Deck: emphasis hidden, task boxes shown as ☐ and ☑. The card's
    title, which ncindex puts before the description (ncindex/sources/deck_card.py fetch_card)
    and Deck shows as plain text (src/components/cards/CardItem.vue), stays as written: its
    "# ", "*" and backticks are not a heading, emphasis and code; the marks stay on the query's
    word."""
    running = Deployment(tmp_path, redis_url, model_dir, documents=False, setup=add_card)
    try:
        running.wait_ready()
        deadline = time.monotonic() + 120
        found: list[dict[str, object]] = []
        while not found and time.monotonic() < deadline:
            answer = httpx.post(
                f"{running.url}/v1/search",
                json={"query": "winch"},
                auth=("alice", PASSWORDS["alice"]),
                timeout=30,
            )
            found = [r for r in answer.json().get("results", []) if r["doc_type"] == "deck_card"]
            time.sleep(0.5)
        assert found, "the card was not indexed in time"
        assert found[0]["char_start"] == 0 and found[0]["title"] == CARD_TITLE
        page = browser.new_context().new_page()
        open_signed_in(page, running.url, "alice")
        search(page, "winch")
        snippet = page.locator("#results .snippet")
        expect(snippet).to_have_text(
            "# 12 Crane *winch* `check` Grease the winch before the storm. "
            "☐ task: test the winch cable ☑ order new hooks"
        )
        expect(snippet.locator("mark")).to_have_text(["winch"] * 3)
        expect(page.locator("#results .where")).to_have_text("Harbour › To do")
    finally:
        running.close()


def test_a_deck_card_snippet_cut_inside_or_after_its_title_keeps_only_the_title_as_written(
    deployment: Deployment, browser: Browser
) -> None:
    """Edges of a Deck card's snippet (the server's answer stood in): the result's
    ``snippet_title_chars`` says how many of the snippet's first characters are the title
    (code points; a cut's ``…`` counted with it): a snippet cut inside the title is all
    title, shown as written, and so is the rest of a title cut before it; a later chunk's
    snippet or one starting past the title (0) is all description, read as Markdown."""
    card = {"doc_type": "deck_card", "path": None, "title": "*Crane*  `winch`", "char_start": 0}
    raw = "*Crane* `<mark>winch</mark>`…"
    whole = card | {"snippet_title_chars": 16}
    expect_note_snippet(deployment, browser, raw, "winch", "*Crane* `winch`…", 1, whole)
    raw = "*Crane* `<mark>winch</mark>`\n**oil** the <mark>winch</mark>"
    shown = "*Crane* `winch` oil the winch"
    expect_note_snippet(
        deployment, browser, raw, "winch", shown, 2, card | {"snippet_title_chars": 15}
    )
    later = card | {"char_start": 300, "snippet_title_chars": 0}
    raw = "*Crane* `<mark>winch</mark>`\n**oil** it"
    expect_note_snippet(deployment, browser, raw, "winch", "Crane winch oil it", 1, later)
    raw = "…`<mark>winch</mark>`\n* **oil** it"
    past = card | {"snippet_title_chars": 0}
    expect_note_snippet(deployment, browser, raw, "winch", "…winch • oil it", 1, past)
    rest = card | {"snippet_title_chars": 8}
    expect_note_snippet(deployment, browser, raw, "winch", "…`winch` • oil it", 1, rest)


def test_a_deck_card_title_the_server_cleaned_otherwise_than_the_browser_is_still_as_written(
    deployment: Deployment, browser: Browser
) -> None:
    """The page found a card's title in its snippet by cleaning the title in JavaScript as the
    server cleans a snippet (``cardTitleLength``), in the browser's Unicode: where the two
    disagreed the title was not told and was read as Markdown ("*Mom*" shown "Mom"). The
    server now classifies in ``unicodedata2``'s Unicode (18), newer than this Chromium's (156:
    U+20C3 UAE DIRHAM SIGN is unassigned to it, so the old cleaning dropped it from the
    title the snippet keeps it in), and says where the title ends (``snippet_title_chars``,
    code points: an emoji, U+1FA77, one; a byte order mark, which the server drops, none). The
    snippets and counts are the server's own (``snippet`` of the card's text, as
    ncindex/sources/deck_card.py fetch_card makes it, and the title's length)."""
    heart = "\U0001fa77"
    titles = ("Foo\ufeff*Mom* list", f"{heart} *Mom* list", f"a {heart} *Mom* b {heart}",
              "Pay \u20c3 5 *Mom* list")  # fmt: skip
    for title in titles:
        made = snippet(titled_text(title, "**Buy** the lamp"), "lamp", title=len(title))
        raw = made.html()
        shown = " ".join(html.unescape(re.sub("</?mark>", "", raw)).split()).replace("**", "")
        assert "*Mom*" in shown and made.title_chars > 0
        card = {"doc_type": "deck_card", "path": None, "title": title, "char_start": 0}
        card["snippet_title_chars"] = made.title_chars
        expect_note_snippet(deployment, browser, raw, "lamp", shown, 1, card)


def test_a_deck_card_title_count_the_server_never_sends_keeps_no_title(
    deployment: Deployment, browser: Browser
) -> None:
    """``snippet_title_chars`` is a count from 0 up (SearchResult); the page took a negative
    one as a slice's end from the back (``slice(0, -3)``: all but the last three characters
    kept as written, "**oil**" shown raw). One that is not a positive number now keeps no
    title, as 0 does; one past the snippet's end keeps all of it as written, text still."""
    card = {"doc_type": "deck_card", "path": None, "title": "*Crane*  `winch`", "char_start": 0}
    raw = "*Crane* `<mark>winch</mark>`\n**oil** it"
    for count in (-3, -1, "x", None):
        hostile = card | {"snippet_title_chars": count}
        expect_note_snippet(deployment, browser, raw, "winch", "Crane winch oil it", 1, hostile)
    whole = card | {"snippet_title_chars": 10_000}
    shown = "*Crane* `winch` **oil** it"
    expect_note_snippet(deployment, browser, raw, "winch", shown, 1, whole)


def test_a_deck_card_title_of_markdown_and_markup_is_shown_as_written_never_as_a_link(
    deployment: Deployment, browser: Browser
) -> None:
    """A Deck card's title is plain text in Deck (nextcloud/deck src/components/cards/
    CardItem.vue, "{{ displayTitle }}"): its Markdown link, heading hashes, emphasis and
    markup stay as written in the snippet, a query word marked in it, and nothing in it
    becomes an element. The snippet and its count are the server's own (``snippet`` of the
    card's text as ncindex/sources/deck_card.py fetch_card makes it). A guard: it passes on
    the code before the negative-count fix too."""
    title = "# [winch](javascript:window.__xss=1) *<b>oil</b>* & \U0001fa77"
    made = snippet(titled_text(title, "**Grease** the winch"), "winch", title=len(title))
    assert made.title_chars == len(title)
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    answer = fake_answer(10, 1)
    card = {"doc_type": "deck_card", "path": None, "title": title, "char_start": 0}
    card |= {"snippet": made.html(), "snippet_title_chars": made.title_chars}
    answer["results"][0] |= card  # type: ignore[index]
    page.route("**/v1/search", lambda r: r.fulfill(json=answer))
    search(page, "winch")
    located = page.locator("#results .snippet")
    expect(located).to_have_text(f"{title} Grease the winch")
    expect(located.locator("mark")).to_have_text(["winch", "winch"])
    expect(located.locator("*:not(mark):not(br)")).to_have_count(0)
    assert page.evaluate("window.__xss") is None
    context.close()


def test_a_wrong_address_is_a_page_leading_to_the_search(
    deployment: Deployment, browser: Browser
) -> None:
    """A person at a wrong address (a mistyped or old bookmark) saw the API's problem+json;
    the browser gets a page (under the same Content-Security-Policy) whose link leads to the
    search page, and an API client still gets problem+json."""
    page = browser.new_context(viewport={"width": 375, "height": 700}).new_page()
    response = page.goto(deployment.url + "/index.html")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.get_by_role("link", name="Go to the search page").click()
    expect(page.get_by_role("heading", name="Sign in with your Nextcloud account")).to_be_visible()
    answer = httpx.get(deployment.url + "/index.html", timeout=10)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "not_found"
    page.context.close()


def test_an_api_address_opened_in_a_browser_is_a_page_leading_to_the_search(
    deployment: Deployment, browser: Browser
) -> None:
    """A person opening ``/v1/search`` (or another address that takes only POST) in a browser
    saw the 405 problem+json; the browser gets a page, still 405 with its ``Allow``, whose link
    leads to the search page, and an API client still gets problem+json."""
    page = browser.new_context().new_page()
    for path in ("/v1/search", "/ui/logout"):
        response = page.goto(deployment.url + path)
        assert response is not None and response.status == 405
        assert response.headers["content-type"].startswith("text/html")
        assert "POST" in response.headers["allow"]
        assert "script-src 'self'" in response.headers["content-security-policy"]
        expect(page.get_by_role("heading", name="Not a page")).to_be_visible()
    page.get_by_role("link", name="Go to the search page").click()
    expect(page.get_by_role("heading", name="Sign in with your Nextcloud account")).to_be_visible()
    answer = httpx.get(deployment.url + "/v1/search", timeout=10)
    assert answer.status_code == 405
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "method_not_allowed" and "POST" in answer.headers["allow"]
    # the page's template is filled in before it is served, never served as a file
    assert httpx.get(deployment.url + "/ui/static/elsewhere.html", timeout=10).status_code == 404
    page.context.close()


def test_signing_out_leaves_nothing_of_the_search(deployment: Deployment, browser: Browser) -> None:
    """On a shared computer the next person sees neither the query nor the folders."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(deployment.url + "/?q=lighthouse&folder=%2FProjects&folder=")
    sign_in_with_password(page, "alice")
    expect(page.locator("#chips li")).to_have_text(["Folder: /Projects×"])  # "?folder=" names none
    expect(page.locator("#results .title").first).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#status")).to_contain_text("Signed out")
    assert page.locator("#q").input_value() == "" and "?" not in page.url
    assert page.locator("#folders option").count() == 0
    expect(page.locator("#results li")).to_have_count(0)
    sign_in_with_password(page, "bob")
    expect(page.locator("#user-name")).to_have_text("Signed in as bob")
    expect(page.locator("#folders option")).to_have_text(["/Bob Private"])
    expect(page.locator("#chips li")).to_have_count(0)
    context.close()


def test_a_page_reloaded_during_the_login_flow_goes_on_waiting(
    deployment: Deployment, browser: Browser
) -> None:
    """Nextcloud makes the app password when the user approves: a page reloaded while it
    waited must still take it (and so delete it at sign-out), not leave it unused in
    Nextcloud with the page signed out; so must a page whose polls met a Nextcloud down."""
    context = browser.new_context()
    page = context.new_page()
    popup = start_login_flow(context, page, deployment.url)
    page.reload()
    expect(page.locator("#status")).to_contain_text("Waiting for you to approve")
    expect(page.locator("#flow-link")).to_have_attribute("href", popup.url)
    # Nextcloud is down for a while (the polls answered 503): the page waited no more, and
    # an approval made once Nextcloud was back went untaken
    page.route("**/ui/login/poll", lambda route: route.fulfill(status=503, json={}))
    expect(page.locator("#status")).to_contain_text("Nextcloud is not answering just now")
    page.unroute("**/ui/login/poll")
    approve_in_nextcloud(popup, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    assert len(deployment.sim.tree.user("alice").passwords) == 2
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


def test_an_approval_nextcloud_cannot_confirm_just_then_signs_in_once_it_can(
    deployment: Deployment, browser: Browser
) -> None:
    """Nextcloud hands a finished Login Flow's credentials out once. When it could not confirm
    them just then (its user check answered 503), they were lost: the page went on "waiting for
    you to approve" an approval already given, until the flow's 20 minutes ran out, and the app
    password stayed unused. The page says the access was approved and signs in once Nextcloud
    answers again; sign-out deletes that app password."""
    context = browser.new_context()
    page = context.new_page()
    popup = start_login_flow(context, page, deployment.url)
    deployment.sim.faults.set("ocs", status=503)
    try:
        approve_in_nextcloud(popup, "alice")
        expect(page.locator("#status")).to_have_text(
            "You approved the access. Nextcloud is not answering just now to confirm it; "
            "this page keeps asking.",
            timeout=10_000,
        )
    finally:
        deployment.sim.faults.clear()
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=20_000)
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


def hold_first_poll(page: Page) -> list[Route]:
    """Hold the page's first ``/ui/login/poll`` unanswered (the list's first route, for the
    test to answer); any other poll is sent on. The list of the polls sent."""
    polls: list[Route] = []

    def first_held(route: Route) -> None:
        polls.append(route)
        if len(polls) > 1:
            route.continue_()

    page.route("**/ui/login/poll", first_held)
    return polls


def test_the_page_polls_the_login_flow_one_poll_at_a_time(
    deployment: Deployment, browser: Browser
) -> None:
    """The page polled every 1.5 s whether the last poll had been answered: while a slow
    Nextcloud checked the approval, further polls went out, and one sent after the sign-in had
    replaced the session came back "no session", stopping the polling before the sign-in's
    own answer arrived (it was then ignored). A poll waits for the one under way: here the
    first is held unanswered over three of the timer's ticks, and no other is sent."""
    context = browser.new_context()
    page = context.new_page()
    polls = hold_first_poll(page)
    popup = start_login_flow(context, page, deployment.url)
    page.wait_for_timeout(4_500)
    assert len(polls) == 1
    approve_in_nextcloud(popup, "alice")
    polls[0].continue_()
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


def test_a_login_flow_can_be_cancelled(deployment: Deployment, browser: Browser) -> None:
    """The page waited for a Login Flow's approval up to Nextcloud's 20 minutes with no way
    out. "Cancel sign-in" stops the polling, the server forgets the flow (a reload does not wait
    again), the page stays signed out and focus goes to the sign-in button."""
    context = browser.new_context()
    page = context.new_page()
    popup = start_login_flow(context, page, deployment.url)
    cancel = page.get_by_role("button", name="Cancel sign-in")
    cancel.focus()
    with page.expect_response(lambda r: r.url.endswith("/ui/login/cancel")) as answered:
        page.keyboard.press("Enter")
    assert answered.value.json() == {"cancelled": True}
    expect(page.locator("#status")).to_have_text("Sign-in cancelled.")
    expect(page.locator("#flow-hint")).to_be_hidden()
    expect(page.locator("#sign-in-flow")).to_be_focused()
    assert page.evaluate("pollTimer") is None
    assert page.evaluate("fetch('/ui/session').then((r) => r.json())")["signing_in"] is False
    page.reload()
    expect(page.locator("#signed-out")).to_be_visible()
    expect(page.locator("#flow-hint")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("")
    popup.close()
    context.close()


def test_a_poll_of_a_cancelled_sign_in_does_not_stop_the_next_one(
    deployment: Deployment, browser: Browser
) -> None:
    """A poll under way when the sign-in is cancelled and started again answers for the flow
    cancelled: the server answers it 400 "no sign-in under way" (a cancel wins over a poll
    checking the approval, test_ui_session). The page read that answer as the new flow's:
    it stopped polling and said the error, so the new flow's approval made an app password
    nobody took and the page stayed signed out. Here the first poll is held until the new
    flow waits, then given the server's answer to a cancelled sign-in."""
    context = browser.new_context()
    page = context.new_page()
    held = hold_first_poll(page)
    first = start_login_flow(context, page, deployment.url)
    while not held:  # the first poll is under way, held
        page.wait_for_timeout(100)
    page.get_by_role("button", name="Cancel sign-in").click()
    expect(page.locator("#status")).to_have_text("Sign-in cancelled.")
    first.close()
    with context.expect_page() as again:
        page.get_by_role("button", name="Sign in with Nextcloud").click()
    expect(page.locator("#status")).to_contain_text("Waiting for you to approve")
    cancelled = {"code": "invalid_value", "field": "poll_token", "detail": "no sign-in under way"}
    held[0].fulfill(status=400, json=cancelled, content_type="application/problem+json")
    while page.evaluate("polling"):  # its answer read
        page.wait_for_timeout(100)
    approve_in_nextcloud(again.value, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


PROBLEM = "application/problem+json"


def approval_not_kept(
    context: BrowserContext, page: Page, deployment: Deployment
) -> Callable[[], None]:
    """Start a Login Flow on ``page`` with its first poll held: a function answering that
    poll as the server does an approval whose credentials it could not keep (Redis failing as
    they came: their app password deleted, Nextcloud's flow spent; test_ui_session)."""
    held = hold_first_poll(page)
    start_login_flow(context, page, deployment.url).close()
    while not held:
        page.wait_for_timeout(100)
    detail = "sessions cannot be written just now: start the sign-in again"
    spent = {"code": "backend_unavailable", "detail": detail, "restart": True}
    return lambda: held[0].fulfill(status=503, json=spent, content_type=PROBLEM)


def test_an_approval_the_server_could_not_keep_asks_to_sign_in_again(
    deployment: Deployment, browser: Browser
) -> None:
    """An approval whose credentials the server could not keep (Redis failing as they came:
    their app password deleted, Nextcloud's flow spent; test_ui_session) was said as
    "Nextcloud is not answering just now; this page keeps asking", and the page waited for an
    approval already given. The answer's ``restart`` ends the wait, says to sign in again, and
    a new sign-in completes."""
    context = browser.new_context()
    page = context.new_page()
    approval_not_kept(context, page, deployment)()
    expect(page.locator("#status")).to_have_text(
        "The access was approved, but this page could not keep it just now: sign in again."
    )
    with context.expect_page() as again:
        page.get_by_role("button", name="Sign in with Nextcloud").click()
    approve_in_nextcloud(again.value, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


SESSIONS_DOWN = {  # the server's answer while Redis fails (test_ui_session)
    "code": "backend_unavailable",
    "detail": "sessions cannot be read or written",
    "backend": "sessions",
}


def test_a_page_reloaded_after_an_approval_the_server_could_not_keep_does_not_wait_again(
    deployment: Deployment, browser: Browser
) -> None:
    """After a ``restart`` answer (the approval's credentials could not be kept, Nextcloud's
    flow spent) the server's session still named the flow: its cancel could not get through
    while Redis failed, and a page reloaded once Redis was back waited on the spent flow again
    until cancelled. The page remembers the spent flow in the tab and, reloaded, says to sign
    in again and has the server forget it."""
    context = browser.new_context()
    page = context.new_page()
    answer_spent = approval_not_kept(context, page, deployment)
    page.route(  # Redis still failing as the page cancels the spent flow
        "**/ui/login/cancel",
        lambda route: route.fulfill(status=503, json=SESSIONS_DOWN, content_type=PROBLEM),
    )
    with page.expect_response("**/ui/login/cancel"):
        answer_spent()
    page.unroute("**/ui/login/cancel")
    page.unroute("**/ui/login/poll")
    assert page.evaluate("fetch('/ui/session').then((r) => r.json())")["signing_in"] is True
    with page.expect_response("**/ui/login/cancel") as cancelled:
        page.reload()
    assert cancelled.value.json() == {"cancelled": True}
    expect(page.locator("#status")).to_have_text(
        "The access was approved, but this page could not keep it just now: sign in again."
    )
    expect(page.locator("#flow-hint")).to_be_hidden()
    assert page.evaluate("pollTimer") is None
    assert page.evaluate("fetch('/ui/session').then((r) => r.json())")["signing_in"] is False
    page.reload()  # nothing left to wait for, nothing said
    expect(page.locator("#signed-out")).to_be_visible()
    expect(page.locator("#status")).to_have_text("")
    context.close()


def test_a_poll_meeting_the_servers_own_outage_does_not_blame_nextcloud(
    deployment: Deployment, browser: Browser
) -> None:
    """Every 503 of a poll was said as "Nextcloud is not answering just now", a Redis outage
    of ncindex's own too. The sessions' failure (``backend``: test_ui_session) is said as the
    search service's; once it is over, the approval signs in."""
    context = browser.new_context()
    page = context.new_page()
    popup = start_login_flow(context, page, deployment.url)
    page.route(
        "**/ui/login/poll",
        lambda route: route.fulfill(status=503, json=SESSIONS_DOWN, content_type=PROBLEM),
    )
    expect(page.locator("#status")).to_have_text(
        "This search service cannot keep sign-ins just now; this page keeps asking."
    )
    page.unroute("**/ui/login/poll")
    approve_in_nextcloud(popup, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


def test_focus_goes_on_when_signing_in_and_out(deployment: Deployment, browser: Browser) -> None:
    """Signing in or out hides the part that had focus: focus goes on to the query box, or to
    the sign-in button, instead of falling back to the page's top, where a keyboard or
    screen-reader user would start again. A link after the Search button skips the filters
    to the first result."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(deployment.url + "/")
    page.get_by_label("User name").fill("alice")
    page.get_by_label("App password").fill(PASSWORDS["alice"])
    page.keyboard.press("Enter")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice")
    expect(page.locator("#q")).to_be_focused()
    # with the keyboard alone, from the query box to the first result: Tab to "Skip to the
    # results" after the Search button (past it, the filters were 22 Tab stops, 7 per date)
    skip = page.get_by_role("link", name="Skip to the results")
    expect(skip).to_have_count(0)  # no results to skip to
    page.keyboard.type("lighthouse lens")
    page.keyboard.press("Enter")
    expect(page.locator("#results li")).to_have_count(len(ALICE_ALL))
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(page.locator("#results .title").first).to_be_focused()
    page.get_by_role("button", name="Sign out").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_contain_text("Signed out")
    expect(page.locator("#sign-in-flow")).to_be_focused()
    context.close()


def test_how_a_search_ended_is_said_in_the_live_region(
    deployment: Deployment, browser: Browser
) -> None:
    """A screen reader hears "Searching…" from the status region: it must hear the end too
    (the number of results), not silence."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    search(page, "lighthouse lens")
    expect(page.locator("#results li")).to_have_count(len(ALICE_ALL))
    expect(page.locator("#status")).to_have_attribute("aria-live", "polite")
    expect(page.locator("#status")).to_have_text(f"{len(ALICE_ALL)} results.")
    expect(page.locator("#status")).not_to_have_class(re.compile("error"))
    page.locator("#folders").select_option("/Archive")
    expect(page.locator("#status")).to_have_text("1 result.")
    context.close()


def test_a_bm25_match_by_feedback_words_alone_names_them(
    deployment: Deployment, browser: Browser
) -> None:
    """A query word only plan.md holds ("brass") still ranks alice's other documents in the
    BM25 branch, by the words feedback added from the best first results that hold it.
    "Why it matched" showed a BM25 rank and no words at all; it names those words and says
    they were not in the query."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    with page.expect_response(lambda r: r.url.endswith("/v1/search")) as answered:
        search(page, "brass")
    results = answered.value.json()["results"]
    at, first = next(
        (i, r) for i, r in enumerate(results)
        if r["explain"]["sparse"] and not r["explain"]["matched_terms"]
    )  # fmt: skip
    why = first["explain"]
    assert why["feedback_terms"]
    item = page.locator("#results li").nth(at)
    expect(item.locator(".title")).to_have_text(first["title"])
    explain = item.locator(".explain")
    explain.get_by_text("Why it matched").click()
    rows = dict(
        zip(
            explain.locator("dt").all_text_contents(),
            explain.locator("dd").all_text_contents(),
            strict=True,
        )
    )
    assert list(rows) == ["Dense", "BM25", "Fused score", "Feedback words"]
    words = ", ".join(f["word"] for f in why["feedback_terms"])
    said = "(not in your query: added to the BM25 search from the top results' text)"
    assert rows["Feedback words"] == f"{words} {said}"
    context.close()


def test_walking_the_folder_list_with_arrow_keys_is_one_search(
    deployment: Deployment, browser: Browser
) -> None:
    """Each arrow key in the folder list changes its selection: the search waits until the
    list rests, so passing three folders is one search and one history entry, not three."""
    context = browser.new_context()
    page = context.new_page()
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.url) if r.url.endswith("/v1/search") else None)
    open_signed_in(page, deployment.url, "alice")
    search(page, "lighthouse lens")
    expect(page.locator("#results li")).to_have_count(len(ALICE_ALL))
    expect(page.locator("#folders option", has_text="/Projects").first).to_be_attached()
    sent, entries = len(searches), page.evaluate("history.length")
    page.locator("#folders").focus()
    for _ in range(3):
        page.keyboard.press("ArrowDown")
        page.wait_for_timeout(100)
    third = page.locator("#folders option").nth(2).get_attribute("value")
    expect(page.locator("#chips li")).to_have_text([f"Folder: {third}×"])
    page.wait_for_timeout(1000)
    assert len(searches) == sent + 1
    assert page.evaluate("history.length") == entries + 1
    page.go_back()
    expect(page.locator("#chips li")).to_have_count(0)
    context.close()


def threshold_page(
    deployment: Deployment, browser: Browser
) -> tuple[BrowserContext, Page, list[dict[str, object]]]:
    """A page of Alice's, in a context of its own, with her search for "lighthouse lens"
    answered and the Advanced filters open, and the list each later /v1/search request's body
    is added to."""
    context = browser.new_context()
    page = context.new_page()
    sent: list[dict[str, object]] = []
    page.on(
        "request",
        lambda r: sent.append(r.post_data_json) if r.url.endswith("/v1/search") else None,
    )
    open_signed_in(page, deployment.url, "alice")
    search(page, "lighthouse lens")
    expect(page.locator("#status")).to_have_text(f"{len(ALICE_ALL)} results.")
    page.locator("#advanced summary").click()
    return context, page, sent


def test_a_score_threshold_searches_once_typing_rests_and_its_chip_is_the_one_taken(
    deployment: Deployment, browser: Browser
) -> None:
    """README says a threshold change searches once it rests, but the box listened for
    "change", which a number box fires only on Enter or on leaving it: "0.9" typed and left
    sent nothing. And its chip showed the box as the last search read it, refused or not:
    after "5" was refused, "-1" typed showed "Score ≥ 5 × best". Typing now searches once it
    rests (one search for "0.9", sent with it), and the chip is the value the search takes,
    none while the box holds one it refuses."""
    context, page, sent = threshold_page(deployment, browser)
    before = len(sent)
    box = page.locator("#threshold")
    with page.expect_request("**/v1/search") as request:
        box.press_sequentially("0.9", delay=50)
        expect(page.locator("#chips li")).to_have_text(["Score ≥ 0.9 × best×"])
    assert request.value.post_data_json["score_threshold"] == 0.9
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    assert "threshold=0.9" in page.url
    refused = "The score threshold is a share of the best result's score, from 0 to 1."
    for typed in ("5", "-1"):
        box.press("Control+a")
        box.press_sequentially(typed)
        expect(page.locator("#chips li")).to_have_count(0)
        expect(page.locator("#status")).to_have_text(refused)
    box.press("Control+a")
    with page.expect_request("**/v1/search") as request:
        box.press_sequentially("0.5")
        expect(page.locator("#chips li")).to_have_text(["Score ≥ 0.5 × best×"])
    assert request.value.post_data_json["score_threshold"] == 0.5
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    assert [body["score_threshold"] for body in sent[before:]] == [0.9, 0.5]
    assert [body["score_threshold"] for body in sent[before:]] == [0.9, 0.5]
    context.close()


def test_a_threshold_the_box_cannot_read_is_refused_not_dropped(
    deployment: Deployment, browser: Browser
) -> None:
    """A number box holding what is no number ("1e", a lone "-": HTML's value sanitization
    makes its value "", validity.badInput) was read as no threshold: once typing rested the
    search was sent without one, the chip gone, and the results unfiltered without a word. It
    is refused as one outside 0-1 is (no request)."""
    context, page, sent = threshold_page(deployment, browser)
    before = len(sent)
    box = page.locator("#threshold")
    refused = "The score threshold is a share of the best result's score, from 0 to 1."
    for typed in ("1e", "-"):
        box.press("Control+a")
        with page.expect_request("**/v1/search") as request:
            box.press_sequentially("0.5")
        assert request.value.post_data_json["score_threshold"] == 0.5
        expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
        box.press("Control+a")
        box.press_sequentially(typed)
        expect(page.locator("#chips li")).to_have_count(0)
        expect(page.locator("#status")).to_have_text(refused)
        expect(page.locator("#results li")).to_have_count(0)
    assert [body.get("score_threshold") for body in sent[before:]] == [0.5, 0.5]
    context.close()


def test_a_threshold_between_the_boxs_steps_does_not_stop_enter(
    deployment: Deployment, browser: Browser
) -> None:
    """The box's arrows step by 0.05, but any share from 0 to 1 is a threshold (the API's
    score_threshold, and the box's search as it is typed took "0.93", its chip shown): the
    form's own validation held "0.93" a step mismatch, and Enter, in the query box or the
    threshold's, searched nothing (the browser's "nearest valid values" bubble instead)."""
    context, page, _ = threshold_page(deployment, browser)
    box = page.locator("#threshold")
    with page.expect_request("**/v1/search") as request:
        box.press_sequentially("0.93")
    assert request.value.post_data_json["score_threshold"] == 0.93
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    for where in ("#q", "#threshold"):
        with page.expect_request("**/v1/search") as request:
            page.locator(where).press("Enter")
        assert request.value.post_data_json["score_threshold"] == 0.93
        expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    box.press("ArrowUp")
    expect(box).to_have_value("0.95")
    context.close()


def test_a_sign_in_changed_in_another_tab_is_followed(
    deployment: Deployment, browser: Browser
) -> None:
    """Two tabs share the cookie: when bob signs in in the other tab, alice's tab says so and
    shows bob, instead of failing every search with "wrong CSRF token" under alice's name;
    its "Sign out" signs the browser out."""
    context = browser.new_context()
    alices = context.new_page()
    open_signed_in(alices, deployment.url, "alice")
    search(alices, "lighthouse lens")
    expect(alices.locator("#results li")).to_have_count(len(ALICE_ALL))

    bobs = context.new_page()
    bobs.goto(deployment.url + "/")
    bobs.get_by_role("button", name="Sign out").click()
    expect(bobs.locator("#signed-out")).to_be_visible()
    sign_in_with_password(bobs, "bob")
    expect(bobs.locator("#user-name")).to_have_text("Signed in as bob")

    alices.locator("#go").click()
    expect(alices.locator("#status")).to_contain_text("you are signed in as bob now")
    expect(alices.locator("#user-name")).to_have_text("Signed in as bob")
    expect(alices.locator("#results li")).to_have_count(0)
    expect(alices.locator("#folders option")).to_have_text(["/Bob Private"])

    bobs.get_by_role("button", name="Sign out").click()
    expect(bobs.locator("#status")).to_contain_text("Signed out")
    sign_in_with_password(bobs, "alice")
    expect(bobs.locator("#user-name")).to_have_text("Signed in as alice")
    alices.get_by_role("button", name="Sign out").click()  # the tab still showing bob
    expect(alices.locator("#status")).to_contain_text("Signed out")
    bobs.reload()
    expect(bobs.locator("#signed-out")).to_be_visible()
    context.close()


def test_a_link_with_an_overlong_query_searches_what_the_box_would_hold(
    deployment: Deployment, browser: Browser
) -> None:
    """The query box stops at 1000 characters; a shared link's query is cut there too, not
    sent whole and refused with the API's words ("String should have at most 1000
    characters"), and the count says so, as it says a paste the box cut (the rest of the link's
    query was dropped without a word)."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(deployment.url + "/?q=" + "lighthouse%20" * 100 + "x" * 200)
    sign_in_with_password(page, "alice")
    expect(page.locator("#results li")).to_have_count(len(ALICE_ALL))
    assert len(page.locator("#q").input_value()) == 1000
    cut = "Only the first 1000 characters of the link's query were searched."
    expect(page.locator("#status")).to_contain_text(cut)
    expect(page.locator("#status")).not_to_have_class(re.compile("error"))
    page.goto(deployment.url + "/?q=" + "%F0%9F%A7%AD" * 1200)  # 🧭: two UTF-16 units each
    expect(page.locator("#status")).to_contain_text(cut)
    assert len(list(page.locator("#q").input_value())) == 1000
    page.goto(deployment.url + "/?q=lighthouse%20lens")  # whole: nothing said of a cut
    expect(page.locator("#status")).to_have_text(f"{len(ALICE_ALL)} results.")
    context.close()


LINK_REFUSED = "This link's search was not made: its "


@pytest.mark.parametrize(
    ("link", "said"),
    [
        ("threshold=abc", "score threshold “abc” is no number"),
        ("threshold=1e", "score threshold “1e” is no number"),
        ("type=notes", "type “notes” is none of note, file, deck_card, news_item"),
        ("after=yesterday", "“Modified after” “yesterday” is no date (2026-01-31) nor"),
        ("before=2026-13-01", "“Modified before” “2026-13-01” is no date (2026-01-31) nor"),
        ("fusion=max", "fusion “max” is neither rrf nor dbsf"),
        ("q=lens", "“q” is given 2 times"),
        # the form takes the first, as its chip shows
        ("threshold=0.5&threshold=0.9", "“threshold” is given 2 times"),
    ],
)
def test_a_link_the_form_cannot_take_is_refused_not_searched_without_it(
    deployment: Deployment, browser: Browser, link: str, said: str
) -> None:
    """A link's ``threshold=abc`` was dropped without a word: the number box does not read it
    (its value sanitization leaves it empty), and the search went out without a threshold, as
    it did without a type the form has no box for, a date its box does not read, a fusion it
    has no option for, and a second value of what the form holds once. The link's search is
    refused, naming what was not taken, as a
    box holding what it cannot take is (no request, no results, no chip of it); the form shows
    what it took, and searching again searches that."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    sent: list[dict[str, object]] = []
    page.on(
        "request",
        lambda r: sent.append(r.post_data_json) if r.url.endswith("/v1/search") else None,
    )
    page.goto(deployment.url + "/?q=lighthouse%20lens&" + link)
    expect(page.locator("#status")).to_contain_text(LINK_REFUSED + said)
    expect(page.locator("#status")).to_have_class(re.compile("error"))
    expect(page.locator("#results li")).to_have_count(0)
    first = "threshold=0.5&" in link
    expect(page.locator("#chips li")).to_have_text(["Score ≥ 0.5 × best×"] if first else [])
    assert sent == []
    assert link in page.url  # the link stays as it was given
    with page.expect_request("**/v1/search") as request:
        page.locator("#go").click()
    body = request.value.post_data_json
    assert body["query"] == "lighthouse lens"
    assert body.pop("score_threshold", None) == (0.5 if first else None)
    assert not {"doc_types", "fusion", "modified_after", "modified_before"} & set(body), body
    expect(page.locator("#status")).to_have_text(f"{len(ALICE_ALL)} results.")
    context.close()


def test_a_link_the_form_takes_whole_is_searched_with_all_of_it(
    deployment: Deployment, browser: Browser
) -> None:
    """A link of the page's own parameters, each a value the form reads, is searched with
    every one, chips and all (a guard: so it was before); one the form cannot take whole names
    every parameter not taken, and opens "Advanced" where the threshold or fusion was (it was
    searched without them); one with a query of spaces alone says there is no word to search
    for (it said nothing)."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    link = "/?q=lighthouse%20lens&type=file&type=note&fusion=rrf&threshold=0.5"
    link += "&after=2020-01-01T00:00"
    with page.expect_request("**/v1/search") as request:
        page.goto(deployment.url + link)
    body = request.value.post_data_json
    assert (body["doc_types"], body["fusion"], body["score_threshold"]) == (
        ["note", "file"],
        "rrf",
        0.5,
    )
    assert body["modified_after"].startswith("20")
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    expect(page.locator("#chips li")).to_have_count(5)
    page.goto(deployment.url + "/?q=lens&threshold=abc&limit=5&fusion=max")
    expect(page.locator("#status")).to_have_text(
        LINK_REFUSED + "fusion “max” is neither rrf nor dbsf; its score threshold “abc” is "
        "no number (a share of the best result's score, from 0 to 1). Change the search "
        "above, or search again without them."
    )
    expect(page.locator("#link-note")).to_have_text(IGNORED + "“limit”.")
    expect(page.locator("#advanced")).to_have_attribute("open", "")
    expect(page.locator("#fusion")).to_have_value("")
    page.goto(deployment.url + "/?q=%20%20")
    expect(page.locator("#status")).to_have_text("Type a word to search for.")
    context.close()


IGNORED = "Not read from this link (no setting of this page): "


def test_a_link_with_parameters_the_page_does_not_read_is_searched_naming_them(
    deployment: Deployment, browser: Browser
) -> None:
    """A shared link gets parameters the page does not read on its way: a messenger's or a
    mail client's ``fbclid`` or ``utm_source``. The page refused its search for them ("is not a
    setting of this page"), so whoever followed such a link searched nothing. It searches now
    with what it reads, and says beside the status line (not in red: nothing went wrong with
    the search) which parameters it did not read, until the user's next search of their own;
    a parameter it reads given a value its form cannot take is still refused, the others
    named beside the refusal. Many are named by their first five, a long name by its first
    60 characters."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    note = page.locator("#link-note")
    expect(note).to_be_hidden()
    link = "/?q=lighthouse%20lens&fbclid=IwAR0x_Yz&type=note&utm_source=whatsapp&utm_medium=m"
    with page.expect_request("**/v1/search") as request:
        page.goto(deployment.url + link)
    body = request.value.post_data_json
    assert (body["query"], body["doc_types"]) == ("lighthouse lens", ["note"])
    expect(page.locator("#status")).to_have_text("1 result.")
    expect(page.locator("#status")).not_to_have_class(re.compile("error"))
    expect(note).to_have_text(IGNORED + "“fbclid”, “utm_source”, “utm_medium”.")
    expect(note).to_be_visible()
    expect(note).to_have_attribute("role", "status")
    assert page.url.endswith("/?q=lighthouse+lens&type=note")  # the page's own address
    with page.expect_request("**/v1/search"):
        page.locator("#q").press("Enter")
    expect(page.locator("#status")).to_have_text("1 result.")
    expect(note).to_be_hidden()

    names = ["n" * 70, "b", "c", "d", "e", "f", "g"]
    page.goto(deployment.url + "/?q=lens&" + "&".join(f"{name}=1" for name in names))
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    expect(note).to_have_text(IGNORED + "“" + "n" * 60 + "…”, “b”, “c”, “d”, “e” and 2 more.")
    page.goto(deployment.url + "/?q=lens&threshold=abc&utm_source=mail")
    expect(page.locator("#status")).to_contain_text(LINK_REFUSED + "score threshold “abc”")
    expect(page.locator("#status")).to_have_class(re.compile("error"))
    expect(note).to_have_text(IGNORED + "“utm_source”.")
    context.close()


def test_a_links_long_value_is_quoted_by_its_beginning(
    deployment: Deployment, browser: Browser
) -> None:
    """A link's threshold of 3,000 characters was quoted whole in the refusal: the status line
    filled the screen and a screen reader read it all out. Its first 60 characters are quoted,
    then "…"."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    page.goto(deployment.url + "/?q=lens&threshold=" + "9" * 3000)
    expect(page.locator("#status")).to_contain_text(
        LINK_REFUSED + "score threshold “" + "9" * 60 + "…” is no number"
    )
    assert len(page.locator("#status").inner_text()) < 250
    context.close()


def test_a_search_the_server_refuses_names_the_part_refused(
    deployment: Deployment, browser: Browser
) -> None:
    """A link's query or folder holding a NUL character ("%00"), or a query of format
    characters alone (a zero-width space), reaches the form (no box refuses them) and is refused
    by the server (400 invalid_value, its ``field``); the page said the API's detail alone:
    "contains a NUL character". It names what the detail is about."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    refused = "The search was refused: its "
    for link, said in [
        ("q=%00lens", "query contains a NUL character."),
        ("q=%E2%80%8B", "query must contain a printable non-space character."),
        ("q=lens&folder=/Projects%00", "folder “/Projects\x00” contains a NUL character."),
    ]:
        page.goto(deployment.url + "/?" + link)
        expect(page.locator("#status")).to_have_text(refused + said)
        expect(page.locator("#status")).to_have_class(re.compile("error"))
    context.close()


def test_a_pasted_text_cut_by_the_box_is_said(deployment: Deployment, browser: Browser) -> None:
    """A paragraph of 2,000 characters pasted into the query box: the box keeps its first
    1,000 (its maxlength, the API's limit) and the page says only those were searched; a
    short paste, or a search typed afresh, says nothing of it."""
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    expect(page.locator("#folders option", has_text="/Projects").first).to_be_attached()
    paragraph = ("The lighthouse keeper polished the lens and oiled the brass fittings. " * 30)[
        :2000
    ]

    def paste(text: str) -> None:
        page.evaluate("(text) => navigator.clipboard.writeText(text)", text)
        page.locator("#q").fill("")
        page.locator("#q").focus()
        page.keyboard.press("Control+V")

    paste(paragraph)
    assert page.locator("#q").input_value() == paragraph[:1000]
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text(
        re.compile(
            r"^\d+ results?\. Only the first 1000 characters of the pasted text were searched\.$"
        )
    )
    paste("brass fittings")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ results?\.$"))
    context.close()


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two computed ``rgb(r, g, b)`` colours."""

    def luminance(color: str) -> float:
        channels = [int(c) / 255 for c in re.findall(r"\d+", color)[:3]]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_header_text_is_readable(deployment: Deployment, browser: Browser) -> None:
    """ "Signed in as …" is normal-size text on the header's blue: WCAG AA asks 4.5:1."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    style = "(e, p) => getComputedStyle(e)[p]"
    color = page.locator("#user-name").evaluate(style, "color")
    background = page.locator("header").evaluate(style, "backgroundColor")
    assert contrast(color, background) >= 4.5, (color, background)
    context.close()


# What the keyboard focus looks like on the element that has it: whether it shows as
# :focus-visible, its outline's style, width and colour, and the backgrounds the outline sits on
# (the non-transparent ones of its ancestors, out to the first that holds the whole outline).
FOCUS_RING = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const grow = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
  const r = el.getBoundingClientRect();
  const backgrounds = [];
  for (let a = el.parentElement; a; a = a.parentElement) {
    const background = getComputedStyle(a).backgroundColor;
    if (background === "rgba(0, 0, 0, 0)") continue;
    backgrounds.push(background);
    const b = a.getBoundingClientRect();
    if (b.left <= r.left - grow && b.top <= r.top - grow && b.right >= r.right + grow
        && b.bottom >= r.bottom + grow) break;
  }
  return { name: el.tagName + "#" + el.id + "." + el.className + " " + el.textContent.trim(),
           visible: el.matches(":focus-visible"), style: style.outlineStyle,
           width: parseFloat(style.outlineWidth), color: style.outlineColor, backgrounds };
}"""


def focus_rings(page: Page) -> dict[str, dict[str, object]]:
    """The focus ring (:data:`FOCUS_RING`) of each element Tab reaches from the page's top."""
    page.mouse.click(1, 1)  # the header's corner: Tab goes on from there
    rings: dict[str, dict[str, object]] = {}
    for _ in range(80):
        page.keyboard.press("Tab")
        ring = page.evaluate(FOCUS_RING)
        if ring is None:
            break
        rings.setdefault(str(ring["name"]), ring)
    return rings


def test_the_focus_ring_stands_out_from_every_background(
    deployment: Deployment, browser: Browser
) -> None:
    """WCAG 2.2 1.4.11: the keyboard focus outline has 3:1 against each background it sits
    on — the page, the result cards, the filter chips, the header (#ffb300 was 1.8:1 on the
    page). Every element Tab reaches, signed out and signed in with results and a chip."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.route("**/v1/search", lambda route: route.fulfill(json=fake_answer(10, 25)))
    page.goto(deployment.url + "/")
    expect(page.locator("#sign-in-flow")).to_be_visible()
    signed_out = focus_rings(page)
    open_signed_in(page, deployment.url, "alice")
    search(page, "tides")
    page.get_by_label("Notes").check()  # a chip
    expect(page.locator("#chips button")).to_have_count(1)
    expect(page.locator("#more")).to_be_visible()
    page.locator("#advanced summary").click()
    signed_in = focus_rings(page)
    for rings, wanted in ((signed_out, ["#sign-in-flow", "#login-name"]),
                          (signed_in, ["#sign-out", "#q", "#skip", "BUTTON#. ×", "context-button",
                                       "#more", ".title doc-0.md"])):  # fmt: skip
        names = " | ".join(rings)
        assert all(part in names for part in wanted), names
    for name, ring in (signed_out | signed_in).items():
        assert ring["visible"] and ring["style"] == "solid" and ring["width"] >= 2, (name, ring)
        backgrounds = ring["backgrounds"]
        assert isinstance(backgrounds, list) and backgrounds, (name, ring)
        for background in backgrounds:
            ratio = contrast(str(ring["color"]), background)
            assert ratio >= 3, (name, ring["color"], background, round(ratio, 2))
    context.close()


def test_back_after_signing_out_brings_no_search_back(
    deployment: Deployment, browser: Browser
) -> None:
    """Signing out empties the page and its URL; the history entries of the earlier searches
    are still there, and Back must not put their query in the box (where the next person's
    sign-in would search it) nor send it and say the sign-in ended."""
    context = browser.new_context()
    page = context.new_page()
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.url) if r.url.endswith("/v1/search") else None)
    open_signed_in(page, deployment.url, "alice")
    for query in ("lighthouse lens", "brass fittings"):
        page.locator("#q").fill(query)
        page.keyboard.press("Enter")
        expect(page.locator("#status")).to_contain_text("result")
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#status")).to_contain_text("Signed out")
    sent = len(searches)
    page.go_back()
    expect(page).to_have_url(deployment.url + "/")
    page.wait_for_timeout(500)
    assert len(searches) == sent
    expect(page.locator("#status")).to_contain_text("Signed out")
    assert page.locator("#q").input_value() == ""
    sign_in_with_password(page, "bob")
    expect(page.locator("#user-name")).to_have_text("Signed in as bob")
    page.wait_for_timeout(500)
    assert page.locator("#q").input_value() == "" and len(searches) == sent
    context.close()


def test_long_names_do_not_widen_a_phone_screen(deployment: Deployment, browser: Browser) -> None:
    """A file name, folder or snippet URL without spaces breaks inside the phone's width: the
    page never scrolls sideways."""
    context = browser.new_context(viewport={"width": 360, "height": 740})
    page = context.new_page()
    name = "Quarterly_report_final_v2_reviewed_by_legal_and_finance_2026_with_appendix_tables"
    folder = f"/Projects/{name}"
    url = "https://example.org/a/long/path/without/any/spaces/that/keeps/on/going/index.html"
    result = {
        "doc_type": "file", "doc_id": "1", "title": f"{name}.pdf", "score": 1.0,
        "snippet": f"see <mark>{url}</mark> for details", "char_start": 0, "char_end": 1,
        "chunk_index": 0, "modified_at": T0, "path": f"{folder}/{name}.pdf", "url": None,
    }  # fmt: skip
    answer = {"results": [result], "verification": {}, "degraded": False, "model": "m",
              "timings_ms": {}}  # fmt: skip
    page.route(
        "**/v1/folders?*",
        lambda route: route.fulfill(json={"folders": [folder], "total": 1, "next_offset": None}),
    )
    page.route("**/v1/search", lambda route: route.fulfill(json=answer))
    page.goto(deployment.url + "/")
    sign_in_with_password(page, "alice")
    expect(page.locator("#folders option")).to_have_text([folder])
    page.locator("#q").fill("report")
    page.locator("#folders").select_option(folder)
    expect(page.locator("#results .title")).to_have_text(f"{name}.pdf")
    expect(page.locator("#chips li")).to_have_text([f"Folder: {folder}×"])
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, width
    context.close()


def test_right_to_left_text_is_laid_out_right_to_left(
    deployment: Deployment, browser: Browser
) -> None:
    """An Arabic title, snippet or query takes its direction from its text (its full stop at
    its end, on the left), not the page's left-to-right."""
    context = browser.new_context()
    page = context.new_page()
    arabic = "تقرير الميزانية السنوي."
    result = {
        "doc_type": "file", "doc_id": "1", "title": arabic, "score": 1.0,
        "snippet": f"<mark>{arabic}</mark>", "char_start": 0, "char_end": 1,
        "chunk_index": 0, "modified_at": T0, "path": "/Projects/x.md", "url": None,
    }  # fmt: skip
    answer = {"results": [result], "verification": {}, "degraded": False, "model": "m",
              "timings_ms": {}}  # fmt: skip
    page.route("**/v1/search", lambda route: route.fulfill(json=answer))
    open_signed_in(page, deployment.url, "alice")
    page.locator("#q").fill(arabic)
    page.keyboard.press("Enter")
    expect(page.locator("#results .title")).to_have_text(arabic)
    for selector in ("#q", "#results .title", "#results .snippet"):
        assert page.locator(selector).evaluate("e => e.matches(':dir(rtl)')"), selector
    assert page.locator("#results .where").evaluate("e => e.matches(':dir(ltr)')")
    context.close()


def test_no_stale_count_and_no_silent_blank_search(
    deployment: Deployment, browser: Browser
) -> None:
    """Back to the page without a query empties the list and the count with it; a query of
    spaces alone is said to be empty rather than just emptying the list."""
    context = browser.new_context()
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    search(page, "lighthouse lens")
    expect(page.locator("#status")).to_have_text(f"{len(ALICE_ALL)} results.")
    page.go_back()
    expect(page.locator("#results li")).to_have_count(0)
    expect(page.locator("#status")).to_have_text("")
    search(page, "   ")
    expect(page.locator("#status")).to_have_text("Type a word to search for.")
    context.close()


def test_a_date_typed_without_its_time_is_not_left_out_silently(
    deployment: Deployment, browser: Browser
) -> None:
    """A date typed into "After" without its time leaves the input's value empty (HTML's
    datetime-local); a tick of a type then searched without the date the user sees, and said
    nothing. The page asks for the time instead, and sends no search."""
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    open_signed_in(page, deployment.url, "alice")
    search(page, "lighthouse lens")
    expect(page.locator("#status")).to_have_text(f"{len(ALICE_ALL)} results.")
    page.locator("#after").click(position={"x": 12, "y": 10})  # its month part
    page.keyboard.type("01012099")  # month, day, year: no time
    assert page.locator("#after").input_value() == ""
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.url.endswith("/v1/search") else None)
    page.get_by_label("Files").check()
    expect(page.locator("#status")).to_have_text(
        "Finish the date and time of “Modified after”, or clear it."
    )
    expect(page.locator("#results li")).to_have_count(0)
    assert sent == []
    context.close()


def test_pressing_sign_in_again_while_waiting_opens_the_same_flow(
    deployment: Deployment, browser: Browser
) -> None:
    """A second press of "Sign in with Nextcloud" while the first waits opens the same
    Nextcloud page: approving the first window still signs in (a second flow made the page
    wait for that one only, and the first approval's app password stayed unused)."""
    context = browser.new_context()
    page = context.new_page()
    flows: list[str] = []
    page.on("request", lambda r: flows.append(r.url) if r.url.endswith("/ui/login/flow") else None)
    page.goto(deployment.url + "/")
    button = page.get_by_role("button", name="Sign in with Nextcloud")
    with context.expect_page() as first_info:
        button.click()
    first = first_info.value
    expect(page.locator("#status")).to_contain_text("Waiting for you to approve")
    with context.expect_page() as second_info:
        button.click()
    second = second_info.value
    second.wait_for_load_state()
    assert second.url == first.url and len(flows) == 1
    second.close()
    approve_in_nextcloud(first, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


def test_a_double_click_on_sign_in_starts_one_flow(
    deployment: Deployment, browser: Browser
) -> None:
    """A double click on "Sign in with Nextcloud" started two flows and opened two Nextcloud
    windows: approving the first left the page waiting for the second, and the first's app
    password unused in Nextcloud. Now it starts one, and approving it signs in."""
    context = browser.new_context()
    page = context.new_page()
    flows: list[str] = []
    page.on("request", lambda r: flows.append(r.url) if r.url.endswith("/ui/login/flow") else None)
    popups: list[Page] = []
    context.on("page", lambda popup: popups.append(popup))
    page.goto(deployment.url + "/")
    with context.expect_page() as popup_info:
        page.get_by_role("button", name="Sign in with Nextcloud").dblclick()
    expect(page.locator("#status")).to_contain_text("Waiting for you to approve")
    assert len(flows) == 1
    first = popup_info.value
    approve_in_nextcloud(first, "alice")
    expect(page.locator("#user-name")).to_have_text("Signed in as alice", timeout=10_000)
    for popup in popups:  # the same page, opened again if the first answer came between
        if popup is not first:
            popup.wait_for_load_state()
            assert popup.url == first.url
            popup.close()
    sign_out_deleting_the_app_password(page, deployment)
    context.close()


def test_a_search_made_while_the_lists_load_is_sent_once(
    deployment: Deployment, browser: Browser
) -> None:
    """A search typed before the folder and tag lists have loaded is not asked again when they
    arrive: its own query is in the URL by then, and the page took it for a shared link to
    restore, re-rendering the results under the reader."""
    context = browser.new_context()
    page = context.new_page()
    held: list[Route] = []
    page.route("**/v1/folders*", lambda route: held.append(route))  # the lists load slowly
    searches: list[str] = []

    def answer(route: Route) -> None:
        searches.append(route.request.post_data or "")
        route.fulfill(json=fake_answer(1, 1))

    page.route("**/v1/search", answer)
    open_signed_in(page, deployment.url, "alice")
    search(page, "tides")
    expect(page.locator("#results .title")).to_have_text("doc-0.md")
    page.unroute("**/v1/folders*")
    for route in held:
        route.continue_()
    expect(page.locator("#folders option", has_text="/Projects").first).to_be_attached()
    page.wait_for_timeout(300)  # a search the lists' arrival sent would have been asked by now
    assert len(searches) == 1, searches
    context.close()


def test_a_screen_reader_hears_each_results_type(deployment: Deployment, browser: Browser) -> None:
    """The type badge (FILE, NOTE, CARD, NEWS) is the only place a result's type is shown: it
    is in the accessibility tree, before the title; a result's buttons are described by its
    title."""
    context = browser.new_context()
    page = context.new_page()
    page.route("**/v1/search", lambda route: route.fulfill(json=fake_answer(1, 1)))
    open_signed_in(page, deployment.url, "alice")
    search(page, "tides")
    expect(page.locator("#results .title")).to_have_text("doc-0.md")
    tree = page.locator("#results li").aria_snapshot()
    assert re.search(r"text: FILE\s+- link \"doc-0.md\"", tree), tree
    # each result's "Show context" says whose it is (ten alike named buttons did not)
    show_context = page.get_by_role("button", name="Show context")
    expect(show_context).to_have_accessible_description("doc-0.md")
    context.close()


# A browser-based MCP client's call: tools/list by fetch, as the SDK's browser transport sends
# it; the answer, or the error fetch raised (a CORS refusal is a TypeError).
MCP_FETCH = """async ([url, authorization]) => {
  try {
    const answer = await fetch(url, {
      method: "POST",
      headers: { Authorization: authorization, "Content-Type": "application/json",
                 Accept: "application/json, text/event-stream",
                 "Mcp-Protocol-Version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    });
    return { status: answer.status, body: await answer.json() };
  } catch (e) { return { error: String(e) }; }
}"""


def test_a_browser_mcp_client_on_an_allowed_origin_calls_mcp(
    deployment: Deployment, browser: Browser
) -> None:
    """A browser-based MCP client (an inspector's page on another loopback origin,
    ``http://localhost:<port>``) calls ``/mcp`` of ``ncindex up`` across origins: the
    browser's preflight passes and the page reads the tools (it got no CORS answer before). A
    page on an origin not allowed (``evil.localhost``, loopback too) cannot."""
    context = browser.new_context()
    page = context.new_page()
    port = deployment.sim_server.url.rsplit(":", 1)[1]  # any page on a loopback origin will do
    authorization = "Basic " + base64.b64encode(f"alice:{PASSWORDS['alice']}".encode()).decode()
    page.goto(f"http://localhost:{port}/status.php")
    answer = page.evaluate(MCP_FETCH, [deployment.url + "/mcp", authorization])
    assert answer.get("status") == 200, answer
    names = {tool["name"] for tool in answer["body"]["result"]["tools"]}
    assert names == {"search", "fetch", "list_filters", "list_folders", "list_tags", "list_values",
                     "index_status"}  # fmt: skip
    page.goto(f"http://evil.localhost:{port}/status.php")
    refused = page.evaluate(MCP_FETCH, [deployment.url + "/mcp", authorization])
    assert "Failed to fetch" in refused.get("error", ""), refused
    context.close()
