"""The chart's monitoring: ServiceMonitors, a PrometheusRule and the Grafana dashboard, each off
by default, rendered offline by Helm's own engine and checked strictly — the ConfigMap by
``kubernetes-validate``, the Prometheus Operator kinds by :mod:`operator_schemas` — and every
metric a panel or an alert uses is checked to exist: ``ncindex_*`` in the apps' ``/metrics``
(the receiver's and the search API's, with the queue gauges gunicorn's config registers) and
``flower_*`` in Flower's (its own Prometheus metrics, as its ``/metrics`` serves them)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import redis
from operator_schemas import SCHEMAS
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from pydantic import SecretStr
from test_chart import CHART, KUBE_VERSIONS, MINIMAL, by_kind, render

from ncindex.names import QUEUES
from ncindex.settings import Settings
from ncindex.telemetry import QueueCollector
from search_api import create_app as create_search_app
from webhook_receiver import create_app as create_receiver_app

MONITORING: dict[str, Any] = copy.deepcopy(MINIMAL) | {
    "metrics": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "prometheusRule": {"enabled": True, "indexLagSeconds": 300},
        "grafanaDashboard": {"enabled": True},
    },
    # Prometheus runs in a namespace of its own: the Flower policy lets it in
    "networkPolicy": {
        "flowerFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    },
}
OPERATOR_KINDS = ("PrometheusRule", "ServiceMonitor")
METRIC = re.compile(r"\b(?:ncindex|flower)_[a-z0-9_]+\b")
#: Series a histogram or counter is queried by, and the family its exposition names.
SUFFIXES = ("_bucket", "_count", "_sum")


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


@pytest.fixture(scope="module")
def objects(chart: helm.Chart) -> list[dict[str, Any]]:
    return render(chart, MONITORING)


def dashboard(objects: list[dict[str, Any]]) -> dict[str, Any]:
    config = by_kind(objects, "ConfigMap")["nci-ncindex-dashboard"]
    return json.loads(config["data"]["ncindex.json"])


def expressions(objects: list[dict[str, Any]]) -> list[str]:
    """Every PromQL expression of the dashboard's panels and of the alerts."""
    panels = [t["expr"] for p in dashboard(objects)["panels"] for t in p["targets"]]
    (rule,) = by_kind(objects, "PrometheusRule").values()
    alerts = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    return panels + alerts


def families(exposition: str) -> set[str]:
    """Metric family names of a Prometheus text exposition (from its ``# TYPE`` lines)."""
    return {line.split()[2] for line in exposition.splitlines() if line.startswith("# TYPE ")}


def family(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_a_flower_service_monitor_behind_the_default_policy_is_refused(chart: helm.Chart) -> None:
    """networkPolicy.enabled (the default) with no networkPolicy.flowerFrom lets only this
    release's pods reach Flower: Prometheus never scraped the Flower ServiceMonitor, and
    NcindexNoWorkerHeartbeat (``absent(flower_worker_online)``) fired for ever. The values
    rendered without a word; now they are refused, naming the key to set."""
    values = copy.deepcopy(MONITORING)
    del values["networkPolicy"]
    with pytest.raises(helm.HelmRenderError, match=r"networkPolicy\.flowerFrom"):
        render(chart, values)
    # Flower off, or no policy at all: nothing to let in
    for change in ({"flower": {"enabled": False}}, {"networkPolicy": {"enabled": False}}):
        assert by_kind(render(chart, values | change), "ServiceMonitor")


def test_monitoring_is_off_by_default(chart: helm.Chart) -> None:
    kinds = {o["kind"] for o in render(chart, MINIMAL)}
    assert not kinds & set(OPERATOR_KINDS)
    assert "nci-ncindex-dashboard" not in by_kind(render(chart, MINIMAL), "ConfigMap")


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_every_object_is_valid(objects: list[dict[str, Any]], version: str) -> None:
    for obj in objects:
        if obj["kind"] in OPERATOR_KINDS:
            jsonschema.validate(obj, SCHEMAS[obj["kind"]])
        else:
            kubernetes_validate.validate(obj, version, strict=True)
    assert {o["kind"] for o in objects} >= set(OPERATOR_KINDS)


def test_the_operator_schemas_refuse_unknown_fields(objects: list[dict[str, Any]]) -> None:
    (rule,) = copy.deepcopy(list(by_kind(objects, "PrometheusRule").values()))
    rule["spec"]["groups"][0]["rules"][0]["fore"] = "10m"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rule, SCHEMAS["PrometheusRule"])
    monitor = copy.deepcopy(next(iter(by_kind(objects, "ServiceMonitor").values())))
    monitor["spec"]["endpoints"][0]["interval"] = "thirty seconds"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, SCHEMAS["ServiceMonitor"])


def test_service_monitors_select_the_services_they_scrape(objects: list[dict[str, Any]]) -> None:
    monitors = by_kind(objects, "ServiceMonitor")
    services = by_kind(objects, "Service")
    # the MCP server's too: ncindex_mcp_tool_calls_total was never scraped
    assert set(monitors) == {f"nci-ncindex-{c}" for c in ("receiver", "search", "mcp", "flower")}
    for name, monitor in monitors.items():
        service = services[name]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= (
            service["metadata"]["labels"].items()
        )
        assert monitor["metadata"]["labels"]["release"] == "prom"
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
        assert endpoint["path"] == "/metrics"


def test_alerts_and_dashboard_cover_what_operators_watch(objects: list[dict[str, Any]]) -> None:
    (rule,) = by_kind(objects, "PrometheusRule").values()
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "NcindexIndexLagHigh",
        "NcindexDeadLettersGrowing",
        "NcindexReceiverUnavailable",
        "NcindexVerificationErrors",
        "NcindexNoWorkerHeartbeat",
    }
    assert alerts["NcindexIndexLagHigh"]["expr"].endswith("> 300")  # the value set's threshold
    config = by_kind(objects, "ConfigMap")["nci-ncindex-dashboard"]
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = dashboard(objects)
    assert board["templating"]["list"][0]["type"] == "datasource"
    used = {family(m) for e in expressions(objects) for m in METRIC.findall(e)}
    assert used >= {
        "ncindex_webhook_events_total",  # deliveries in and refused
        "ncindex_queue_depth",
        "ncindex_index_lag_seconds",
        "flower_events_total",  # tasks by outcome
        "ncindex_indexing_chunks_per_second",  # embed throughput
        "ncindex_search_seconds",  # search latency by stage
        "ncindex_verifications_total",  # drops and errors
        "ncindex_dead_letter_documents",
        "flower_worker_online",
    }


def test_the_flower_heartbeat_alert_is_rendered_only_with_flower(chart: helm.Chart) -> None:
    """``NcindexNoWorkerHeartbeat`` (``absent(flower_worker_online)``) was rendered with
    ``flower.enabled: false`` too, where nothing exports the metric: it fired for ever."""
    values = copy.deepcopy(MONITORING) | {"flower": {"enabled": False}}
    (rule,) = by_kind(render(chart, values), "PrometheusRule").values()
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert "NcindexNoWorkerHeartbeat" not in alerts
    assert "NcindexIndexLagHigh" in alerts
    assert "nci-ncindex-flower" not in by_kind(render(chart, values), "ServiceMonitor")


def test_every_metric_used_exists_in_metrics(objects: list[dict[str, Any]], redis_url: str) -> None:
    used = {family(m) for e in expressions(objects) for m in METRIC.findall(e)}
    settings = Settings(
        redis_url=redis_url,
        webhook_secret=SecretStr("0123456789abcdef0123"),
        accounts={"alice": SecretStr("pw")},
    )
    apps: set[str] = set()
    for app in (create_receiver_app(settings), create_search_app(settings)):
        answer = app.test_client().get("/metrics")
        assert answer.status_code == 200
        apps |= families(answer.get_data(as_text=True))
    # what deploy/gunicorn.conf.py adds to both apps' /metrics (register_queue_metrics)
    registry = CollectorRegistry()
    registry.register(
        QueueCollector(
            redis.Redis.from_url(redis_url), QUEUES, keys=settings.names, accounts=settings.accounts
        )
    )
    apps |= families(generate_latest(registry).decode())
    assert {m for m in used if m.startswith("ncindex_")} <= apps

    from flower.events import get_prometheus_metrics

    get_prometheus_metrics()  # what Flower registers before it serves /metrics
    flower = {m for m in families(generate_latest(REGISTRY).decode()) if m.startswith("flower_")}
    assert {m for m in used if m.startswith("flower_")} <= flower
    assert {m for m in used if m.startswith("flower_")}, "the dashboard uses Flower's metrics"
