"""JSON Schemas of the two Prometheus Operator kinds the chart renders, for checking them
offline and strictly (``kubernetes-validate`` knows only Kubernetes' own kinds).

Written for this project from the field lists of the operator's CRDs (prometheus-operator
0.82, ``example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml`` and
``…_servicemonitors.yaml``: ``spec.groups[].rules[]`` with ``alert``/``record``, ``expr``,
``for``, ``labels``, ``annotations``; ``spec.selector``, ``spec.namespaceSelector``,
``spec.endpoints[]`` with ``port``, ``path``, ``interval``, ``scrapeTimeout``). Only the fields
the chart may use are allowed (``additionalProperties: false``), so a misspelt field fails here
as an unknown field fails ``kubernetes-validate``; fields of the CRDs the chart does not use
are left out, so this is narrower than the operator's own validation, never wider.
"""

from __future__ import annotations

from typing import Any

#: The operator's duration pattern (``monitoring.coreos.com/v1`` ``Duration``).
DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
    r"(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}, "labels": _LABELS},
    "additionalProperties": False,
}


def _object(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
    }


RULE = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "properties": {
        "alert": {"type": "string", "minLength": 1},
        "record": {"type": "string", "minLength": 1},
        "expr": {"type": "string", "minLength": 1},
        "for": DURATION,
        "labels": _LABELS,
        "annotations": _LABELS,
    },
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "PrometheusRule": _object(
        "PrometheusRule",
        {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": DURATION,
                            "rules": {"type": "array", "items": RULE},
                        },
                    },
                }
            },
        },
    ),
    "ServiceMonitor": _object(
        "ServiceMonitor",
        {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": _LABELS},
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string", "minLength": 1},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": DURATION,
                            "scrapeTimeout": DURATION,
                        },
                    },
                },
            },
        },
    ),
}
