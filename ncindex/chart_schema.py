"""The ``config`` part of the Helm chart's ``values.schema.json``, generated from
:class:`~ncindex.settings.Settings` so that the chart refuses at ``helm install`` a value every
pod would refuse at start, from one home: each setting's type, bounds, choices and patterns are
pydantic's JSON Schema of its field (``Field(ge=…, le=…, pattern=…)``, ``Literal``, and the
``json_schema_extra`` that restates a validator in JSON Schema).

``python -m ncindex.chart_schema`` rewrites the file's ``properties.config``, and the pattern by
which ``externalRedis.url`` refuses credentials (:func:`redis_credentials_pattern`), and leaves
the rest of it (the chart's own values, written by hand) as it is; ``--check`` only says whether the
committed file is the generated one (exit status 1 when not), as ``tests/deploy/test_chart.py``
does. Run it after changing a setting (``make chart-schema``).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

from ncindex.settings import REDIS_URL_CREDENTIALS, Settings

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "helm" / "ncindex" / "values.schema.json"
"""The chart's schema in this checkout."""

NOT_IN_CONFIG = frozenset(
    {
        # secrets: from `secrets`, `externalRedis` and `externalQdrant`
        "webhook_secret",
        "webhook_previous_secret",
        "accounts",
        "accounts_file",
        "qdrant_api_key",
        "redis_url",
        "qdrant_url",
        # set by the chart: the image's models
        "model_dir",
        # read by `ncindex up` alone
        "qdrant_path",
        "data_dir",
        "host",
        "port",
        "shutdown_grace",
    }
)
"""Settings ``config`` may not set; every other setting it may."""

REQUIRED = ("nextcloud_url",)
"""Settings the chart cannot run without that have no default there (without a Nextcloud URL a
process serves nothing; only `ncindex up` has the simulator to fall back on)."""

CHART_NOTES = {
    "nextcloud_url": "The chart requires it: it runs no simulator.",
    "public_url": "The chart defaults it to the ingress's origin (https:// when ingress.tls "
    "covers ingress.host, else http://) with ingress.enabled, and requires it without.",
}
"""What the chart does with a setting beyond what the settings do, added to its description."""

DESCRIPTION = (
    "ncindex settings without the NCINDEX_ prefix (README 'Settings'), generated from "
    "ncindex.settings.Settings by `python -m ncindex.chart_schema`: only names of settings (a "
    "misspelt one would be ignored by every pod), without the secrets (from `secrets`, "
    "`externalRedis`, `externalQdrant`), model_dir (the image's models, set by the chart) and "
    "the settings of `ncindex up` alone (qdrant_path, data_dir, host, port, shutdown_grace). "
    "The rules across settings are checked when the pods start (README, Kubernetes)."
)

_LEFT_OUT = ("title", "default")
"""Keys of pydantic's field schemas the chart's schema leaves out: the title repeats the name,
and the default is the settings' (the chart's are in values.yaml)."""


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07 keywords) of the chart's ``config`` values: an object whose
    keys are the names of the settings outside :data:`NOT_IN_CONFIG` (no other:
    ``additionalProperties`` false), each value as pydantic
    describes its field, with :data:`REQUIRED` present and not empty. A setting that may be
    unset (``X | None``) is described by its ``X``: leaving the key out unsets it, and a
    ConfigMap holds no null. Raises ``ValueError`` for a field schema this does not handle (a
    ``$ref`` to a model, a union of more than one type and null)."""
    generated = Settings.model_json_schema()
    if "$defs" in generated:
        raise ValueError(f"settings refer to models {sorted(generated['$defs'])}: not handled")
    fields: dict[str, Any] = generated["properties"]
    names = [name for name in fields if name not in NOT_IN_CONFIG]
    properties = {name: _value_schema(name, fields[name]) for name in names}
    for name in REQUIRED:
        properties[name]["minLength"] = 1
    for name, note in CHART_NOTES.items():
        properties[name]["description"] += f" {note}"
    return {
        "type": "object",
        "description": DESCRIPTION,
        "required": list(REQUIRED),
        "properties": properties,
        # not propertyNames: Helm's validator reports a misspelt key "at '': invalid
        # propertyName" with every name, never saying config; this says "at '/config':
        # additional properties 'x' not allowed"
        "additionalProperties": False,
    }


def _value_schema(name: str, field: dict[str, Any]) -> dict[str, Any]:
    """``field`` (one of pydantic's property schemas) without :data:`_LEFT_OUT`, and without
    the null of an optional setting."""
    schema = {key: value for key, value in field.items() if key not in _LEFT_OUT}
    if "anyOf" in schema:
        branches = [branch for branch in schema.pop("anyOf") if branch != {"type": "null"}]
        if len(branches) != 1:
            raise ValueError(f"setting {name}: a union of {len(branches)} types is not handled")
        schema = branches[0] | schema
    return schema


def redis_credentials_pattern() -> str:
    """A regular expression (the subset common to ECMA 262, Go's RE2 and Python's ``re``, no
    flags) matching a Redis URL that carries a credential: a userinfo (``user:pw@``), or a
    query parameter named as in :data:`~ncindex.settings.REDIS_URL_CREDENTIALS` however its
    name is spelt: redis-py's ``parse_url`` (``redis/connection.py``) reads the query with
    ``parse_qs``, which percent-decodes each name (``pass%77ord=`` is ``password=``), and
    each letter is matched in either case, in either case of hex digit (``%6F``, ``%6f``,
    ``%4F``), so that ``Password=`` (a TypeError in redis-py, a password all the same)
    stays out of the ConfigMap too."""
    names = "|".join(
        "".join(_any_spelling(char) for char in name) for name in sorted(REDIS_URL_CREDENTIALS)
    )
    return f"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*@|^[^#]*[?&]({names})="


def _any_spelling(char: str) -> str:
    """A group matching ``char`` in either case, literally or as ``%xx`` (hex digits in
    either case): ``o`` → ``(?:[oO]|%6[fF]|%4[fF])``."""
    chars = dict.fromkeys((char.lower(), char.upper()))
    literal = f"[{''.join(chars)}]" if len(chars) > 1 else re.escape(char)
    encoded = (
        "%" + "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{ord(c):02x}")
        for c in chars
    )
    return f"(?:{'|'.join((literal, *encoded))})"


def schema_text(current: str) -> str:
    """``current`` (the text of a values.schema.json) with ``properties.config`` replaced by
    :func:`config_schema` and ``externalRedis.url``'s credential check by
    :func:`redis_credentials_pattern`, as the file is written: two-space indents, a final
    newline."""
    schema = copy.deepcopy(json.loads(current))
    schema["properties"]["config"] = config_schema()
    url = schema["properties"]["externalRedis"]["properties"]["url"]
    url["if"]["pattern"] = redis_credentials_pattern()
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite :data:`SCHEMA_FILE` (or ``--file``), or with ``--check`` report whether it is
    the generated one. Returns the exit status: 0, or 1 when ``--check`` finds it stale."""
    parser = argparse.ArgumentParser(prog="python -m ncindex.chart_schema", description=__doc__)
    parser.add_argument("--file", type=Path, default=SCHEMA_FILE, help="the values.schema.json")
    parser.add_argument("--check", action="store_true", help="only check it is up to date")
    args = parser.parse_args(argv)
    current = args.file.read_text(encoding="utf-8")
    generated = schema_text(current)
    if args.check:
        if generated != current:
            print(f"{args.file} is stale: run python -m ncindex.chart_schema", file=sys.stderr)
            return 1
        return 0
    args.file.write_text(generated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
