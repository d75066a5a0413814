"""Authenticate search callers with their own Nextcloud credentials (DESIGN §3).

The caller's ``Authorization`` header (Basic with an app password, or a Bearer token Nextcloud
accepts) is resolved to a user id through ``GET /ocs/v2.php/cloud/user``. The answer is cached
in Redis for ``user_cache_seconds`` under a SHA-256 of the header — never the credential itself.

A header that cannot be a credential — longer than :data:`MAX_AUTHORIZATION_CHARS`, not
printable ASCII, or not ``Basic``/``Bearer`` followed by one token68 (RFC 9110 §11.4) — is
refused before Nextcloud is asked. No error message ever quotes the header. Nor is a
``Basic`` credential whose login name or password holds a control character
(:func:`refuse_control_characters`, :func:`refuse_basic_controls`): a 400 naming the field.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import ipaddress
import re
import unicodedata

import flask
import redis

from ncindex.errors import (
    Forbidden,
    InputError,
    NextcloudAuthError,
    NextcloudProtocolError,
    NextcloudRefused,
    NotFound,
    Unauthenticated,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services

MAX_AUTHORIZATION_CHARS = 8 * 1024
"""Longest ``Authorization`` header sent on to Nextcloud (web servers refuse far less)."""

# scheme, one or more spaces, a token68; surrounding spaces/tabs are not part of a field value
_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z]+) +(?P<token>[A-Za-z0-9\-._~+/]+=*)")
_SCHEMES = {"basic": "Basic", "bearer": "Bearer"}


def normalized_authorization(authorization: str | None) -> str:
    """``authorization`` as ``"Basic <token68>"`` or ``"Bearer <token68>"`` (scheme spelled
    canonically, one space, surrounding spaces and tabs dropped). Raises
    :class:`Unauthenticated` for anything else: missing, longer than
    :data:`MAX_AUTHORIZATION_CHARS`, non-ASCII or control characters, another scheme, or a
    credential that is not a token68."""
    value = (authorization or "").strip(" \t")
    if len(value) > MAX_AUTHORIZATION_CHARS:
        raise Unauthenticated("the Authorization header is too long")
    match = _CREDENTIALS.fullmatch(value)
    scheme = _SCHEMES.get(match["scheme"].lower()) if match else None
    if match is None or scheme is None:
        raise Unauthenticated("send Authorization: Basic (app password) or Bearer")
    return f"{scheme} {match['token']}"


def refuse_control_characters(value: str, field: str, what: str) -> None:
    """Raise :class:`~ncindex.errors.InputError` ``invalid_value`` on ``field`` when ``value``
    (``what`` it is, for the detail: ``"a login name"``, ``"an app password"``) holds a
    control character: Unicode's general category Cc, U+0000-U+001F and U+007F-U+009F. The
    one check of the login names and passwords ncindex would send to Nextcloud.

    RFC 7617 §2: a Basic user-id "MUST NOT contain any control characters" (CTL, RFC 5234
    B.1: U+0000-U+001F, U+007F), and in UTF-8 (§2.1) user-id and password are PRECIS
    strings, whose classes refuse U+0080-U+009F too (RFC 8264 §9.12 Controls, category Cc;
    §4.2/§4.3: the UsernameCaseMapped and OpaqueString profiles of RFC 8265 disallow them).
    Nextcloud makes none: an account's name holds none (nextcloud/server
    ``lib/private/User/Manager.php`` ``validateUserId``: a-z A-Z 0-9 space ``_.@-'``), an
    e-mail login none (``Session::logClientIn``, ``FILTER_VALIDATE_EMAIL``), an app
    password is letters and digits (``core/Service/LoginFlowV2Service.php`` ``flowDone``:
    ``ISecureRandom::generate(72, CHAR_UPPER . CHAR_LOWER . CHAR_DIGITS)``;
    ``apps/settings/lib/Controller/AuthSettingsController.php``
    ``generateRandomDeviceToken``: groups of ``CHAR_ALPHANUMERIC``), and
    ``Manager::checkPasswordNoLogging`` drops a NUL, checking another name than typed. So
    such a credential is refused here, before Nextcloud is asked, not answered 401 "rejected
    the credentials" (which reads as a wrong password) after one more refused login counted
    against the caller's address."""
    control = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise InputError(
            "invalid_value",
            field,
            f"{what} holds the control character U+{ord(control):04X}, which none holds "
            "(a tab or line break copied with it?)",
        )


def refuse_basic_controls(header: str) -> None:
    """:func:`refuse_control_characters` of the login name and the password of ``header``
    (a :func:`normalized_authorization` one), on the field ``Authorization``; nothing for a
    ``Bearer`` token (a token68 is printable ASCII). The token is decoded as Nextcloud
    decodes it (:func:`_php_base64`): a credential without its ``=`` padding, or with a
    character outside base64's alphabet (``-._~``), is one Nextcloud reads, and a strict
    decode let its control characters through to it. The credential's bytes are read as UTF-8
    (RFC 7617 §2.1), a byte that is no UTF-8 as U+FFFD: a C0 control or DEL is refused
    whatever the charset, a C1 one when written in UTF-8."""
    scheme, _, token = header.partition(" ")
    if scheme != "Basic":
        return
    raw = _php_base64(token)
    login, _, password = raw.decode("utf-8", errors="replace").partition(":")
    refuse_control_characters(login, "Authorization", "the Basic credential's login name")
    refuse_control_characters(password, "Authorization", "the Basic credential's password")


def _php_base64(token: str) -> bytes:
    """The bytes Nextcloud reads from ``token`` (a token68: alphabet, then ``=`` padding only
    at its end), decoded as PHP's non-strict ``base64_decode`` decodes it: nextcloud/server
    ``lib/base.php`` ``OC::handleAuthHeaders`` sets ``PHP_AUTH_USER``/``PHP_AUTH_PW`` from
    ``base64_decode`` of the ``Authorization`` header, which skips ``=`` and every character
    outside the alphabet, and drops the bits of a last lone character (php-src
    ``ext/standard/base64.c`` ``php_base64_decode_impl``, not ``strict``)."""
    body = re.sub(r"[^A-Za-z0-9+/]", "", token)
    body = body[: len(body) - 1] if len(body) % 4 == 1 else body
    return base64.b64decode(body + "=" * (-len(body) % 4))


def resolve_caller(
    services: Services, authorization: str | None, address: str | None = None
) -> NextcloudClient:
    """A client acting as the caller, with ``client.user`` resolved; it sends the caller's
    address as ``X-Forwarded-For`` (``NextcloudClient.forwarded_for``): ``address`` (the MCP
    server's, past its trusted proxies) or, inside a Flask request, the request's.

    Raises :class:`Unauthenticated` for a missing or malformed header (see
    :func:`normalized_authorization`; Nextcloud is not asked),
    :class:`~ncindex.errors.InputError` ``invalid_value`` on ``Authorization`` for a Basic
    credential holding a control character (:func:`refuse_basic_controls`; Nextcloud is not
    asked, nor the credential cache) and when Nextcloud does not
    confirm the credentials (401, 404, another 4xx, or an answer that is not its format);
    ``NextcloudUnavailable`` when Nextcloud cannot be asked (timeout, 5xx, 429). A caller taken
    from the cache is not ``confirmed``
    (:attr:`~ncindex.nextcloud.client.NextcloudClient.confirmed`): whatever answers it from
    the index alone calls :meth:`~ncindex.nextcloud.client.NextcloudClient.confirm` first,
    so a credential revoked since is refused then, not for the rest of the cache's time.
    """
    header = normalized_authorization(authorization)
    refuse_basic_controls(header)
    client = _caller(services, header, address)
    key = _cache_key(services, header)
    ttl = services.settings.user_cache_seconds
    try:
        cached = services.redis_breaker.call("get", key) if ttl else None
    except redis.RedisError:
        cached = None
    if cached is not None:
        client.user = cached.decode()
        client.confirmed = False  # taken on trust: NextcloudClient.confirm asks when need be
        return client
    try:
        user = client.current_user()
    except NextcloudAuthError as exc:
        raise Unauthenticated("Nextcloud rejected the credentials") from exc
    except (NextcloudProtocolError, NextcloudRefused, Forbidden, NotFound) as exc:
        raise Unauthenticated("Nextcloud did not confirm the credentials") from exc
    if ttl:
        with contextlib.suppress(redis.RedisError):
            services.redis_breaker.call("set", key, user, ex=ttl)
    return client


def _caller(services: Services, header: str, address: str | None) -> NextcloudClient:
    """A client sending ``header`` and, as ``X-Forwarded-For``, the caller's own address:
    ``address``, else the Flask request's (after the trusted proxies in front,
    :mod:`ncindex.web.proxies`), so a Nextcloud that trusts ncindex as a proxy charges the
    caller's refused logins to the caller, not to ncindex
    (:attr:`~ncindex.nextcloud.client.NextcloudClient.forwarded_for`).

    The client is made for one HTTP request of the caller's (a REST call, an MCP POST, an
    RCP batch, a search-page route) and kept by nothing after it, so it stops asking a part
    of Nextcloud (an endpoint family: the DAV server, one app's routes, …) at the first
    request that part gives no answer to, and every part once a connection could not be made
    (:attr:`~ncindex.nextcloud.client.NextcloudClient.stop_when_unanswered`): a stalled
    Nextcloud costs that HTTP request at most one timeout per family it asks, not one per
    request it would send, while a Deck that stalls alone leaves the files' and notes'
    checks asked — a search whose checks all timed out still asks OCS to confirm a cached
    credential (:meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`: a family that
    stalls in front of Nextcloud's login check refuses nothing, so a revoked credential is
    told by OCS alone), sent beside the checks once they waited
    :func:`~ncindex.nextcloud.client.early_confirm_seconds` without an answer confirming it
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.confirming_early`), unless OCS itself
    stalled during the request. The workers'
    and the service accounts' clients, which serve many requests, are not made here and
    never stop so."""
    client = services.caller(header)
    client.stop_when_unanswered = True
    client.forwarded_for = _ip_address(address) if address is not None else request_address()
    return client


def request_address() -> str | None:
    """The IP address of the caller of the Flask request under way (after the trusted
    proxies in front, :mod:`ncindex.web.proxies`), ``None`` outside one or for a value that
    is no IP address (:func:`_ip_address`): what ncindex sends as ``X-Forwarded-For`` for
    the caller."""
    return _ip_address(flask.request.remote_addr) if flask.has_request_context() else None


def still_accepted(services: Services, authorization: str) -> bool:
    """Whether Nextcloud still accepts ``authorization``, a credential it accepted before (a
    search-page session's): one ``GET /ocs/v2.php/cloud/user``
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.confirm`, within
    :data:`~ncindex.nextcloud.client.CONFIRM_SECONDS`) with the caller's address. ``False``
    when Nextcloud refuses it (401), and the credential cache forgets it
    (:func:`forget_caller`): an app password revoked (Settings › Security, or its Login Flow's
    ``DELETE /ocs/v2.php/core/apppassword``) is no token any more, so nextcloud/server
    ``lib/private/User/Session.php`` ``tryBasicAuthLogin`` → ``logClientIn`` finds none
    (``isTokenPassword``), the password login fails, ``handleLoginFailed`` registers the
    attempt (``Throttler::registerAttempt``) and ``tryBasicAuthLogin`` throws the
    ``LoginException`` OCS answers 401. ``True`` when accepted, and when Nextcloud gives no
    answer in that time or one in no known shape (fail-open, as ``confirm`` is: the calls
    that need the credential find out then). A header that is no credential
    (:func:`normalized_authorization`) is ``False`` without asking."""
    try:
        client = _caller(services, normalized_authorization(authorization), None)
    except Unauthenticated:
        return False
    client.confirmed = False  # ask, whatever answered before
    try:
        client.confirm()
    except NextcloudAuthError:
        forget_caller(services, authorization)
        return False
    return True


def forget_caller(services: Services, authorization: str | None) -> None:
    """Drop what :func:`resolve_caller` cached for these credentials, so the next request
    asks Nextcloud again: called when Nextcloud refused them (HTTP 401) after they were
    resolved — an app password revoked within ``user_cache_seconds``. Without it the cache
    let such a password through for the rest of that time: each request passed the gate as a
    confirmed caller (exempt from the refused-credentials address limit), sent Nextcloud a
    request it refused, and ``index_status`` answered from Redis alone. Never raises (a
    malformed header or a Redis error is ignored: the entry expires anyway)."""
    try:
        key = _cache_key(services, normalized_authorization(authorization))
        services.redis_breaker.call("delete", key)
    except (Unauthenticated, redis.RedisError):
        pass


def confirmed(services: Services, authorization: str | None) -> bool:
    """Whether Nextcloud confirmed these credentials within ``user_cache_seconds`` (they are
    in the cache :func:`resolve_caller` keeps). ``False`` for a malformed header, with the
    cache off (``user_cache_seconds`` 0), or when Redis cannot be asked. One Redis
    ``EXISTS``; Nextcloud is not asked."""
    if not services.settings.user_cache_seconds:
        return False
    try:
        key = _cache_key(services, normalized_authorization(authorization))
        return bool(services.redis_breaker.call("exists", key))
    except (Unauthenticated, redis.RedisError):
        return False


def _ip_address(address: str | None) -> str | None:
    """``address`` when it is an IP address, else ``None``. Behind ``trusted_proxy_hops``
    proxies the request's address is what a proxy wrote in ``X-Forwarded-For`` (werkzeug's
    ``ProxyFix`` takes any text): sent on as a header, a non-ASCII value failed every request
    to Nextcloud (``UnicodeEncodeError``: a 500, or every search result dropped by its
    re-check), and Nextcloud skips a value that is no IP address anyway (nextcloud/server
    ``lib/private/AppFramework/Http/Request.php`` ``getRemoteAddress``: ``filter_var($IP,
    FILTER_VALIDATE_IP)``)."""
    try:
        return str(ipaddress.ip_address(address or ""))
    except ValueError:
        return None


def _cache_key(services: Services, header: str) -> str:
    return services.settings.names.auth_prefix + hashlib.sha256(header.encode()).hexdigest()
