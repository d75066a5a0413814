"""``PROPPATCH`` of a file or folder: sabre/dav's ``PropPatch`` running the handlers Nextcloud
registers for them.

sabre/dav ``lib/DAV/CorePlugin.php`` ``httpPropPatch`` reads a ``d:propertyupdate`` body
(``Service::expect``: an empty body or another root element is ``ParseException`` → 400
``BadRequest``). ``lib/DAV/Xml/Request/PropPatch.php`` ``xmlDeserialize`` takes the properties of
each ``d:set`` and ``d:remove`` in document order — a property named twice keeps its first place
and its last value, a removed one the value null; ``Xml/Element/Prop.php`` with
``Xml/Property/Complex.php`` gives an empty element null, text content its text, content with
child elements an XML fragment. ``Server::updateProperties`` emits ``propPatch`` to the handlers
by priority, then ``PropPatch::commit`` runs the callbacks they registered:

1. ``CorePlugin::propPatchProtectedPropertyCheck`` (priority 90): a protected property answers
   403 at once — ``Server::$protectedProperties`` and the ones ``FilesPlugin::initialize`` adds,
   less ``{DAV:}getetag``, which it allows (nextcloud/server ``apps/dav/lib/Connector/Sabre/
   FilesPlugin.php``).
2. ``FilesPlugin::handleUpdateProperties`` (priority 100, the first plugin ``apps/dav/lib/
   Server.php`` adds): ``{DAV:}lastmodified`` → ``Node::touch`` — an empty value (PHP
   ``empty``: none, ``""``, ``"0"``) answers 403; otherwise ``MtimeSanitizer`` (a refused value
   throws ``InvalidArgumentException``; a value with child elements is no string, a
   ``TypeError``) and ``View::touch`` (:meth:`~ncindex.simulator.state.FileTree.touch` with its
   events), 200. ``{DAV:}displayname`` answers 403.
3. ``TagsPlugin::handleUpdateProperties`` (priority 100, added after FilesPlugin):
   ``oc:favorite`` — ``1`` or ``true`` marks the node a favourite of the user, anything else
   unmarks it; 200, or 204 for a removal.
4. Any other property: Nextcloud's ``CustomPropertiesBackend`` (``apps/dav/lib/DAV/``, through
   sabre's ``PropertyStorage\\Plugin`` at priority 300, ``handleRemaining``) stores it and
   answers 200. The simulator stores none and answers 403, after the others (a
   simplification). So do FilesPlugin's ``{DAV:}getetag``, ``{DAV:}creationdate``,
   ``nc:creation_time`` and metadata handlers, which are not modelled.

``PropPatch::commit``: after a 403 of step 1 no callback runs; otherwise the callbacks run in
the order registered and stop at the first failure (status 400 or more); each property still
waiting then answers 424 Failed Dependency. Nothing is undone. An exception a callback throws
leaves the request (sabre's ``Server::start`` answers 500 with it, :class:`HandlerError`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lxml import etree

from ncindex.simulator.mtime import MtimeError, sanitize_mtime
from ncindex.simulator.state import FileTree, Node
from ncindex.simulator.xmlutil import DAV, NC, OC, clark

__all__ = ["BodyError", "HandlerError", "PropValue", "XmlFragment", "commit", "mutations"]

_OCS = "http://open-collaboration-services.org/ns"
_OCM = "http://open-cloud-mesh.org/ns"

#: sabre/dav ``Server::$protectedProperties`` followed by the ones ``FilesPlugin::initialize``
#: appends, less ``{DAV:}getetag`` (``array_diff`` with ``$allowedProperties``); in that order,
#: the order ``propPatchProtectedPropertyCheck`` (``array_intersect``) sets their 403.
PROTECTED = (
    clark(DAV, "getcontentlength"),
    clark(DAV, "getlastmodified"),
    clark(DAV, "lockdiscovery"),
    clark(DAV, "supportedlock"),
    clark(DAV, "quota-available-bytes"),
    clark(DAV, "quota-used-bytes"),
    clark(DAV, "supported-privilege-set"),
    clark(DAV, "current-user-privilege-set"),
    clark(DAV, "acl"),
    clark(DAV, "acl-restrictions"),
    clark(DAV, "inherited-acl-set"),
    clark(DAV, "supported-method-set"),
    clark(DAV, "supported-report-set"),
    clark(DAV, "sync-token"),
    "{http://calendarserver.org/ns/}ctag",
    "{http://sabredav.org/ns}sync-token",
    clark(OC, "id"),
    clark(OC, "fileid"),
    clark(OC, "permissions"),
    clark(_OCS, "share-permissions"),
    clark(_OCM, "share-permissions"),
    clark(NC, "share-attributes"),
    clark(OC, "size"),
    clark(OC, "downloadURL"),
    clark(OC, "owner-id"),
    clark(OC, "owner-display-name"),
    clark(OC, "checksums"),
    clark(OC, "data-fingerprint"),
    clark(NC, "has-preview"),
    clark(NC, "mount-type"),
    clark(NC, "is-federated"),
    clark(NC, "note"),
)

#: What Nextcloud's ``Server::start`` puts in place of a ``TypeError``'s message (nextcloud/server
#: ``apps/dav/lib/Connector/Sabre/Server.php``: the original names the installation's paths).
TYPE_ERROR_MESSAGE = (
    "A type error occurred. For more details, please refer to the logs, which provide "
    "additional context about the type error."
)


@dataclass(frozen=True)
class XmlFragment:
    """A property value with child elements (sabre/dav ``Xml/Property/Complex``); ``xml`` is
    its inner XML."""

    xml: str


PropValue = str | XmlFragment | None
"""A property's value in a ``PROPPATCH``: its text, an XML fragment, or None (removed, empty)."""


class HandlerError(Exception):
    """A PHP exception a handler throws, which no one catches: sabre/dav ``Server::start``
    answers 500 with ``exception`` (its class, ``s:exception``) and ``str(exc)``
    (``s:message``)."""

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception = exception


class BodyError(ValueError):
    """A body that is not a ``d:propertyupdate`` (sabre/xml ``ParseException`` → 400);
    ``str(exc)`` is sabre's message."""


def _value(el: etree._Element) -> PropValue:
    # lxml reads <x/> and <x></x> alike: both are None here (sabre: null and "")
    if len(el) == 0 and el.text is None:
        return None
    if any(isinstance(child.tag, str) for child in el):
        inner = (el.text or "") + "".join(etree.tostring(c, encoding="unicode") for c in el)
        return XmlFragment(inner)
    return "".join(el.itertext())


def mutations(body: etree._Element | None) -> dict[str, PropValue]:
    """The properties (Clark name → value; None for a removal or an empty element) a
    ``d:propertyupdate`` body changes, in the order sabre/dav reads them (module docstring).
    Raises :class:`BodyError` for an empty body or another root element."""
    if body is None:
        raise BodyError("The input element to parse is empty. Do not attempt to parse")
    if body.tag != clark(DAV, "propertyupdate"):
        raise BodyError(
            f"Expected {clark(DAV, 'propertyupdate')} but received {etree.QName(body).text} "
            "as the root element"
        )
    out: dict[str, PropValue] = {}
    for action in body:
        if action.tag not in (clark(DAV, "set"), clark(DAV, "remove")):
            continue
        removal = action.tag == clark(DAV, "remove")
        for prop in action.findall(clark(DAV, "prop")):
            for child in prop:
                if isinstance(child.tag, str):
                    out[child.tag] = None if removal else _value(child)
    return out


Handler = Callable[[PropValue], int]


def _handlers(tree: FileTree, uid: str, path: str, node: Node) -> list[tuple[str, Handler]]:
    """The callbacks Nextcloud registers for a file or folder, in registration order."""

    def lastmodified(value: PropValue) -> int:
        # FilesPlugin::handleUpdateProperties → Node::touch → Node::sanitizeMtime → View::touch
        if value is None or value in ("", "0"):  # PHP empty($time): "return false"
            return 403
        if isinstance(value, XmlFragment):
            # MtimeSanitizer::sanitizeMtime(string …) given sabre's Complex object
            raise HandlerError("TypeError", TYPE_ERROR_MESSAGE)
        try:
            mtime = sanitize_mtime(value)
        except MtimeError as exc:
            raise HandlerError(exc.exception, str(exc)) from exc
        tree.touch(uid, path, mtime, event=True)
        return 200

    def favorite(value: PropValue) -> int:
        # TagsPlugin::handleUpdateProperties: tagAs / unTag the user's "_$!<Favorite>!$_"
        if isinstance(value, str) and value.strip() in ("1", "true"):
            node.favorite_of.add(uid)
        else:
            node.favorite_of.discard(uid)
        return 204 if value is None else 200

    return [
        (clark(DAV, "lastmodified"), lastmodified),
        (clark(DAV, "displayname"), lambda value: 403),
        (clark(OC, "favorite"), favorite),
    ]


def commit(
    tree: FileTree, uid: str, path: str, node: Node, changes: dict[str, PropValue]
) -> dict[str, int]:
    """Apply ``changes`` (:func:`mutations`) to ``node`` at ``uid``'s view ``path`` as
    ``Server::updateProperties`` does; returns Clark name → HTTP status, in sabre's result
    order. Raises :class:`HandlerError` when a handler throws (module docstring)."""
    result: dict[str, int] = {}
    failed = False
    for name in PROTECTED:
        if name in changes:
            result[name] = 403
            failed = True
    callbacks: list[tuple[str, Handler]] = []
    for name, handler in _handlers(tree, uid, path, node):
        if name in changes and name not in result:
            result[name] = 202
            callbacks.append((name, handler))
    for name in changes:  # the dead properties (module docstring, step 4)
        if name not in result:
            result[name] = 202
            callbacks.append((name, lambda value: 403))
    for name, handler in callbacks:
        if failed:
            break
        result[name] = handler(changes[name])
        failed = result[name] >= 400
    if failed:
        result = {name: 424 if status == 202 else status for name, status in result.items()}
    return result
