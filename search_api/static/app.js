// The ncindex search page. No HTML is built from document fields except the snippet, whose
// escaping (and <mark>s) is the server's; everything else goes in through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const TYPE_NAMES = { note: "Notes", file: "Files", deck_card: "Deck cards", news_item: "News" };
let session = { user: null, csrf: "", nextcloud_url: "", default_limit: 0 }; // GET /ui/session
let pollTimer = null;
let polling = false; // a poll is under way: the next tick of pollTimer waits for it
let flowStarting = false; // a Login Flow is being started: Nextcloud has not answered yet
let pollUntil = 0;
// Each wait for a Login Flow's approval counts one more (and so does stopping it): a poll under
// way when its sign-in was cancelled or replaced answers for that one, not for the next.
let flowSeq = 0;
// Nextcloud forgets a Login Flow v2 after 20 minutes (nextcloud/server core/Db/LoginFlowV2Mapper.php,
// lifetime 1200 s): the page stops asking then.
const FLOW_LIFETIME_MS = 1200 * 1000;
// What stands in for the answer when the server could not be reached at all.
const UNREACHABLE = { ok: false, status: 0, headers: new Headers() };
// Bidi controls (Cf): shown raw they reorder a name and the text beside it, so a file could pass
// for another (the server strips them from snippets, ncindex/text/snippets.py).
const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
// What the page says when a request of a signed-in page is refused (401): the session's app
// password was revoked, or the session ended, since the page signed in
const SIGN_IN_ENDED = "Your sign-in ended. Sign in again to search.";

let searchSeq = 0; // only the newest search's answer is shown (answers can arrive out of order)
// Results asked for: a page's worth (the server's NCINDEX_SEARCH_DEFAULT_LIMIT, which
// GET /ui/session gives as default_limit), one more page each time "More results" is pressed,
// up to the API's largest limit (POST /v1/search: 1-100). The API has no offset (verification
// decides what a page holds), so more results are a longer first page.
const MAX_RESULTS = 100;
const MAX_QUERY_CHARS = 1000; // POST /v1/search: query of 1-1000 characters (code points)
let shownRequest = null; // the request whose answer is on screen: "More results" asks it again
// The query box's text after a paste longer than the box holds, which the browser cut at its
// maxlength without a word (a 2,000-character paragraph is searched by its first half), or
// after a link's query cut so (fromUrl): {text, what} ("pasted text", "link's query").
let cutQuery = null;
// What of the page's address (its link) the page cannot take, said when the search it asks for
// is refused (fromUrl, search); null when all of it was taken.
let linkRefused = null;
// How much of a value or name from a link the page quotes back (code points): a link can hold
// thousands, which would fill the status line and be read out whole by a screen reader.
const QUOTED_CHARS = 60;
// How many of a link's parameters the page does not read it names, the rest counted.
const IGNORED_NAMED = 5;
// Lists, selects, numbers and dates change at every arrow key or typed date part: the search
// waits until they rest, so that walking through the folder list is one search and one history
// entry, not one per folder passed.
const SETTLE_MS = 600;
let settleTimer = null;
const SIGN_IN_UNAVAILABLE = "You cannot sign in right now";
const WAITING = "Waiting for you to approve the access in Nextcloud…";
// A Login Flow approved whose credentials this server could not keep: Nextcloud has spent it.
const SPENT = "The access was approved, but this page could not keep it just now: sign in again.";
// The sessionStorage item naming the login URL of such a flow (see forgetSpentFlow).
const SPENT_FLOW = "ncindex-spent-flow";
// A result's date as the user's locale writes it, to the minute.
const SHOWN_DATE = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
let resultIds = 0; // ids of result titles, for the buttons of each result to name theirs

// A document's name, path, folder or tag as the page shows it: without bidi controls.
function shown(text) { return String(text).replace(BIDI_CONTROLS, ""); }

function status(text, isError, isCount) {
  $("status").textContent = text || "";
  $("status").classList.toggle("error", Boolean(isError));
  $("status").classList.toggle("count", Boolean(isCount));
}

async function call(method, url, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = session.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method, headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    return { response: UNREACHABLE, data: null }; // offline, or the server is down
  }
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  return { response, data };
}

// ``unavailable`` begins a 503's text: what cannot be done ("Search is unavailable right now",
// "You cannot sign in right now"): a sign-in refused for a Nextcloud that is down did not
// concern searching.
function problemText(response, data, unavailable = "Search is unavailable right now") {
  if (response.status === 0) return "The search service cannot be reached; check the connection and try again.";
  if (response.status === 429) {
    const wait = response.headers.get("Retry-After");
    return "Too many searches: try again" + (wait ? " in " + wait + " s." : " shortly.");
  }
  // a 503 names what failed in its detail (ncindex/errors.py public_reason: "Nextcloud is
  // unavailable", "the vector store is unavailable"): a Nextcloud that is down is not ncindex
  if (response.status === 503) {
    const why = data && data.detail;
    return unavailable + (why ? ": " + why : "") + ". Try again shortly.";
  }
  const detail = data && (data.detail || data.title);
  return detail || "Request failed";
}

// A 401 that says the page's own session has ended (expired in Redis), not that Nextcloud
// refused a password (that one names its field).
function noSession(response, data) { return response.status === 401 && !(data && data.field); }

// A 403 for a CSRF token that is not the cookie's session's: the page's session was replaced in
// another tab or window of this browser (signed out there, or signed in again, maybe as another
// user), and the cookie the browser sends now is that one.
function otherSession(response, data) {
  return response.status === 403 && Boolean(data) && data.code === "csrf_failed";
}

// A fresh session (cookie and CSRF token) for a page whose session has ended; false when the
// server cannot give one.
async function renewSession() {
  const { response, data } = await call("GET", "/ui/session");
  if (!response.ok) return false;
  session = data;
  return true;
}

// A state-changing call of the sign-in, made again once on a fresh session when the page's
// session had ended (it lives 20 minutes unused before sign-in).
async function signInCall(url, body) {
  let answer = await call("POST", url, body);
  const { response, data } = answer;
  if ((noSession(response, data) || otherSession(response, data)) && await renewSession()) {
    answer = await call("POST", url, body);
  }
  return answer;
}

// The page follows the session another tab left in the cookie, and says who is signed in now,
// instead of failing every search with "wrong CSRF token" under the old user's name. Nothing
// of the search shown is kept: it was the old session's.
async function followOtherSession() {
  $("results").replaceChildren();
  forgetResults();
  const { response, data } = await call("GET", "/ui/session");
  if (!response.ok) { status(problemText(response, data), true); return; }
  stopPolling();
  session = data;
  render(false);
  status(session.user
    ? "The sign-in changed in another tab or window: you are signed in as " + session.user + " now. Search again."
    : "You were signed out in another tab or window. Sign in to search.");
}

function stopPolling() {
  flowSeq++;
  clearInterval(pollTimer);
  pollTimer = null;
  $("flow-hint").hidden = true;
  $("flow-link").removeAttribute("href");
}

// --- session -------------------------------------------------------------------------
async function loadSession() {
  const { response, data } = await call("GET", "/ui/session");
  if (!response.ok) {
    $("signed-out").hidden = false; // something to act on once the service is back
    status(problemText(response, data) + " Reload the page once it is back.", true);
    return;
  }
  session = data;
  render();
  // Nextcloud refused the session's app password (revoked since the sign-in): said as a search
  // refused for it says it
  if (data.sign_in_ended) status(SIGN_IN_ENDED, false);
  // a page reloaded while its Login Flow waited for approval goes on waiting: Nextcloud makes
  // the app password on approval, and only this session's polling can take it (and delete it
  // at sign-out)
  if (!session.user && data.signing_in && data.flow_seconds_left > 0) {
    if (data.login_url && data.login_url === sessionStorage.getItem(SPENT_FLOW)) {
      // the flow whose approval this server could not keep (a "restart" answer) and whose
      // cancel did not get through then: Nextcloud has spent it, so waiting would wait for
      // nothing until its 20 minutes ran out
      status(SPENT, true);
      forgetSpentFlow();
      return;
    }
    waitForApproval(data.login_url, data.flow_seconds_left * 1000);
  }
}

// The server forgets a spent flow (POST /ui/login/cancel); the mark that it is spent stays in
// this tab until it has (sessionStorage outlives a reload), so that a page reloaded meanwhile
// does not wait for it again.
async function forgetSpentFlow() {
  const { response, data } = await call("POST", "/ui/login/cancel");
  if (response.ok || noSession(response, data) || otherSession(response, data)) {
    sessionStorage.removeItem(SPENT_FLOW);
  }
}

function render(restore = true) {
  const signedIn = Boolean(session.user);
  // focus in the part about to be hidden (the sign-in form, or "Sign out") would fall to the
  // page's body, and a keyboard or screen-reader user would start again from the top: it goes
  // to the query box, or to the sign-in button
  const leaving = signedIn ? [$("signed-out")] : [$("search"), $("who")];
  const focusLost = leaving.some((part) => !part.hidden && part.contains(document.activeElement));
  $("signed-out").hidden = signedIn;
  $("search").hidden = !signedIn;
  $("who").hidden = !signedIn;
  $("user-name").textContent = signedIn ? "Signed in as " + session.user : "";
  if (focusLost) $(signedIn ? "q" : "sign-in-flow").focus();
  if (signedIn) {
    const before = searchSeq;
    loadPickers().then(() => {
      if (!session.user) return; // the pickers found the sign-in ended
      if (!restore || !location.search) return; // nothing to restore: keep what was typed meanwhile
      // searched while the lists loaded: the URL is that search's, already answered (asking
      // again re-rendered the results under the reader, and sent the search twice)
      if (searchSeq !== before) return;
      fromUrl();
      if ($("q").value || linkRefused) search(false);
    });
  }
}

function signedOut(message) {
  session.user = null;
  stopPolling();
  // the results and lists were the signed-out user's; the query stays, to search again with
  for (const id of ["results", "folders", "tags"]) $(id).replaceChildren();
  forgetResults();
  render();
  status(message || "You are signed out. Sign in to search.", false);
  renewSession(); // the ended session's cookie and token are of no use for signing in again
}

// Nothing of the last user's search stays on the page: query, filters, lists, results, URL.
function clearSearch() {
  $("q").value = "";
  for (const box of document.querySelectorAll("#types input")) box.checked = false;
  for (const id of ["after", "before", "fusion", "threshold"]) $(id).value = "";
  $("folders").replaceChildren();
  $("tags").replaceChildren();
  $("results").replaceChildren();
  forgetResults();
  $("chips").replaceChildren();
  cutQuery = linkRefused = null;
  $("link-note").textContent = "";
  if (location.search) history.replaceState(null, "", location.pathname);
}

async function startFlow() {
  // pressed again while waiting: the same Nextcloud page again, not a second flow (approving
  // the first one would make an app password the page no longer waits for)
  if (pollTimer !== null && $("flow-link").href) {
    window.open($("flow-link").href, "_blank", "noopener");
    return;
  }
  // pressed again before Nextcloud answered (a double click): still one flow and one window
  if (flowStarting) return;
  flowStarting = true;
  let answer;
  try { answer = await signInCall("/ui/login/flow"); } finally { flowStarting = false; }
  const { response, data } = answer;
  if (!response.ok) { status(problemText(response, data, SIGN_IN_UNAVAILABLE), true); return; }
  sessionStorage.removeItem(SPENT_FLOW); // the server ended the flow before: a new one
  window.open(data.login_url, "_blank", "noopener");
  waitForApproval(data.login_url, FLOW_LIFETIME_MS);
}

// Poll for the approval of the Login Flow opened at ``loginUrl`` for at most ``ms``.
function waitForApproval(loginUrl, ms) {
  if (loginUrl) $("flow-link").href = loginUrl;
  $("flow-hint").hidden = !loginUrl;
  status(WAITING);
  clearInterval(pollTimer);
  flowSeq++;
  pollUntil = Date.now() + ms;
  pollTimer = setInterval(pollFlow, 1500);
}

// One poll at a time: a poll whose check of the approval took Nextcloud longer than the timer's
// 1.5 s (a slow or busy Nextcloud) overlapped the next ones, and one of those sent after the
// first had signed in (with the session it replaced) came back "no session", stopped the polling
// and said so, so that the sign-in's own answer, arriving after it, was ignored.
async function pollFlow() {
  if (polling) return;
  if (Date.now() > pollUntil) {
    stopPolling();
    status("The access was not approved in Nextcloud in time; sign in again.", true);
    return;
  }
  polling = true; // call() never throws: an unreachable server is its status 0
  const seq = flowSeq;
  const { response, data } = await call("POST", "/ui/login/poll");
  polling = false;
  if (pollTimer === null) return; // signed in another way meanwhile
  // the sign-in it polled for was cancelled, or another started, meanwhile: its answer (400 "no
  // sign-in under way" for a cancelled one) is not the waiting one's, which goes on — unless it
  // signed in (the browser holds that session's cookie now)
  if (seq !== flowSeq && !(response.ok && data && data.user)) return;
  if (response.status === 0) return; // unreachable for now: ask again
  // the approval came, but this server could not keep it (its session store was down): its app
  // password is deleted and Nextcloud's flow spent, so waiting on would wait for nothing
  if (response.status === 503 && data && data.restart) {
    const spent = $("flow-link").getAttribute("href");
    stopPolling();
    status(SPENT, true);
    if (spent) sessionStorage.setItem(SPENT_FLOW, spent);
    forgetSpentFlow();
    return;
  }
  // Nextcloud down for a while (503): the flow lives on in Nextcloud, and an approval made once
  // it is back makes an app password only this polling takes — stopping here left it unused
  // and the page signed out. Said, and asked again. Once approved ("approved": the server holds
  // what Nextcloud gave and checks it again at the next poll) it is no longer waiting for you.
  // the server's own session store failing ("backend": "sessions") is not Nextcloud's doing
  if (response.status === 503 && data && data.backend === "sessions") {
    status("This search service cannot keep sign-ins just now; this page keeps asking.", true);
    return;
  }
  if (response.status === 503) {
    status(data && data.approved
      ? "You approved the access. Nextcloud is not answering just now to confirm it; this page keeps asking."
      : WAITING + " Nextcloud is not answering just now; this page keeps asking.");
    return;
  }
  if (!response.ok) { stopPolling(); status(problemText(response, data, SIGN_IN_UNAVAILABLE), true); return; }
  if (!data.user) { status(WAITING); return; }
  stopPolling();
  session.user = data.user;
  session.csrf = data.csrf;
  status("");
  render();
}

// "Cancel sign-in": the page stops waiting, and the server forgets the flow (a reload would
// otherwise wait again). Focus goes to the sign-in button: the hint that held it is hidden.
async function cancelFlow() {
  stopPolling();
  $("sign-in-flow").focus();
  status("");
  const { response, data } = await call("POST", "/ui/login/cancel");
  // an ended or replaced session holds no flow of this page's any more
  if (!response.ok && !noSession(response, data) && !otherSession(response, data)) {
    status(problemText(response, data), true);
    return;
  }
  status("Sign-in cancelled.");
}

async function signInWithPassword(event) {
  event.preventDefault();
  const body = { login_name: $("login-name").value, app_password: $("app-password").value };
  const { response, data } = await signInCall("/ui/login/password", body);
  $("app-password").value = "";
  if (!response.ok) {
    status(response.status === 401 && !noSession(response, data)
      ? "Nextcloud did not accept that user name and app password."
      : problemText(response, data, SIGN_IN_UNAVAILABLE), true);
    return;
  }
  stopPolling(); // a Login Flow started before is not needed any more
  session.user = data.user;
  session.csrf = data.csrf;
  status("");
  render();
}

async function signOut() {
  let { response, data } = await call("POST", "/ui/logout");
  // signed in again in another tab: "Sign out" signs this browser out all the same
  if (otherSession(response, data) && await renewSession()) ({ response, data } = await call("POST", "/ui/logout"));
  if (!response.ok && response.status !== 401) { status(problemText(response, data), true); return; }
  clearSearch();
  await loadSession();
  status(data && data.app_password_deleted
    ? "Signed out; the app password was deleted in Nextcloud." : "Signed out.");
}

// --- filters ---------------------------------------------------------------------------
async function fillSelect(select, url, key) {
  const values = [];
  let offset = 0;
  while (offset !== null) {
    const { response, data } = await call("GET", url + "?limit=1000&offset=" + offset);
    // signed in, and Nextcloud refused the credential (revoked since): as a search says it
    if (response.status === 401) { signedOut(SIGN_IN_ENDED); return; }
    if (!response.ok) {
      status(problemText(response, data), true);
      const failed = new Option("Could not be loaded; reload the page", "");
      failed.disabled = true;
      select.replaceChildren(failed);
      return;
    }
    values.push(...data[key]);
    offset = data.next_offset;
  }
  const options = values.map((v) => new Option(shown(v), v));
  if (!options.length) {
    const none = new Option(key === "tags" ? "No tags on your documents" : "No folders yet", "");
    none.disabled = true;
    options.push(none);
  }
  select.replaceChildren(...options);
}

function loadPickers() {
  return Promise.all([fillSelect($("folders"), "/v1/folders", "folders"),
    fillSelect($("tags"), "/v1/tags", "tags")]);
}

function selected(select) { return [...select.selectedOptions].map((o) => o.value).filter(Boolean); }
function checkedTypes() {
  return [...document.querySelectorAll("#types input:checked")].map((i) => i.value);
}
// datetime-local is the browser's local time; the API gets RFC 3339 UTC
function toUtc(local) { return local ? new Date(local).toISOString().replace(/\.\d{3}Z$/, "Z") : null; }

function chip(label, remove) {
  const li = document.createElement("li");
  li.className = "chip";
  const text = document.createElement("span");
  text.textContent = label;
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "×";
  button.setAttribute("aria-label", "Remove filter " + label);
  button.addEventListener("click", () => {
    const index = [...$("chips").children].indexOf(li);
    remove();
    search(true);
    // keyboard users keep their place: the chip now at this position, else the query box
    const buttons = $("chips").querySelectorAll("button");
    (buttons[Math.min(index, buttons.length - 1)] || $("q")).focus();
  });
  li.append(text, button);
  return li;
}

// The score threshold box holds one the search takes: a share of the best score, 0 to 1.
function thresholdTaken() {
  const value = $("threshold").value;
  return value !== "" && Number(value) >= 0 && Number(value) <= 1;
}

function renderChips() {
  const chips = [];
  for (const box of document.querySelectorAll("#types input:checked")) {
    chips.push(chip("Type: " + TYPE_NAMES[box.value], () => { box.checked = false; }));
  }
  if ($("after").value) chips.push(chip("After " + $("after").value.replace("T", " "), () => { $("after").value = ""; }));
  if ($("before").value) chips.push(chip("Before " + $("before").value.replace("T", " "), () => { $("before").value = ""; }));
  for (const option of $("folders").selectedOptions) {
    chips.push(chip("Folder: " + shown(option.value), () => { option.selected = false; }));
  }
  for (const option of $("tags").selectedOptions) {
    chips.push(chip("Tag: " + shown(option.value), () => { option.selected = false; }));
  }
  if ($("fusion").value) chips.push(chip("Fusion: " + $("fusion").value.toUpperCase(), () => { $("fusion").value = ""; }));
  // only a threshold the search takes: a refused one ("5", "-1") is no filter
  if (thresholdTaken()) chips.push(chip("Score ≥ " + $("threshold").value + " × best", () => { $("threshold").value = ""; }));
  $("chips").replaceChildren(...chips);
}

// --- URL state -------------------------------------------------------------------------
function toUrl(push) {
  const p = new URLSearchParams();
  if ($("q").value) p.set("q", $("q").value);
  checkedTypes().forEach((t) => p.append("type", t));
  if ($("after").value) p.set("after", $("after").value);
  if ($("before").value) p.set("before", $("before").value);
  selected($("folders")).forEach((f) => p.append("folder", f));
  selected($("tags")).forEach((t) => p.append("tag", t));
  if ($("fusion").value) p.set("fusion", $("fusion").value);
  if ($("threshold").value) p.set("threshold", $("threshold").value);
  const url = "?" + p.toString();
  if (url !== location.search) history[push ? "pushState" : "replaceState"](null, "", url);
}

// The parameters of a link to the page (toUrl writes them): those given once at most, and those
// given once per value picked.
const LINK_ONCE = ["q", "after", "before", "fusion", "threshold"];
const LINK_MANY = ["type", "folder", "tag"];

// A value or name of a link as the page quotes it: without bidi controls, its first
// QUOTED_CHARS code points.
function quoted(value) {
  const chars = Array.from(shown(value));
  return "“" + chars.slice(0, QUOTED_CHARS).join("") + (chars.length > QUOTED_CHARS ? "…" : "") + "”";
}

// What the page says of a link's parameters it does not read (``names``, in the link's order).
function ignoredText(names) {
  const more = names.length > IGNORED_NAMED ? " and " + (names.length - IGNORED_NAMED) + " more" : "";
  return "Not read from this link (no setting of this page): "
    + names.slice(0, IGNORED_NAMED).map((name) => quoted(name)).join(", ") + more + ".";
}

// The form as the page's address says, and in linkRefused what of it the form cannot take,
// each as the form's own boxes read it: a threshold the number box does not read as a number
// ("abc": its value sanitization leaves it empty, HTML's input type=number), a date the
// datetime-local box does not read, a type or fusion the form has no box or option for, or a
// parameter given twice where the form holds one. Left unsaid, the search went out without
// it: a threshold, a date or a type filter dropped, the results unfiltered. A parameter the
// page does not read at all is no setting of its search (a "fbclid" or "utm_source" a
// messenger or mail client adds to a shared link, a misspelt "treshold", a "limit": More
// results asks for longer pages): the search is made without it, and #link-note names it
// until the next search of the user's own.
function fromUrl() {
  const p = new URLSearchParams(location.search);
  const refused = [];
  const ignored = [];
  for (const name of new Set(p.keys())) {
    if (!LINK_ONCE.includes(name) && !LINK_MANY.includes(name)) {
      ignored.push(name || "=" + p.get(name)); // "?q=lens&=x" names no parameter
    } else if (LINK_ONCE.includes(name) && p.getAll(name).length > 1) {
      refused.push(quoted(name) + " is given " + p.getAll(name).length + " times");
    }
  }
  $("link-note").textContent = ignored.length ? ignoredText(ignored) : "";
  // a link's query is cut where typing or pasting would stop (the API takes 1000 characters),
  // and said so as a paste cut is; its line breaks are spaces (a one-line box drops them,
  // joining the words on either side); it is taken without bidi controls (shown): a link's
  // "\u202Egpj.exe" showed in the box as "exe.jpg", and the search is of what the box shows
  const query = Array.from(shown((p.get("q") || "").replace(/\r\n?|\n/g, " ")));
  $("q").value = query.slice(0, MAX_QUERY_CHARS).join("");
  cutQuery = query.length > MAX_QUERY_CHARS ? { text: $("q").value, what: "link's query" } : null;
  // a link's query of bidi controls alone leaves the box empty: refused, not dropped unsaid
  // (an empty box makes no search, and the page said nothing of the link's query)
  if (p.get("q") && !query.length) refused.push("query is nothing but bidi controls (invisible)");
  const types = p.getAll("type").filter(Boolean); // "?type=" names no type
  const boxes = [...document.querySelectorAll("#types input")];
  for (const box of boxes) box.checked = types.includes(box.value);
  for (const type of new Set(types)) {
    if (!boxes.some((box) => box.value === type)) {
      refused.push("type " + quoted(type) + " is none of " + boxes.map((box) => box.value).join(", "));
    }
  }
  // a box given what it does not read holds "" (its value sanitization)
  const read = (id, given) => {
    $(id).value = given;
    return given === "" || $(id).value !== "";
  };
  // a date without its time ("2026-01-31", as the API and the README's examples take it) is
  // the start of that day where the user is, as the box's own dates and times are (toUtc);
  // the API reads a naive date as UTC midnight, but the page sends every date as UTC
  for (const id of ["after", "before"]) {
    const given = p.get(id) || "";
    if (!read(id, /^\d{4}-\d{2}-\d{2}$/.test(given) ? given + "T00:00" : given)) {
      refused.push("“Modified " + id + "” " + quoted(given)
        + " is no date (2026-01-31) nor date and time (2026-01-31T09:00)");
    }
  }
  const pick = (select, given) => {
    const values = given.filter(Boolean); // "?folder=" names no folder
    for (const v of values) {
      if (![...select.options].some((o) => o.value === v)) select.add(new Option(shown(v), v));
    }
    for (const o of select.options) o.selected = values.includes(o.value);
  };
  pick($("folders"), p.getAll("folder"));
  pick($("tags"), p.getAll("tag"));
  if (!read("fusion", p.get("fusion") || "")) {
    $("fusion").value = ""; // shown as the server default, not as a blank list
    refused.push("fusion " + quoted(p.get("fusion")) + " is neither rrf nor dbsf");
  }
  if (!read("threshold", p.get("threshold") || "")) {
    refused.push("score threshold " + quoted(p.get("threshold")) + " is no number (a share of the best result's score, from 0 to 1)");
  }
  $("advanced").open = Boolean($("fusion").value || $("threshold").value || p.get("fusion") || p.get("threshold"));
  linkRefused = refused.length ? refused : null;
  renderChips();
}

// --- search ----------------------------------------------------------------------------
function requestBody() {
  const body = { query: $("q").value, explain: true, limit: session.default_limit }; // explain: "Why it matched"
  const types = checkedTypes();
  if (types.length) body.doc_types = types;
  if ($("after").value) body.modified_after = toUtc($("after").value);
  if ($("before").value) body.modified_before = toUtc($("before").value);
  const folders = selected($("folders"));
  if (folders.length) body.path_prefixes = folders;
  const tags = selected($("tags"));
  if (tags.length) body.tags = tags;
  if ($("fusion").value) body.fusion = $("fusion").value;
  if ($("threshold").value !== "") body.score_threshold = Number($("threshold").value);
  return body;
}

// No results on screen any more: nothing for "More results" to extend.
function forgetResults() {
  clearTimeout(settleTimer);
  shownRequest = null;
  $("skip").hidden = true;
  $("more").hidden = true;
  $("more-problem").hidden = true;
}

function searchWhenSettled() {
  clearTimeout(settleTimer);
  settleTimer = setTimeout(() => search(true), SETTLE_MS);
}

async function search(push) {
  clearTimeout(settleTimer); // a search now is the one a pending change would have made
  const seq = ++searchSeq;
  forgetResults();
  renderChips();
  if (push) $("link-note").textContent = ""; // a search of the user's own: no link's
  const refuse = (text) => { $("results").replaceChildren(); status(text, true); };
  // the search a link asks for, refused as a box holding what it cannot take is; the form shows
  // what it took, and the next search searches that
  if (linkRefused) {
    const refused = linkRefused;
    linkRefused = null;
    refuse("This link's search was not made: its " + refused.join("; its ")
      + ". Change the search above, or search again without " + (refused.length > 1 ? "them." : "it."));
    return;
  }
  if (!$("q").value.trim()) {
    // no count of results gone, and a query of spaces alone is not dropped without a word
    // (nor a link's); Back to the page without a query says nothing
    $("results").replaceChildren();
    status($("q").value ? "Type a word to search for." : "");
    return;
  }
  // a date typed without its time (or half typed) has the value "" (HTML's datetime-local):
  // searched so, the filter the user sees typed would be left out without a word. The form's
  // own validation says so on Enter; a checkbox or list change searches past it.
  const unfinished = ["after", "before"].find((id) => $(id).validity.badInput);
  if (unfinished) {
    refuse("Finish the date and time of “Modified " + unfinished + "”, or clear it.");
    return;
  }
  if ($("after").value && $("before").value && $("after").value >= $("before").value) {
    refuse("“Modified after” must be earlier than “Modified before”.");
    return;
  }
  // a box holding what is no number ("1e", a lone "-") has the value "" (HTML's value
  // sanitization, validity.badInput): searched so, the typed threshold would be dropped unsaid
  if ($("threshold").validity.badInput || ($("threshold").value !== "" && !thresholdTaken())) {
    refuse("The score threshold is a share of the best result's score, from 0 to 1.");
    return;
  }
  toUrl(push);
  status("Searching…");
  const body = requestBody();
  const { response, data } = await call("POST", "/v1/search", body);
  if (seq !== searchSeq) return; // a newer search was started meanwhile
  if (response.status === 401) { signedOut(SIGN_IN_ENDED); return; }
  if (otherSession(response, data)) { followOtherSession(); return; }
  if (!response.ok) { $("results").replaceChildren(); status(refusedText(body, data) || problemText(response, data), true); return; }
  show(body, data);
}

// The page's words for the parts of a search (POST /v1/search) whose value a 400 names by its
// ``field`` ("query", "tags[0]", ncindex/web/problems.py): what a link put in the form and the
// server alone refuses (a query or folder holding a NUL character, a query of format
// characters alone) said with the API's detail alone read "contains a NUL character".
const FIELD_NAMES = {
  query: "query", doc_types: "type", path_prefixes: "folder", tags: "tag", fusion: "fusion",
  modified_after: "“Modified after”", modified_before: "“Modified before”", score_threshold: "score threshold",
};
// What the page says of a 400 answering ``body`` whose field it knows, "" for any other answer.
function refusedText(body, data) {
  const m = data && typeof data.field === "string" && /^(\w+)(?:\[(\d+)\])?$/.exec(data.field);
  if (!m || !FIELD_NAMES[m[1]] || !data.detail) return "";
  const values = body[m[1]];
  const value = m[2] !== undefined && Array.isArray(values) ? " " + quoted(values[Number(m[2])]) : "";
  return "The search was refused: its " + FIELD_NAMES[m[1]] + value + " " + data.detail + ".";
}

// "More results": the search on screen asked again as it was sent (not as the form reads now)
// for one more page. The longer answer replaces the list: its first results are mostly those
// shown, though fusion over a deeper candidate pool can reorder them. Focus moves to the result
// after as many as were shown. A failed attempt leaves the list as it was, to try again.
async function showMore() {
  if (!shownRequest) return;
  const seq = ++searchSeq;
  const before = $("results").children.length;
  const body = { ...shownRequest, limit: Math.min(shownRequest.limit + session.default_limit, MAX_RESULTS) };
  $("more").hidden = true;
  $("more-problem").hidden = true;
  status("Searching…");
  const { response, data } = await call("POST", "/v1/search", body);
  if (seq !== searchSeq) return;
  if (response.status === 401) { signedOut(SIGN_IN_ENDED); return; }
  if (otherSession(response, data)) { followOtherSession(); return; }
  if (!response.ok) {
    $("more").hidden = false;
    status(problemText(response, data), true);
    // and beside the button, where the reader is: the status line is above the results
    $("more-problem").textContent = problemText(response, data);
    $("more-problem").hidden = false;
    return;
  }
  show(body, data);
  const items = $("results").children;
  const next = items[Math.min(before, items.length - 1)];
  if (next) next.querySelector(".title").focus();
  else $("q").focus();
}

// The answer to ``body`` on screen; "More results" under a full page (a short one was all the
// search found).
// The API's 100 results are the end of "More results" but not of what matches: said, with what
// to do, and so is a pasted text the box had to cut (the search was of its beginning only).
function show(body, data) {
  shownRequest = body;
  $("results").replaceChildren(...data.results.map(resultItem));
  $("skip").hidden = !data.results.length;
  $("more").hidden = data.results.length < body.limit || body.limit >= MAX_RESULTS;
  const found = data.results.length;
  // a phrase in quotes is searched as its words (neither branch knows phrases): said, so that
  // results without the phrase do not look like a broken search
  const quotes = /["“”„«»]/.test(body.query)
    ? " Quotes do not search for an exact phrase: the words are searched in any order." : "";
  const cut = cutQuery && body.query === cutQuery.text
    ? " Only the first " + MAX_QUERY_CHARS + " characters of the " + cutQuery.what + " were searched." : "";
  const notes = quotes + uncheckedText(data) + cut;
  const withheld = Boolean(data.verification && data.verification.withheld);
  const hints = found ? "" : hintText(body, data);
  if (!found && hints) status("No results." + hints + notes);
  else if (!found) status((withheld ? "No results shown." : "No results. Try other words or remove a filter.") + notes);
  else if (data.degraded) status("Keyword results only: the semantic half of the search is unavailable right now." + notes);
  else if (found >= MAX_RESULTS) {
    status(found + " results, the most one search shows: add words or a filter to narrow it." + notes, false, !notes);
  }
  // no result is a BM25 candidate (its explain has no "sparse"): no document holds a word of
  // the query — a typo, or a word of no document — and the dense half found the nearest in
  // meaning, which without a word would read as matches of the words
  else if (data.results.every((r) => r.explain && !r.explain.sparse)) {
    status(countText(found) + " The keyword search found no word of your query as written: these are the closest in meaning. Check the spelling, or try other words." + notes);
  }
  // said in the live region too: a screen reader hears how the search ended, not "Searching…" alone
  else status(countText(found) + notes, false, !notes);
}

// The API's hints for an empty answer, in the page's words: the folder or tag picked (read
// back from ``body`` at the hint's ``field``, "path_prefixes[0]" or the whole "tags") that
// holds none of the reader's documents, and the picker that lists theirs; the hint's own
// detail names REST endpoints, which are not the page's.
const PICKERS = {
  path_prefixes: ["No document you can read is in the folder", "No document you can read is in any of the folders", "Folders"],
  tags: ["No document you can read has the tag", "No document you can read has any of the tags", "Tags"],
};
function hintText(body, data) {
  let text = "";
  for (const hint of data.hints || []) {
    const m = /^(\w+)(?:\[(\d+)\])?$/.exec(hint.field);
    const picker = m && PICKERS[m[1]];
    if (!picker || !Array.isArray(body[m[1]])) continue;
    const values = m[2] === undefined ? body[m[1]] : [body[m[1]][Number(m[2])]];
    const named = values.map((v) => "“" + shown(v) + "”").join(", ");
    text += " " + picker[values.length > 1 ? 1 : 0] + " " + named + ": pick one from " + picker[2] + ".";
  }
  return text;
}

// What Nextcloud could not confirm during the search (it did not answer, or answered an
// error: POST /v1/search ``verification``): results left out (NCINDEX_UNVERIFIED_RESULTS=drop,
// ``withheld``), which read as "nothing found" or a short list, and results shown unconfirmed
// (``verified: false``), each marked under its snippet. "" when everything was confirmed.
function uncheckedText(data) {
  const withheld = (data.verification && data.verification.withheld) || 0;
  const unconfirmed = data.results.filter((r) => r.verified === false).length;
  let text = "";
  if (unconfirmed) {
    text += " Nextcloud could not confirm " + (unconfirmed === data.results.length ? "them" : unconfirmed + " of them")
      + " just now: " + (unconfirmed === 1 ? "it is" : "they are") + " marked below.";
  }
  if (withheld) {
    text += " " + (withheld === 1 ? "1 result" : withheld + " results")
      + " left out: Nextcloud could not confirm " + (withheld === 1 ? "it" : "them") + " just now. Try again shortly.";
  }
  return text;
}

function countText(n) { return n === 1 ? "1 result." : n + " results."; }

function resultItem(r) {
  const li = $("result-template").content.firstElementChild.cloneNode(true);
  li.dataset.docKey = r.doc_type + ":" + r.doc_id;
  li.querySelector(".icon").classList.add(r.doc_type);
  li.querySelector(".icon").title = TYPE_NAMES[r.doc_type] || r.doc_type;
  const link = li.querySelector(".title");
  link.textContent = shown(r.title || "(untitled)");
  if (r.open_url) link.href = r.open_url; // the server's link (ncindex/search/links.py)
  // none (a news item whose link is not http(s)): still a place "Skip to the results" and
  // "More results" can move focus to, else focus stayed where it was
  else link.tabIndex = -1;
  // every result has a "Show context" and a "Why it matched": each is described by its title,
  // so that a screen reader going from button to button hears which result it belongs to
  link.id = "result-title-" + (++resultIds);
  for (const control of li.querySelectorAll(".context-button, .explain summary")) {
    control.setAttribute("aria-describedby", link.id);
  }
  const where = whereText(r);
  li.querySelector(".where").textContent = where;
  if (!where) li.querySelector(".sep").remove(); // nothing known of where it is: no "·" before the date
  const time = li.querySelector(".modified");
  const when = new Date(r.modified_at * 1000);
  time.dateTime = when.toISOString();
  time.textContent = SHOWN_DATE.format(when); // hours and minutes; the seconds are in the title
  time.title = when.toLocaleString();
  const snippet = li.querySelector(".snippet");
  snippet.innerHTML = r.snippet; // server-escaped text with <mark>s
  // the explain's term offsets are into the snippet's text as the server made it
  const snippetText = snippet.textContent;
  showText(snippet, r, r.doc_type === "deck_card" ? cardTitleUnits(r, snippetText) : 0, true);
  showBreaks(snippet, r.doc_type === "file" && LINED_FILES.test(r.path || ""));
  // not confirmed with Nextcloud just now (NCINDEX_UNVERIFIED_RESULTS: shown whole, or without
  // its text: an empty snippet), said under it; its context is refused until it is confirmed
  if (r.verified === false) {
    const note = document.createElement("p");
    note.className = "unverified";
    note.textContent = "Could not be checked with Nextcloud just now: you may no longer have access."
      + (r.snippet ? "" : " Its text is withheld until it can be.");
    li.querySelector(".snippet").after(note);
  }
  const button = li.querySelector(".context-button");
  button.addEventListener("click", () => toggleContext(r, li, button));
  if (r.explain) renderExplain(li.querySelector(".explain"), r.explain, snippetText);
  return li;
}

// Where a result is, as a file shows its path: a news item's link, a Deck card's board and stack
// ("Board › Stack", the titles Nextcloud gave the search's check of it; none when it was not
// confirmed). Also a context answer's (the same fields, from its own check).
function whereText(r) {
  if (r.doc_type === "news_item") return shown(r.url || "News");
  if (r.doc_type === "deck_card") return shown([r.board_title, r.stack_title].filter(Boolean).join(" › "));
  return shown(r.path || "");
}

// A result's text in ``element`` (its snippet, or a chunk of its context) as its doc_type shows
// it: a note's, a Markdown file's or a Deck card's without its Markdown syntax (a card's first
// ``title`` characters, its title, as written), a file's with the headings ncindex wrote hidden.
// With ``lines`` (a snippet: HTML shows its "\n" as a space), the Markdown's line breaks that
// are its structure are shown as line breaks (see LINE_BREAK); a context chunk keeps all its
// lines anyway (app.css .context).
function showText(element, r, title, lines = false) {
  if (r.doc_type === "note" || /\.(md|markdown)$/i.test(r.path || "")) hideMarkdown(element, 0, lines);
  else if (r.doc_type === "deck_card") hideMarkdown(element, title, lines);
  // a news item's text is its HTML body's text (ncindex/sources/news_item.py item_document,
  // extract_text with no Markdown headings), which News shows as HTML (nextcloud/news
  // src/components/feed-display/FeedItemDisplay.vue, v-html="sanitizedBody"): its "*" and "#"
  // are the article's words, shown as written
  else if (HEADED_FILES.test(r.path || "")) hideHeadings(element);
}

// A snippet's paragraph breaks (the server's "\n\n" for a blank line, ncindex/text/snippets.py)
// shown as line breaks: HTML shows a "\n" as a space, so a paragraph's end read as its next
// sentence. With ``lines`` (a file of LINED_FILES) every single "\n" too: its lines are its
// structure. Elsewhere a single "\n" stays a space: prose (a PDF's, a DOCX's, a text file's, an
// e-book's) breaks its lines where the page or the editor wrapped them, and a note's lines
// that are structure were shown as such by hideMarkdown (LINE_BREAK). Only the snippet's own
// text nodes (a code block keeps its lines, see hideMarkdown).
function showBreaks(snippet, lines) {
  const breaks = lines ? /(\n\n?)/ : /(\n\n)/;
  for (const node of [...snippet.childNodes]) {
    if (node.nodeType !== Node.TEXT_NODE || !breaks.test(node.data)) continue;
    const pieces = node.data.split(breaks); // text, break, text, …
    node.replaceWith(...pieces.flatMap((piece, i) => (i % 2 ? [] : i ? [document.createElement("br"), pieces[i - 1] + piece] : [piece])));
  }
}

// Markdown syntax a note's (or a Deck card's) snippet would show raw (the server's snippet is
// the chunk's text, each run of whitespace one space, or one "\n" where it held a line break (two
// where it held a blank line, a code line's indentation kept after it), a
// cut at a line break keeping it beside the "…": ncindex/text/snippets.py): heading hashes and
// "*" list bullets at the start of a line (a bullet shown as "•"; a "-" bullet stays; after a cut's "…" only where
// the server kept the break, "…\n* item", as a cut inside a line, "…2 * 3", is no line's
// start), numbered-list markers ("1. ", "1) ": shown as "•" only in a run of three consecutive
// items, see numberedItems: a lone "5. " could end a sentence), a task's box at a line's start
// (☐ or ☑), emphasis delimiters as CommonMark pairs them (see emphasis), the "[", "](url)" of a
// link (its text stays), a fenced code block's fences (with their language, see codeBlocks)
// and the backticks around a code span (the code of both stays as written: no other rule reads
// it), a table's pipes and "|---|---|" row (see TABLE_RULE), and the backslash of a backslash
// escape or of a hard line break (see CODE_OR_ESCAPE).
// Only text outside the <mark>s changes, so every mark still wraps the word it wrapped. Each
// mark stands as MARK_HOLDER (a letter to the patterns) while the text around it is read, each
// code span as CODE_HOLDER while emphasis is paired, each escaped character as ESCAPE_HOLDER
// plus its code (no pattern's syntax, punctuation to emphasis); the nodes are set as text,
// never parsed as HTML. A snippet already holding a character of HOLDERS stays as it came.
const MARK_HOLDER = "\uE000";
// a heading's hashes, at the start of the text or of a line (CommonMark 0.31 §4.2)
const HEADING = /(?<=^|\n)#{1,6} +(?=\S)/g;
const CODE_HOLDER = "\uE001";
// a note's line break that is its structure (LINE_BREAK, ROW_BREAK), set before its "\n"
const LINE_HOLDER = "\uE002";
// A fenced code block's opening line (CommonMark 0.31.2 §4.5 "Fenced code blocks"): at a line's
// start, three or more backticks (then an info string holding no backtick) or tildes (then any)
// (its info string stops before a "…" ending the snippet: the server's cut, shown, not a language)
const FENCE_OPEN = /(?<=^|\n)(`{3,}(?=[^`\n]*(?:\n|$))|~{3,})((?:(?!…$)[^\n])*)/g;
const NUMBERED = /(?<=^|\s)(\d{1,2})([.)]) +(?=\S)/g;
// What opens a block that interrupts a paragraph, read at a line's start (CommonMark 0.31.2 §4.1
// thematic breaks, §4.2 ATX headings, §4.3 setext heading underlines, §5.1 block quotes, §5.2
// list items: a bullet, or "1." / "1)", with text after it), a blank line (§4.9: the paragraph
// ends there; the server keeps one as "\n\n"), or the end of the prose (a fenced code block
// or indented one follows, see codeBlocks). An HTML block's start (§4.6) is not told.
const BLOCK_START = String.raw`$|\n|#{1,6}(?:[ \n]|$)|[-*+] |1[.)] |>|(?:(?:\* ?){3,}|(?:_ ?){3,}|=+ ?|-+ ?)(?:\n|$)`;
// A code span, or a backslash escape (CommonMark 0.31 §2.4: a backslash before an ASCII
// punctuation character, which is then a literal; before any other character the backslash is
// one), or a hard line break (§6.7: a backslash ending a line, unless the next line opens a
// block, where the paragraph ends and the backslash is one; the escape group is then empty),
// whichever starts first: read left to right, an escaped backtick opens no code span and a
// backslash inside one escapes nothing (§6.1), "\\" is one backslash. A span opens at a whole
// run of backticks (§6.1: a backtick string is "not preceded or followed by a backtick"), so
// the "```" of "a ``` b `c` d", which no run of three closes, is text and "`c`" the span (the
// run's last backtick opened one to the next "`", "a `` b c` d"), and is closed only by a run as
// long, the backticks of other runs inside it code (``` `x` ``` shows "`x`"). A heading's line ending in a
// backslash holds no hard break (§6.7: not at the end of a block; an ATX heading is one line),
// its backslash is text: "# Title\" shows "Title\".
const CODE_OR_ESCAPE = new RegExp(
  "(?<!(?<!\\\\)`)(`+)(?!`)([\\s\\S]*?[^`])\\1(?!`)|\\\\([!-/:-@[-`{-~]|" +
  "(?<!(?:^|\\n)#{1,6}[ \\t][^\\n]*)(?=\\n(?!" + BLOCK_START + ")))");
const ESCAPE_HOLDER = 0xE100;
const ESCAPED = /[\uE121-\uE17E]/g; // ESCAPE_HOLDER plus "!" to "~"
const HOLDERS = new RegExp(`[${MARK_HOLDER}${CODE_HOLDER}${LINE_HOLDER}]|${ESCAPED.source}`);
// Where a note's single line break is its structure (a blank line's "\n\n" is a paragraph
// break, see showBreaks; any other "\n" is a soft line break, CommonMark 0.31.2 §6.8, shown as
// a space): before a line opening a block that interrupts a paragraph (BLOCK_START: a heading,
// a list item — a bullet, a task, "1." — a block quote, a thematic break), before a further
// item of a numbered list (a line "2. …" after a line "1. …", §5.3: one list's items), and
// after a heading's line (§4.2: an ATX heading is one line), a thematic break's or a setext
// heading's underline (§4.1, §4.3: one line each). Not a "\n" starting the prose: a code
// block's box (a block of its own, app.css .code-block) ended the line before it.
const LINE_BREAK = new RegExp(String.raw`(?<!^|\n)\n(?!\n|$)(?=${BLOCK_START})` +
  String.raw`|(?<=(?:^|\n)\d{1,9}[.)] [^\n]*)\n(?=\d{1,9}[.)] +\S)` +
  String.raw`|(?<=(?:^|\n)(?:#{1,6} [^\n]*|(?:\* ?){3,}|(?:_ ?){3,}|=+ ?|-+ ?))\n(?!\n|$)`, "g");
// In a table (GFM 0.29 §4.10), each row is a line: before a row, and after one, but not at the
// "|---|" rule row, which goes (TABLE_RULE), nor at the prose's start (as LINE_BREAK).
const ROW_BREAK = /(?<!^|\n)\n(?=\|)(?!\|[ :|-]*(?:\n|$))|(?<=(?:^|\n)\|[^\n]*)\n(?!\n|$|\|[ :|-]*(?:\n|$))/g;
// a heading's hashes and a list item's marker are ones at the start of a line (CommonMark 0.31
// §4.2 "ATX headings", §5.2 "List items", §5.3 "Task list items" of GFM): "Ticket # 42" and
// "2 * 3" in a sentence are neither
const MARKDOWN = [
  [HEADING, ""],
  [/(?<=^|\n)[-*] \[ \] +(?=\S)/g, "☐ "],
  [/(?<=^|\n)[-*] \[[xX]\] +(?=\S)/g, "☑ "],
  [/(?<=^|\n)\* +(?=\S)/g, "• "],
  [/!?\[(?=[^\]]*\]\([^)\s\uE000]*\))/g, ""],
  [/\]\([^)\s\uE000]*\)/g, ""],
];

// Files whose extracted text ncindex itself heads with Markdown headings, the formats
// ncindex/text/extract.py reads into Markdown (_READERS): a slide ("# Slide 1: Title"), a sheet
// ("# Sheet: Q3"), an e-mail's subject ("# Subject", a forwarded one's "## …"), an event or a
// contact ("# Title"), an e-book's chapters. Their snippets lose the heading's hashes, at the
// start of a line only (the snippet's start counts, and so does a line after a cut's "…\n", but
// not a "…" the server cut inside a line); the rest of
// their text is not Markdown, so nothing else changes ("*" and "_" stay as written).
const HEADED_FILES = /\.(pptx|odp|xlsx|ods|epub|eml|ics|ical|vcf|vcard)$/i;
// Those of them whose text ncindex writes line by line, each line a part of their structure: a
// slide's shapes and paragraphs (ncindex/text/slides.py, odf.py), a sheet's rows ("A1 | HeLa",
// ncindex/text/sheets.py, odf.py), an e-mail's header lines and its plain-text body, whose lines
// a mail reader shows as written (ncindex/text/mail.py), an event's or a contact's fields. An
// e-book is prose: its line breaks are not shown (see showBreaks).
const LINED_FILES = /\.(pptx|odp|xlsx|ods|eml|ics|ical|vcf|vcard)$/i;
// The snippet is read as one text, each mark a MARK_HOLDER (a heading's first word can be a
// mark: "# <mark>Sheet</mark>: …", a text node "# " alone is no heading, nor does a text node
// after a mark start a line); a snippet already holding one stays as it came.
function hideHeadings(snippet) {
  const nodes = [...snippet.childNodes];
  if (nodes.some((n) => n.nodeType === Node.TEXT_NODE && n.data.includes(MARK_HOLDER))) return;
  const marks = nodes.filter((n) => n.nodeType !== Node.TEXT_NODE);
  const whole = nodes.map((n) => (n.nodeType === Node.TEXT_NODE ? n.data : MARK_HOLDER)).join("");
  snippet.replaceChildren(...whole.replace(HEADING, "").split(MARK_HOLDER)
    .flatMap((piece, i) => (i ? [marks[i - 1], piece] : [piece])));
}

// Emphasis as CommonMark 0.31 reads it (§6.2 "Emphasis and strong emphasis", and its §6.3
// algorithm, "process emphasis"), with GFM's "~~" strikethrough: a delimiter run — a run of
// "*" or "_", or exactly two "~" — is left-flanking when not followed by whitespace and either
// not followed by punctuation or preceded by whitespace or punctuation, right-flanking the other
// way round. A "*" run opens when left-flanking and closes when right-flanking; a "_" run the
// same but, inside a word (both), only beside punctuation: "snake_case_name" and the "__" of
// "my__init__" are no delimiters, nor is an asterisk with whitespace on both sides ("2 * 3").
// Each closer takes the nearest opener of its character below it (not one where either could
// both open and close and the two runs' lengths add up to a multiple of 3 unless both are one),
// two delimiters of each when both have two, else one; the openers between them stay as
// written. Only the delimiters of the pairs go: one that found no partner ("the __init method",
// "**kwargs") is text. The start and end of the text count as whitespace; a mark is a letter, a
// code span punctuation (it ends in a backtick), and so is an escaped character (it and its
// backslash are).
const DELIMITER_RUN = /\*+|_+|~+/g;
const WHITESPACE = /^[\s\uE002]$/u; // LINE_HOLDER: a line's end
// CommonMark 0.31 §2.1: categories P and S
const PUNCTUATION = new RegExp(`^(?:[\\p{P}\\p{S}${CODE_HOLDER}]|${ESCAPED.source})$`, "u");

function delimiterRuns(text) {
  const runs = [];
  for (const m of text.matchAll(DELIMITER_RUN)) {
    const [run] = m;
    if (run[0] === "~" && run.length !== 2) continue;
    const end = m.index + run.length;
    const before = m.index ? Array.from(text.slice(Math.max(0, m.index - 2), m.index)).pop() : " ";
    const after = end < text.length ? String.fromCodePoint(text.codePointAt(end)) : " ";
    const space = (c) => WHITESPACE.test(c);
    const punct = (c) => PUNCTUATION.test(c);
    const left = !space(after) && (!punct(after) || space(before) || punct(before));
    const right = !space(before) && (!punct(before) || space(after) || punct(after));
    const underscore = run[0] === "_";
    runs.push({
      char: run[0], at: m.index, length: run.length, left: run.length,
      opens: left && (!underscore || !right || punct(before)),
      closes: right && (!underscore || !left || punct(after)),
    });
  }
  return runs;
}

function emphasis(text) {
  const runs = delimiterRuns(text);
  const openers = [];
  for (const closer of runs) {
    while (closer.closes && closer.left > 0) {
      let i = openers.length - 1;
      for (; i >= 0; i--) {
        const opener = openers[i];
        const either = (opener.opens && opener.closes) || (closer.opens && closer.closes);
        const sum = opener.length + closer.length;
        const threes = sum % 3 === 0 && !(opener.length % 3 === 0 && closer.length % 3 === 0);
        if (opener.char === closer.char && !(either && threes)) break;
      }
      if (i < 0) break;
      const opener = openers[i];
      const used = opener.left >= 2 && closer.left >= 2 ? 2 : 1;
      opener.left -= used;
      closer.left -= used;
      openers.length = opener.left > 0 ? i + 1 : i; // the openers between them stay as written
    }
    if (closer.opens && closer.left > 0) openers.push(closer);
  }
  let out = "";
  let at = 0;
  for (const run of runs) {
    out += text.slice(at, run.at) + run.char.repeat(run.left);
    at = run.at + run.length;
  }
  return out + text.slice(at);
}

// a table's "|---|:--:|" row, and a pipe standing between spaces (a table's cell border: only
// in a snippet with such a row or with two rows' pipes side by side, "| |", where " | " is no
// separator of prose nor a shell pipeline: "ls | grep x | sort | uniq" lost its pipes when three
// such pipes made a table)
// (a line break kept as LINE_HOLDER is whitespace to both, and stays where a pipe goes)
const TABLE_RULE = /(?<=^|\s)\|(?: *:?-+:? *\|)+(?: *:?-+:? *)?(?=[\s\uE002]|$)/g;
const PIPE = /(?<=^|[\s\uE002])\|(?:[\s\uE002]+|$)/g;
// the rule row gone with the line break before it (its row's own ends at the row after it,
// ROW_BREAK), and a pipe's line break kept: a context chunk, whose "\n"s are its lines
// (app.css .context), showed a table's rows as one line ("A1 tide A2 x")
const RULE_LINE = new RegExp(String.raw`\n?` + TABLE_RULE.source, "g");
const ROWS_MET = /(?<=^|\s)\| +\|(?=\s|$)/;

// "1. " and "1) " markers as "•" in a run of three or more consecutive numbers (same delimiter),
// each followed by an item: some text before the next marker, not beginning with a small letter.
// Any other stays as written: German writes ordinal dates so ("am 1. und 2. Dezember, vom 3. bis
// 4. Mai" showed "am • und • Dezember, vom • bis • Mai"), a pair is no list, and numbers with no
// text between them are none either ("24. 25. 26. Dezember").
function numberedItems(text) {
  const found = [...text.matchAll(NUMBERED)];
  const items = new Set(found.filter((m, i) => {
    const item = text.slice(m.index + m[0].length, i + 1 < found.length ? found[i + 1].index : text.length);
    return /[\p{L}\p{N}\uE000]/u.test(item) && !/^\p{Ll}/u.test(item);
  }).map((m) => m[2] + Number(m[1])));
  const listed = (delim, n, ...steps) => steps.every((step) => items.has(delim + (n + step)));
  return text.replace(NUMBERED, (marker, digits, delim) => {
    const n = Number(digits);
    const run = listed(delim, n, -2, -1, 0) || listed(delim, n, -1, 0, 1) || listed(delim, n, 0, 1, 2);
    return run ? "• " : marker;
  });
}

// The code blocks of a text and the rest: [prose, code, prose, code, …, prose]. A fenced block
// opens at a line of FENCE_OPEN and closes at the next line of its fence's character, at least
// as many, alone (§4.5; the server drops the spaces ending a line), or runs to the snippet's end
// ("```…" there is a closing line the cut left no room to end); its fences go, the language with
// them unless a mark is in it (then it is shown, with the code). A snippet whose window starts
// inside a block the cut opened before it starts with that block's fence ("```\n…code"; the
// server knows, ncindex/text/snippets.py snippet), so its closing line closes it. (A context
// chunk starting inside a block cannot be told: no one knows, the chunk is read alone.)
// In the prose, an indented code block (§4.4): lines indented four columns or more, the first
// at the text's start, right after a fenced block's closing line (the prose after it starts
// with that line's "\n": no paragraph is open there), after a blank line, after a cut's
// "…\n", or after the line a cut started in ("…lamp here\n    more": the cut line was code
// too, its indentation cut off with its start, or a fence's closing line) — the server keeps a
// note's indentation only on code lines (a fenced block's, an indented block's), so an
// indented line after a blank line is code (a list item's indented paragraph too: the server
// reads no lists).
const INDENTED_CODE = /(?<=^\n?|\n\n|^…[^\n]*\n) {4}[^\n]*(?:\n\n? {4}[^\n]*)*/g;
function codeBlocks(text) {
  const parts = [];
  let at = 0;
  FENCE_OPEN.lastIndex = 0;
  for (let open; (open = FENCE_OPEN.exec(text)) !== null;) {
    const [line, fence, info] = open;
    const close = new RegExp(`\\n${fence[0]}{${fence.length},}(?=\\n|…?$)`, "g");
    close.lastIndex = open.index + line.length;
    const end = close.exec(text);
    const stop = end ? end.index : text.length;
    parts.push(...indentedBlocks(text.slice(at, open.index)));
    parts.push((info.includes(MARK_HOLDER) ? info : "") + text.slice(open.index + line.length, stop).replace(/^\n/, ""));
    at = end ? end.index + end[0].length : text.length;
    FENCE_OPEN.lastIndex = at;
  }
  parts.push(...indentedBlocks(text.slice(at)));
  return parts;
}

// A prose text's indented code blocks (INDENTED_CODE) and the rest: [prose, code, …, prose].
function indentedBlocks(text) {
  const parts = [];
  let at = 0;
  for (const block of text.matchAll(INDENTED_CODE)) {
    parts.push(text.slice(at, block.index), block[0].replace(/^ {4}/gm, "")); // §4.4: the code
    at = block.index + block[0].length;
  }
  parts.push(text.slice(at));
  return parts;
}

// A snippet without its Markdown (see above), but for its first ``plain`` characters (of its
// text, the marks' words counted), kept as written: a Deck card's title (cardTitleUnits). The
// rest starts a line there (the title's line break is in it). With ``lines``, a line break
// that is the note's structure (LINE_HOLDER) is a <br>, else a space as the others.
function hideMarkdown(snippet, plain, lines) {
  const nodes = [...snippet.childNodes];
  const held = (n) => n.nodeType === Node.TEXT_NODE && HOLDERS.test(n.data);
  if (nodes.some(held)) return;
  const whole = nodes.map((n) => (n.nodeType === Node.TEXT_NODE ? n.data : MARK_HOLDER)).join("");
  // where the kept characters end in ``whole`` (a mark one character there); a mark holds a
  // word and the title ends at a line break, a cut's "…" or the snippet's end, so never inside
  // a mark
  let at = 0;
  for (const node of nodes) {
    if (plain <= 0) break;
    const length = node.textContent.length;
    at += node.nodeType === Node.TEXT_NODE ? Math.min(plain, length) : 1;
    plain -= length;
  }
  // a code block's text stays as written (§4.4, §4.5: no escapes, no emphasis, no other block
  // in it), in a <code> element keeping its lines and indentation (style.css .code-block)
  const parts = codeBlocks(whole.slice(at)).map((part, i) => (i % 2 ? part : hideProse(part)));
  parts[0] = whole.slice(0, at) + parts[0];
  const marks = nodes.filter((n) => n.nodeType !== Node.TEXT_NODE);
  // not expected: the snippet stays as it came
  if (parts.join("").split(MARK_HOLDER).length !== marks.length + 1) return;
  let next = 0;
  const broken = (piece) => piece.split(LINE_HOLDER).flatMap((line, i) => (i && lines ? [document.createElement("br"), line] : [line]));
  const marked = (part) => part.split(MARK_HOLDER).flatMap((piece, i) => (i ? [marks[next++], ...broken(piece)] : broken(piece)));
  snippet.replaceChildren(...parts.flatMap((part, i) => {
    if (!(i % 2)) return marked(part);
    const code = document.createElement("code");
    code.className = "code-block";
    code.append(...marked(part));
    return [code];
  }));
}

// How many UTF-16 units (a string's length) of a Deck card's snippet ``text`` (its text
// content) are the card's title: ncindex indexes a card as "{title}\n\n{description}"
// (ncindex/sources/deck_card.py fetch_card), and only the description is Markdown — Deck edits
// and renders it so (nextcloud/deck src/components/card/Description.vue: the Text app's editor,
// else markdown-it with task checkboxes), while it shows the title as plain text
// (src/components/cards/CardItem.vue, "{{ displayTitle }}"), so a title's "#", "*" or backticks
// are its words. The server says how many of the snippet's first characters are the title
// (the result's snippet_title_chars: ncindex/search/service.py SearchResult; 0 when the
// snippet starts past it), in code points, as it cleaned the title: an emoji such as U+1FA77
// 🩷 is one there and two here. A count that is not a positive number (never sent: it counts
// from 0) is no title, not a slice's end counted from the back; one past the snippet is all of it.
function cardTitleUnits(r, text) {
  const chars = Number(r.snippet_title_chars);
  return chars > 0 ? Array.from(text).slice(0, chars).join("").length : 0;
}

// A note's prose (the text between code blocks, see codeBlocks) without its Markdown.
function hideProse(text) {
  const table = text.search(TABLE_RULE) >= 0 || ROWS_MET.test(text);
  text = text.replace(LINE_BREAK, LINE_HOLDER + "\n");
  if (table) text = text.replace(ROW_BREAK, LINE_HOLDER + "\n");
  text = numberedItems(text);
  // split() with the three groups: text, then a span's backticks and code or an escaped
  // character ("" for a hard line break), text, …; the code stays as it is, an escaped
  // character is held in its prose, a hard break's backslash goes (its "\n" stays, shown as a
  // space as a soft break is)
  const parts = text.split(CODE_OR_ESCAPE);
  const code = [];
  const texts = [parts[0]];
  for (let i = 1; i < parts.length; i += 4) {
    const [, span, escaped, after] = parts.slice(i, i + 4);
    if (escaped === undefined) { code.push(span); texts.push(after); }
    else texts[texts.length - 1] += (escaped ? String.fromCharCode(ESCAPE_HOLDER + escaped.charCodeAt(0)) : "") + after;
  }
  const prose = texts.map((part) => {
    for (const [syntax, instead] of MARKDOWN) part = part.replace(syntax, instead);
    return table ? part.replace(RULE_LINE, "").replace(PIPE, (pipe) => pipe.replaceAll(/[^\uE002\n]/g, "")) : part;
  });
  // emphasis pairs across a code span ("*see `x` here*"), so the prose is read as one text
  return emphasis(prose.join(CODE_HOLDER)).split(CODE_HOLDER)
    .map((part, i) => part + (i < code.length ? code[i] : "")).join("")
    .replace(ESCAPED, (held) => String.fromCharCode(held.charCodeAt(0) - ESCAPE_HOLDER));
}

async function toggleContext(r, li, button) {
  const box = li.querySelector(".context");
  if (button.getAttribute("aria-expanded") === "true") { box.hidden = true; button.setAttribute("aria-expanded", "false"); button.textContent = "Show context"; return; }
  const url = "/v1/documents/" + encodeURIComponent(r.doc_type) + "/" + encodeURIComponent(r.doc_id)
    + "/context?window=2&chunk_index=" + r.chunk_index;
  const { response, data } = await call("GET", url);
  if (response.status === 401) { signedOut(); return; }
  if (!response.ok) {
    // said in the result, under the button pressed: the status line above the results is out
    // of sight on a long page, and the button looked as if it did nothing. Pressed again, it
    // asks again.
    const problem = document.createElement("p");
    problem.className = "problem";
    problem.setAttribute("role", "alert");
    problem.textContent = problemText(response, data, "The context is unavailable right now");
    box.replaceChildren(problem);
    box.hidden = false;
    return;
  }
  // above the chunks, where the document is as the result list says it ("Board › Stack" of a
  // Deck card, a news item's link, a path), from the context answer's own check: a card moved
  // or a board renamed since the search shows where it is now
  const where = whereText(data);
  const place = document.createElement("p");
  place.className = "context-where";
  place.textContent = where;
  box.replaceChildren(...(where ? [place] : []), ...data.chunks.map((c) => {
    const p = document.createElement("p");
    p.dir = "auto"; // Arabic or Hebrew text reads right to left
    p.textContent = contextText(c.text);
    // as the snippet is shown: set as text, its Markdown read as text (hideMarkdown), never HTML
    showText(p, r, r.doc_type === "deck_card" && c.char_start === 0 ? cardTitleEnd(p.textContent) : 0);
    if (c.chunk_index === r.chunk_index) p.className = "hit";
    return p;
  }));
  box.hidden = false;
  button.setAttribute("aria-expanded", "true");
  button.textContent = "Hide context";
}

// A context chunk's text (the indexed text as it is, ncindex/search/service.py ContextChunk) with
// its lines as the server's snippet has them, for the Markdown reading of hideMarkdown: CR and
// CRLF line endings as "\n", no spaces ending a line (a fence's line stays one), a tab in a
// line's indentation to the next multiple of 4 columns (CommonMark 0.31 §2.2). The box shows its
// lines and blank lines as they are (style.css .context: pre-wrap).
function contextText(text) {
  return text.replace(/\r\n?/g, "\n").replace(/[ \t]+$/gm, "")
    .replace(/^[ \t]+/gm, (indent) => indent.split("").reduce((line, ch) => line + (ch === "\t" ? " ".repeat(4 - (line.length % 4)) : ch), ""));
}

// Where a Deck card's title ends in its first chunk's ``text``: ncindex indexes a card as
// "{title}\n\n{description}" (ncindex/sources/deck_card.py fetch_card), so at its first line
// break (the whole text when it has none).
function cardTitleEnd(text) {
  const end = text.indexOf("\n");
  return end < 0 ? text.length : end;
}

// The words of the snippet that matched: the server's matched terms are analyzer terms (stems,
// e.g. "len" for "lens"); their offsets are in characters (code points) into the snippet's
// plain text, so they pick out the words as written. One entry per word, ignoring case.
function matchedWords(terms, snippetText) {
  const chars = Array.from(snippetText);
  const words = new Map();
  for (const t of terms) {
    const word = chars.slice(t.start, t.end).join("");
    if (!words.has(word.toLowerCase())) words.set(word.toLowerCase(), word);
  }
  return [...words.values()];
}

function renderExplain(details, explain, snippetText) {
  const rows = [];
  const rank = (b) => (b ? "rank " + b.rank + ", score " + b.score : "not a candidate");
  rows.push(["Dense", rank(explain.dense)], ["BM25", rank(explain.sparse)]);
  if (explain.fused_score !== undefined) rows.push(["Fused score", String(explain.fused_score)]);
  if (explain.matched_terms && explain.matched_terms.length) {
    rows.push(["Matched words", matchedWords(explain.matched_terms, snippetText).join(", ")]);
  }
  // words the BM25 search added from its best first results (feedback), found in this result:
  // a BM25 match may come from these alone, so they are named, and said not to be the query's
  if (explain.feedback_terms && explain.feedback_terms.length) {
    const words = explain.feedback_terms.map((t) => t.word).join(", ");
    rows.push(["Feedback words", words + " (not in your query: added to the BM25 search from the top results' text)"]);
  }
  details.querySelector("dl").replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    return [dt, dd];
  }));
  details.hidden = false;
}

// --- wiring ----------------------------------------------------------------------------
document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-flow").addEventListener("click", startFlow);
  $("cancel-flow").addEventListener("click", cancelFlow);
  $("password-form").addEventListener("submit", signInWithPassword);
  $("sign-out").addEventListener("click", signOut);
  $("search-form").addEventListener("submit", (e) => { e.preventDefault(); search(true); });
  $("more").addEventListener("click", showMore);
  // "Skip to the results": focus on the first result's title (a list is not focusable)
  $("skip").addEventListener("click", (e) => {
    e.preventDefault();
    const first = $("results").querySelector(".title");
    if (first) first.focus();
  });
  $("q").addEventListener("paste", (e) => {
    const box = $("q");
    // a one-line box drops the line breaks of what is pasted (HTML's value sanitization)
    const pasted = e.clipboardData.getData("text/plain").replace(/[\r\n]/g, "");
    const room = box.maxLength - box.value.length + (box.selectionEnd - box.selectionStart);
    if (pasted.length > room) box.addEventListener("input", () => { cutQuery = { text: box.value, what: "pasted text" }; }, { once: true });
  });
  for (const id of ["folders", "tags", "fusion", "after", "before"]) {
    $(id).addEventListener("change", searchWhenSettled);
  }
  // a number box's "change" comes only with Enter or leaving it: typing searches once it
  // rests, and its chip follows each keystroke (none while the value is refused)
  $("threshold").addEventListener("input", () => { renderChips(); searchWhenSettled(); });
  // its arrows step by 0.05 (index.html), but any share from 0 to 1 is a threshold (the API's
  // score_threshold): one between the steps ("0.93", searched as typed) is a step mismatch to
  // the form's own validation, which would stop Enter with no search. When that is all the
  // form finds wrong, Enter searches (and no bubble is shown).
  $("threshold").addEventListener("invalid", (e) => {
    const box = e.target;
    const others = [...$("search-form").elements].filter((el) => el !== box);
    if (box.validity.stepMismatch && !box.validity.rangeOverflow && !box.validity.rangeUnderflow
      && !box.validity.badInput && others.every((el) => el.validity.valid)) {
      e.preventDefault();
      search(true);
    }
  });
  for (const box of document.querySelectorAll("#types input")) box.addEventListener("change", () => search(true));
  window.addEventListener("popstate", () => {
    // signed out, Back would bring the last user's searches back into the page (and send them,
    // refused as "sign-in ended"): the entry is emptied instead
    if (!session.user) { history.replaceState(null, "", location.pathname); return; }
    fromUrl();
    search(false);
  });
  loadSession();
});
