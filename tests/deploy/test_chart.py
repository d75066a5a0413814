"""The Helm chart, rendered offline by Helm's own engine (``helm-python-sdk``, Helm v4 via
its C ABI, no helm binary, no cluster) and checked against the Kubernetes schemas
(``kubernetes-validate``, strict: unknown fields are errors).

The optional Redis and Qdrant dependencies are declared in Chart.yaml but not vendored; Helm's
render step does not need them (``helm install`` does, after ``helm dependency build``), so the
"everything enabled" set renders ncindex's own objects pointed at the in-cluster services.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from ncindex.chart_schema import SCHEMA_FILE, schema_text
from ncindex.names import QUEUES
from ncindex.settings import LOG_LEVELS, REDIS_URL_CREDENTIALS, Settings, url_without_password

CHART = Path(__file__).resolve().parents[2] / "helm" / "ncindex"
KUBE_VERSIONS = ("1.30", kubernetes_validate.latest_version())

#: Where Nextcloud is, and where it reaches ncindex without an ingress: the chart has no
#: default for either.
NEXTCLOUD = {"nextcloud_url": "https://cloud.example.org", "public_url": "https://nci.example.org"}
#: The image every pod runs: nothing publishes one, so the chart has no default.
IMAGE = {"repository": "registry.example.org/ncindex", "tag": "0.1.0"}
MINIMAL: dict[str, Any] = {
    "image": IMAGE,
    "config": NEXTCLOUD,
    "secrets": {"webhookSecret": "0123456789abcdef0123", "accounts": {"alice": "app-pw-1"}},
    "externalRedis": {"url": "redis://redis.data:6379/0"},
    "externalQdrant": {"url": "http://qdrant.data:6333"},
    "flower": {"basicAuth": {"users": ["admin:correct-horse"]}},
}
EXTERNAL_SECRETS: dict[str, Any] = {
    "image": IMAGE,
    "config": NEXTCLOUD,
    "secrets": {"existingSecret": "ncindex-creds"},
    "externalRedis": {"existingSecret": "redis-creds"},
    "externalQdrant": {"url": "https://qdrant.example.org", "existingSecret": "qdrant-creds"},
    "flower": {"basicAuth": {"existingSecret": "flower-creds"}},
}
EVERYTHING: dict[str, Any] = {
    "image": {"repository": "registry.example.org/ncindex"},
    "secrets": {"webhookSecret": "0123456789abcdef0123", "accounts": {"a": "x", "b": "y"}},
    "redis": {"enabled": True},
    "qdrant": {"enabled": True},
    # the public URL follows the ingress
    "config": {
        "nextcloud_url": "https://cloud.example.org/nextcloud",
        "task_time_limit": 600,
        "visibility_timeout": 1200,
        "lock_ttl": 660,
    },
    "search": {
        "autoscaling": {
            "enabled": True,
            "minReplicas": 2,
            "maxReplicas": 8,
            "targetCPUUtilizationPercentage": 60,
        }
    },
    "workers": {
        "terminationGracePeriodSeconds": 660,
        "groups": {
            "index": {
                "queues": ["index"],
                "concurrency": 2,
                "replicas": 2,
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "autoscaling": {
                    "enabled": True,
                    "minReplicas": 2,
                    "maxReplicas": 10,
                    "targetCPUUtilizationPercentage": 80,
                },
                "pdb": {"enabled": True, "maxUnavailable": "50%"},
            },
            "reconcile": {
                "queues": ["reconcile"],
                "concurrency": 1,
                "replicas": 1,
                "resources": {"requests": {"cpu": "100m"}},
                "pdb": {"enabled": False, "maxUnavailable": 1},
                "autoscaling": {
                    "enabled": False,
                    "minReplicas": 1,
                    "maxReplicas": 1,
                    "targetCPUUtilizationPercentage": 80,
                },
            },
        },
    },
    "flower": {"basicAuth": {"users": ["admin:correct-horse", "ops:battery-staple"]}},
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "host": "search.example.org",
        "tls": [{"secretName": "search-tls", "hosts": ["search.example.org"]}],
    },
    "networkPolicy": {
        "httpFrom": [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}],
        "flowerFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}],
    },
}
VALUE_SETS = {"minimal": MINIMAL, "external-secrets": EXTERNAL_SECRETS, "everything": EVERYTHING}


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    """The chart, loaded once."""
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: helm.Chart, values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object the chart renders for ``values`` (release ``nci`` in namespace ``search``)."""
    manifests = chart.render(copy.deepcopy(values), name="nci", namespace="search")
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Objects of ``kind`` by name."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    """The single container of a Deployment."""
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest, chart: helm.Chart) -> list[dict[str, Any]]:
    """The objects of one value set."""
    return render(chart, VALUE_SETS[request.param])


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_every_object_is_valid_kubernetes(rendered: list[dict[str, Any]], version: str) -> None:
    assert rendered
    for obj in rendered:
        kubernetes_validate.validate(obj, version, strict=True)


def test_strict_validation_does_catch_unknown_fields() -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "bogus": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.30", strict=True)


def test_names_unique_and_selectors_match_pods(rendered: list[dict[str, Any]]) -> None:
    keys = [(o["kind"], o["metadata"]["name"]) for o in rendered]
    assert len(keys) == len(set(keys))
    deployments = by_kind(rendered, "Deployment")
    for dep in deployments.values():
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in deployments.values()]
    for kind in ("Service", "PodDisruptionBudget"):
        for obj in by_kind(rendered, kind).values():
            selector = obj["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            assert sum(selector.items() <= lbl.items() for lbl in pod_labels) == 1, obj
    for hpa in by_kind(rendered, "HorizontalPodAutoscaler").values():
        target = deployments[hpa["spec"]["scaleTargetRef"]["name"]]
        assert "replicas" not in target["spec"]  # the HPA owns the count


def test_every_pod_is_probed_limited_and_unprivileged(rendered: list[dict[str, Any]]) -> None:
    for name, dep in by_kind(rendered, "Deployment").items():
        pod = dep["spec"]["template"]["spec"]
        box = container(dep)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert box["securityContext"]["readOnlyRootFilesystem"] is True
        assert box["resources"]["requests"], name
        role = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        if role in ("receiver", "search", "mcp"):
            assert box["livenessProbe"]["httpGet"]["path"] == "/livez"
            assert box["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert box["args"][:3] == ["gunicorn", "--config", "/etc/ncindex/gunicorn.conf.py"]
            env = {e["name"]: e.get("value") for e in box["env"]}
            assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
            assert box["lifecycle"]["preStop"]["sleep"]["seconds"] > 0
            annotations = dep["spec"]["template"]["metadata"]["annotations"]
            assert annotations["prometheus.io/scrape"] == "true"
            assert annotations["prometheus.io/port"] == str(box["ports"][0]["containerPort"])
        elif role.startswith("worker-"):
            probe = box["livenessProbe"]["exec"]["command"]
            assert probe[:3] == ["python", "-m", "workers.heartbeat"]
            assert "inspect" not in probe
            env = {e["name"]: e.get("value") for e in box["env"]}
            assert env["NCINDEX_HEARTBEAT_FILE"] == probe[3]


def test_the_mcp_server_has_its_deployment_service_and_route(chart: helm.Chart) -> None:
    for values in (MINIMAL, EVERYTHING):
        objects = render(chart, values)
        mcp = by_kind(objects, "Deployment")["nci-ncindex-mcp"]
        box = container(mcp)
        assert box["args"] == [
            "gunicorn", "--config", "/etc/ncindex/gunicorn.conf.py",
            "--worker-class", "uvicorn_worker.UvicornWorker", "mcp_server.asgi:app",
        ]  # fmt: skip
        assert box["startupProbe"]["httpGet"]["path"] == "/livez"
        service = by_kind(objects, "Service")["nci-ncindex-mcp"]
        assert service["spec"]["ports"][0]["targetPort"] == "http"
        assert "nci-ncindex-mcp" in by_kind(objects, "NetworkPolicy")
        config = by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
        hosts = json.loads(config["NCINDEX_MCP_ALLOWED_HOSTS"])
        assert {"nci-ncindex-mcp", "nci-ncindex-mcp:*", "nci-ncindex-mcp.search.svc:*"} <= set(
            hosts
        )
    # the ingress host is allowed and /mcp is routed to the MCP server
    assert {"search.example.org", "search.example.org:*"} <= set(hosts)
    assert json.loads(config["NCINDEX_MCP_ALLOWED_ORIGINS"]) == ["https://search.example.org"]
    (ingress,) = by_kind(objects, "Ingress").values()
    paths = {p["path"]: p for p in ingress["spec"]["rules"][0]["http"]["paths"]}
    assert paths["/mcp"]["backend"]["service"]["name"] == "nci-ncindex-mcp"
    # the origin's scheme follows the ingress's TLS (it was https:// without TLS too, and a
    # browser's http:// origin was refused 403)
    for tls, scheme in (
        ([], "http"),
        ([{"secretName": "other-tls", "hosts": ["other.example.org"]}], "http"),
        ([{"secretName": "default-tls"}], "https"),  # no hosts: the controller's default
        ([{"secretName": "wild-tls", "hosts": ["*.example.org"]}], "https"),  # one label
        ([{"secretName": "deep-tls", "hosts": ["*.org"]}], "http"),  # not two labels
    ):
        values = with_change(EVERYTHING, "ingress.tls", tls)
        config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
        origins = json.loads(config["NCINDEX_MCP_ALLOWED_ORIGINS"])
        assert origins == [f"{scheme}://search.example.org"], tls
    # an operator's own allow-list wins
    own = render(chart, with_change(MINIMAL, "config.mcp_allowed_hosts", ["mcp.example.org"]))
    config = by_kind(own, "ConfigMap")["nci-ncindex"]["data"]
    assert json.loads(config["NCINDEX_MCP_ALLOWED_HOSTS"]) == ["mcp.example.org"]


def test_behind_the_ingress_one_proxy_is_trusted(chart: helm.Chart) -> None:
    """Behind the ingress every request reached the pods from the ingress controller's
    address, so all anonymous callers shared one per-address rate-limit count: with an
    ingress the chart trusts one proxy's ``X-Forwarded-For``, without one none, and an
    operator's own number wins."""
    config = by_kind(render(chart, EVERYTHING), "ConfigMap")["nci-ncindex"]["data"]
    assert config["NCINDEX_TRUSTED_PROXY_HOPS"] == "1"
    values = with_change(MINIMAL, "config.public_url", "https://nci.example.org")
    config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
    assert "NCINDEX_TRUSTED_PROXY_HOPS" not in config
    own = render(chart, with_change(EVERYTHING, "config.trusted_proxy_hops", 2))
    assert by_kind(own, "ConfigMap")["nci-ncindex"]["data"]["NCINDEX_TRUSTED_PROXY_HOPS"] == "2"
    with pytest.raises(helm.HelmValuesError, match="trusted_proxy_hops"):
        render(chart, with_change(EVERYTHING, "config.trusted_proxy_hops", -1))


def test_the_mcp_server_allows_the_public_url_host_and_origin(
    chart: helm.Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``config.public_url`` and no ingress the allow-list held only the Service's cluster
    names, so ``/mcp`` reached through the operator's own proxy at the public URL was 421
    (misdirected: Host not allowed). Its host (port dropped) and origin are allowed too."""
    for url, host, origin in (
        ("https://nci.example.org", "nci.example.org", "https://nci.example.org"),
        (
            "https://Hooks.example.org:443/ncindex/",
            "hooks.example.org",
            "https://hooks.example.org",
        ),
        ("http://10.0.0.7:8081/sub", "10.0.0.7", "http://10.0.0.7:8081"),
    ):
        values = with_change(MINIMAL, "config.public_url", url)
        config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
        hosts = json.loads(config["NCINDEX_MCP_ALLOWED_HOSTS"])
        assert {host, f"{host}:*", "nci-ncindex-mcp"} <= set(hosts), url
        assert json.loads(config["NCINDEX_MCP_ALLOWED_ORIGINS"]) == [origin], url
    for key, value in config.items():
        monkeypatch.setenv(key, value)
    settings = Settings(webhook_secret="0123456789abcdef0123")
    assert "10.0.0.7:*" in settings.mcp_allowed_hosts
    assert settings.mcp_allowed_origins == ["http://10.0.0.7:8081"]
    # with an ingress as well, both origins; the same host once
    values = with_change(EVERYTHING, "config.public_url", "https://search.example.org/")
    config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
    hosts = json.loads(config["NCINDEX_MCP_ALLOWED_HOSTS"])
    assert hosts.count("search.example.org") == 1
    assert json.loads(config["NCINDEX_MCP_ALLOWED_ORIGINS"]) == ["https://search.example.org"]
    values = with_change(EVERYTHING, "config.public_url", "https://hooks.example.org")
    config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
    assert json.loads(config["NCINDEX_MCP_ALLOWED_ORIGINS"]) == [
        "https://search.example.org",
        "https://hooks.example.org",
    ]


def test_worker_groups_split_queues_and_outlast_the_hard_limit(
    rendered: list[dict[str, Any]],
) -> None:
    config = next(iter(by_kind(rendered, "ConfigMap").values()))["data"]
    hard_limit = int(config["NCINDEX_TASK_TIME_LIMIT"])
    workers = {n: d for n, d in by_kind(rendered, "Deployment").items() if "-worker-" in n}
    assert len(workers) >= 2
    queue_sets = []
    for dep in workers.values():
        args = container(dep)["args"]
        assert args[:4] == ["celery", "--app=workers.worker", "worker", args[3]]
        queues = next(a for a in args if a.startswith("--queues=")).removeprefix("--queues=")
        queue_sets.append(set(queues.split(",")))
        assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > hard_limit
    assert {"index"} in queue_sets  # embedding has its own workers
    assert not any("index" in qs and "evict" in qs for qs in queue_sets)
    assert set().union(*queue_sets) <= set(QUEUES)


#: Kubernetes memory quantity suffixes (the chart's values use these), bytes.
_MEMORY_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def test_each_worker_groups_memory_bound_is_below_its_memory_limit(chart: helm.Chart) -> None:
    """The ``NCINDEX_WORKER_MAX_MEMORY_PER_CHILD`` each worker Deployment runs with (its own
    env, else the ConfigMap's) is below its container's memory limit: a pool process's peak
    never passes that limit, so a bound at or above it replaces no process. (Before, the
    light group, 4 processes under 1 GiB, ran with the index worker's 1,200,000 KiB: the test
    failed there.)"""
    objects = render(chart, MINIMAL)
    config = by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
    workers = {n: d for n, d in by_kind(objects, "Deployment").items() if "-worker-" in n}
    assert len(workers) >= 2
    for name, deployment in workers.items():
        box = container(deployment)
        env = {e["name"]: e.get("value") for e in box["env"]}
        bound = int(
            env.get("NCINDEX_WORKER_MAX_MEMORY_PER_CHILD")
            or config.get("NCINDEX_WORKER_MAX_MEMORY_PER_CHILD")
            or Settings.model_fields["worker_max_memory_per_child"].default
        )
        quantity = re.fullmatch(r"([0-9]+)([a-zA-Z]*)", box["resources"]["limits"]["memory"])
        assert quantity is not None
        limit_kib = int(quantity[1]) * _MEMORY_UNITS[quantity[2]] // 1024
        assert 0 < bound < limit_kib, (name, bound, limit_kib)


def test_exactly_one_beat(rendered: list[dict[str, Any]]) -> None:
    beats = [d for n, d in by_kind(rendered, "Deployment").items() if n.endswith("-beat")]
    assert len(beats) == 1
    (beat,) = beats
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert container(beat)["args"][:3] == ["celery", "--app=workers.beat", "beat"]
    assert not [h for h in by_kind(rendered, "HorizontalPodAutoscaler") if "beat" in h]
    assert not [p for p in by_kind(rendered, "PodDisruptionBudget") if "beat" in p]


def test_flower_has_basic_auth_from_a_secret(rendered: list[dict[str, Any]]) -> None:
    flower = by_kind(rendered, "Deployment")["nci-ncindex-flower"]
    env = {e["name"]: e for e in container(flower)["env"]}
    ref = env["FLOWER_BASIC_AUTH"]["valueFrom"]["secretKeyRef"]
    secrets = by_kind(rendered, "Secret")
    if ref["name"] in secrets:
        users = secrets[ref["name"]]["stringData"][ref["key"]].split(",")
        assert all(":" in u for u in users)
    else:
        assert ref["name"] == "flower-creds"


def test_settings_from_configmap_and_secret_are_valid(
    chart: helm.Chart, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a pod's environment holds is accepted by :class:`Settings` (the real validator)."""
    objects = render(chart, MINIMAL)
    config = by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
    secret = by_kind(objects, "Secret")["nci-ncindex"]["stringData"]
    deployment = by_kind(objects, "Deployment")["nci-ncindex-worker-index"]
    box = container(deployment)
    accounts = tmp_path / "accounts.json"
    accounts.write_text(secret["accounts.json"])
    for key, value in config.items():
        monkeypatch.setenv(key, value)
    env = {e["name"]: e for e in box["env"]}
    mounts = {m["name"]: m["mountPath"] for m in box["volumeMounts"]}
    assert env["NCINDEX_ACCOUNTS_FILE"]["value"] == mounts["secrets"] + "/accounts.json"
    assert env["NCINDEX_WEBHOOK_SECRET"]["valueFrom"]["secretKeyRef"]["key"] == "webhook-secret"
    monkeypatch.setenv("NCINDEX_ACCOUNTS_FILE", str(accounts))
    monkeypatch.setenv("NCINDEX_WEBHOOK_SECRET", secret["webhook-secret"])
    settings = Settings()
    assert settings.password_for("alice") == "app-pw-1"
    assert settings.redis_url == "redis://redis.data:6379/0"
    assert settings.qdrant_url == "http://qdrant.data:6333"
    assert str(settings.model_dir) == "/opt/ncindex/models"


def test_whole_numbers_of_a_million_and_more_reach_the_settings_as_integers(
    chart: helm.Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helm holds every number of the values as float64, and ``toString`` writes one of a
    million or more as ``1.048576e+06``, which an integer setting refuses (every pod failed
    to start): whole numbers are written as integers, fractions as they are."""
    big = {
        "qdrant_max_segment_size_kb": 1_048_576,
        "max_download_bytes": 104_857_600,
        "qdrant_sparse_full_scan_share": 0.25,
        "dense_prefetch_share": 1.0,
    }
    values = {**MINIMAL, "config": NEXTCLOUD | big}
    config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]
    data = config["data"]
    assert data["NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB"] == "1048576"
    assert data["NCINDEX_MAX_DOWNLOAD_BYTES"] == "104857600"
    assert data["NCINDEX_QDRANT_SPARSE_FULL_SCAN_SHARE"] == "0.25"
    for key, value in data.items():
        monkeypatch.setenv(key, value)
    settings = Settings(webhook_secret="0123456789abcdef0123")
    assert settings.qdrant_max_segment_size_kb == 1_048_576
    assert settings.max_download_bytes == 104_857_600
    assert settings.dense_prefetch_share == 1.0


def test_an_account_with_a_login_name_reaches_the_settings(
    chart: helm.Chart, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``secrets.accounts`` may give ``{password, login}`` (an LDAP or e-mail login)."""
    values = with_change(
        MINIMAL, "secrets.accounts", {"u1001": {"password": "pw", "login": "carol@example.org"}}
    )
    secret = by_kind(render(chart, values), "Secret")["nci-ncindex"]["stringData"]
    accounts = tmp_path / "accounts.json"
    accounts.write_text(secret["accounts.json"])
    monkeypatch.setenv("NCINDEX_ACCOUNTS_FILE", str(accounts))
    settings = Settings()
    assert (settings.password_for("u1001"), settings.login_for("u1001")) == (
        "pw",
        "carol@example.org",
    )
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(with_change(MINIMAL, "secrets.accounts", {"u": {"login": "x"}}))


def test_a_rotated_webhook_secret_keeps_the_previous_one_accepted(
    chart: helm.Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changing secrets.webhookSecret rolled every receiver to the new secret while Nextcloud's
    registrations still sent the old one (until ``ncindex webhooks register``): each delivery
    in between was refused 401. secrets.previousWebhookSecret (or the existing Secret's
    optional key ``webhook-previous-secret``) reaches every pod as the secret still accepted."""
    values = with_change(MINIMAL, "secrets.previousWebhookSecret", "the-old-secret-0123456789")
    objects = render(chart, values)
    secret = by_kind(objects, "Secret")["nci-ncindex"]["stringData"]
    assert secret["webhook-previous-secret"] == "the-old-secret-0123456789"
    assert (
        "webhook-previous-secret"
        not in by_kind(render(chart, MINIMAL), "Secret")["nci-ncindex"]["stringData"]
    )
    for values_set in (values, EXTERNAL_SECRETS):
        for name, deployment in by_kind(render(chart, values_set), "Deployment").items():
            if name.endswith("-flower"):
                continue
            env = {e["name"]: e for e in container(deployment)["env"]}
            ref = env["NCINDEX_WEBHOOK_PREVIOUS_SECRET"]["valueFrom"]["secretKeyRef"]
            assert ref == {
                "name": env["NCINDEX_WEBHOOK_SECRET"]["valueFrom"]["secretKeyRef"]["name"],
                "key": "webhook-previous-secret",
                "optional": True,  # an existing Secret without the key still starts the pods
            }, name
    monkeypatch.setenv("NCINDEX_WEBHOOK_PREVIOUS_SECRET", secret["webhook-previous-secret"])
    settings = Settings(webhook_secret=secret["webhook-secret"])
    assert settings.webhook_previous_secret.get_secret_value() == "the-old-secret-0123456789"


def test_external_secrets_are_referenced_not_copied(chart: helm.Chart) -> None:
    objects = render(chart, EXTERNAL_SECRETS)
    assert "nci-ncindex" not in by_kind(objects, "Secret")
    config = by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
    assert "NCINDEX_REDIS_URL" not in config
    env = {
        e["name"]: e for e in container(by_kind(objects, "Deployment")["nci-ncindex-search"])["env"]
    }
    assert env["NCINDEX_REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == "redis-creds"
    assert env["NCINDEX_QDRANT_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "qdrant-creds"
    assert env["NCINDEX_WEBHOOK_SECRET"]["valueFrom"]["secretKeyRef"]["name"] == "ncindex-creds"


def test_in_cluster_dependencies(chart: helm.Chart) -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    conditions = {d["name"]: d["condition"] for d in meta["dependencies"]}
    assert conditions == {"redis": "redis.enabled", "qdrant": "qdrant.enabled"}
    status = {d["name"]: d["status"] for d in helm.dependency_list(CHART)}
    assert status == {"redis": "missing", "qdrant": "missing"}  # declared, never vendored
    objects = render(chart, EVERYTHING)
    config = by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
    assert config["NCINDEX_REDIS_URL"] == "redis://nci-redis-master:6379/0"
    assert config["NCINDEX_QDRANT_URL"] == "http://nci-qdrant:6333"
    ingress = by_kind(objects, "Ingress")["nci-ncindex"]
    paths = {
        p["path"]: p["backend"]["service"]["name"]
        for p in ingress["spec"]["rules"][0]["http"]["paths"]
    }
    search = "nci-ncindex-search"
    assert paths == {
        "/hooks": "nci-ncindex-receiver",
        "/v1": search,
        "/rcp": search,
        "/openapi.json": search,
        "/mcp": "nci-ncindex-mcp",
    }  # /metrics and health stay in the cluster
    hpas = by_kind(objects, "HorizontalPodAutoscaler")
    assert set(hpas) == {"nci-ncindex-search", "nci-ncindex-worker-index"}


def test_the_in_cluster_redis_password_reaches_the_pods(
    chart: helm.Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``redis.auth.enabled`` the URL named no password, so every pod was refused by the
    in-cluster Redis (NOAUTH). The bitnami chart's Secret (``<release>-redis``, key
    ``redis-password``, or ``redis.auth.existingSecret``) reaches the URL through
    ``$(REDIS_PASSWORD)``, which Kubernetes expands from the variable defined before it."""
    for auth, secret, key in (
        ({"enabled": True}, "nci-redis", "redis-password"),
        (
            {"enabled": True, "existingSecret": "redis-auth", "existingSecretPasswordKey": "pw"},
            "redis-auth",
            "pw",
        ),
    ):
        objects = render(chart, with_change(EVERYTHING, "redis.auth", auth))
        assert "NCINDEX_REDIS_URL" not in by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
        for deployment in by_kind(objects, "Deployment").values():
            env = container(deployment)["env"]
            names = [e["name"] for e in env]
            assert names.index("REDIS_PASSWORD") < names.index("NCINDEX_REDIS_URL")
            by_name = {e["name"]: e for e in env}
            ref = by_name["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": secret, "key": key}
            url = by_name["NCINDEX_REDIS_URL"]["value"]
            assert url == "redis://:$(REDIS_PASSWORD)@nci-redis-master:6379/0"
    # as Kubernetes expands it, the settings read the password
    monkeypatch.setenv("NCINDEX_REDIS_URL", url.replace("$(REDIS_PASSWORD)", "s3cret"))
    assert Settings(webhook_secret="0123456789abcdef0123").redis_url.startswith("redis://:s3cret@")
    # without auth the URL stays in the ConfigMap
    config = by_kind(render(chart, EVERYTHING), "ConfigMap")["nci-ncindex"]["data"]
    assert config["NCINDEX_REDIS_URL"] == "redis://nci-redis-master:6379/0"


def test_the_in_cluster_qdrant_api_key_reaches_the_pods(chart: helm.Chart) -> None:
    """With ``qdrant.enabled`` the pods got no NCINDEX_QDRANT_API_KEY, even with
    ``externalQdrant.existingSecret`` set: an in-cluster Qdrant with an API key refused them.
    The qdrant chart's key (``qdrant.apiKey``) is read from its Secret, ``<release>-qdrant-apikey``
    key ``api-key`` (qdrant/qdrant-helm templates/secret.yaml), else the existingSecret."""
    own = {"existingSecret": "qdrant-creds"}
    cases = (
        ({"enabled": True, "apiKey": True}, {}, {"name": "nci-qdrant-apikey", "key": "api-key"}),
        ({"enabled": True}, own, {"name": "qdrant-creds", "key": "api-key"}),
        ({"enabled": True}, {}, None),
    )
    for qdrant, external, ref in cases:
        values = with_change(with_change(EVERYTHING, "qdrant", qdrant), "externalQdrant", external)
        for deployment in by_kind(render(chart, values), "Deployment").values():
            env = {e["name"]: e for e in container(deployment)["env"]}
            if ref is None:
                assert "NCINDEX_QDRANT_API_KEY" not in env
            else:
                assert env["NCINDEX_QDRANT_API_KEY"]["valueFrom"]["secretKeyRef"] == ref


def test_the_in_cluster_qdrant_cluster_keeps_two_copies_by_default(chart: helm.Chart) -> None:
    """``qdrant.enabled`` runs a 3-node cluster, and NCINDEX_QDRANT_REPLICATION_FACTOR was "1":
    draining a node (its PodDisruptionBudget allows it) took that node's shards away. Unset,
    it is 2 on an in-cluster cluster of two nodes or more; set, it is the operator's."""

    def factor(values: dict[str, Any]) -> str | None:
        config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
        return config.get("NCINDEX_QDRANT_REPLICATION_FACTOR")

    assert chart.values["qdrant"]["replicaCount"] == 3
    assert factor(EVERYTHING) == "2"
    assert factor(with_change(EVERYTHING, "qdrant.replicaCount", 1)) is None
    assert factor(with_change(EVERYTHING, "config.qdrant_replication_factor", 3)) == "3"
    assert factor(MINIMAL) is None  # an external Qdrant: the settings' default
    assert Settings.model_fields["qdrant_replication_factor"].default == 1


def test_the_chart_version_says_its_values_broke_and_readme_tells_how_to_upgrade() -> None:
    """0.1.0 stayed the version while values that installed it became refused (a required
    ``config.nextcloud_url``, unknown ``config`` keys, a required image): a 0.x chart's breaking
    change bumps the minor version, and README says what to change."""
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    major, minor, _ = (int(part) for part in meta["version"].split("."))
    assert (major, minor) >= (0, 2)
    readme = (CHART.parents[1] / "README.md").read_text()
    assert f"Upgrading the chart from 0.1.0 to {meta['version']}" in readme


def test_readme_kubectl_commands_name_deployments_of_its_own_release(chart: helm.Chart) -> None:
    """README's ``helm install ncindex helm/ncindex`` makes the release ``ncindex``, whose
    objects are named ``ncindex-…`` (``ncindex.fullname``: a release name holding the chart's is
    used as is), but README then said ``kubectl exec deploy/<release>-ncindex-receiver``:
    followed as written, ``deploy/ncindex-ncindex-receiver``, which does not exist."""
    readme = (CHART.parents[1] / "README.md").read_text()
    assert "`helm install ncindex helm/ncindex " in readme
    names = re.findall(r"kubectl (?:exec|rollout status) (?:-n \S+ )?deploy/(\S+)", readme)
    objects = chart.render(copy.deepcopy(MINIMAL), name="ncindex", namespace="search")
    deployments = {
        doc["metadata"]["name"]
        for path, text in objects.items()
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc and doc["kind"] == "Deployment"
    }
    shown = {name.replace("<release>", "ncindex") for name in names}
    assert shown and sorted(shown - deployments) == []


def test_the_notes_port_forward_reaches_the_flower_service_port(chart: helm.Chart) -> None:
    """The notes said ``port-forward svc/…-flower 5555``, which fails once
    flower.service.port is another port (port-forward names the Service's port)."""
    values = with_change(MINIMAL, "flower.service.port", 80)
    notes = chart.render(copy.deepcopy(values), name="nci", namespace="search")
    (text,) = [t for path, t in notes.items() if path.endswith("NOTES.txt")]
    assert "kubectl port-forward -n search svc/nci-ncindex-flower 5555:80," in text


def test_the_notes_name_the_namespace_the_doctor_and_a_webhook_secret_in_clear(
    chart: helm.Chart,
) -> None:
    """The notes' ``kubectl exec`` and ``port-forward`` named no namespace (run from another
    one, they found no such deployment), never mentioned ``ncindex doctor``, and said nothing
    when webhooks went to an ``http://`` URL, where the webhook secret travels in clear."""
    text = notes(chart, MINIMAL)
    commands = [line for line in text.splitlines() if "kubectl " in line]
    assert len(commands) == 3 and all(" -n search " in line for line in commands)
    assert "kubectl exec -n search deploy/nci-ncindex-receiver -- ncindex doctor" in text
    assert "WARNING" not in text  # https://nci.example.org
    for values in (
        with_change(MINIMAL, "config.public_url", "http://nci.example.org"),
        with_change(EVERYTHING, "ingress.tls", []),  # the ingress's origin, http://
    ):
        text = notes(chart, values)
        assert "is http://: Nextcloud sends the webhook secret" in text


def test_the_upgrade_notes_wait_for_the_rollout_before_the_analyzer_rewrite(
    chart: helm.Chart,
) -> None:
    """``helm upgrade`` to a release with a new BM25 analyzer said nothing: the operator learnt
    of ``ncindex reindex --analyzer`` only from a doctor run by chance, and nothing said to wait
    for the rollout, during which the previous release's workers keep writing their analyzer's
    vectors (and may take the rewrite task). Only an upgrade says it."""
    assert "reindex --analyzer" not in notes(chart, MINIMAL)
    rendered = chart.render(
        copy.deepcopy(EVERYTHING), name="nci", namespace="search", is_upgrade=True, revision=2
    )
    (text,) = [t for path, t in rendered.items() if path.endswith("NOTES.txt")]
    lines = text.splitlines()
    waits = [line.strip() for line in lines if "kubectl rollout status" in line]
    assert waits == [
        f"kubectl rollout status -n search deploy/nci-ncindex-{component}"
        for component in ("receiver", "worker-index", "worker-light", "worker-reconcile")
    ]
    rewrite = "kubectl exec -n search deploy/nci-ncindex-receiver -- ncindex reindex --analyzer"
    (at,) = [i for i, line in enumerate(lines) if line.strip() == rewrite]
    assert all(i < at for i, line in enumerate(lines) if "kubectl rollout status" in line)


def test_the_upgrade_notes_say_upgraded_and_open_with_the_upgrade_steps(
    chart: helm.Chart,
) -> None:
    """``helm upgrade`` printed "… is installed" (as ``helm install`` does), with the upgrade's
    steps after the install's: the headline follows ``.Release.IsUpgrade`` and the rollout
    waits come right under it, before the doctor and the analyzer rewrite."""
    installed = notes(chart, MINIMAL).splitlines()
    assert installed[0] == "ncindex 0.1.0 is installed as nci-ncindex in namespace search."
    assert not any("upgraded" in line or "rollout" in line for line in installed)
    rendered = chart.render(
        copy.deepcopy(MINIMAL), name="nci", namespace="search", is_upgrade=True, revision=3
    )
    (text,) = [t for path, t in rendered.items() if path.endswith("NOTES.txt")]
    lines = text.splitlines()
    assert lines[0] == (
        "ncindex 0.1.0 is upgraded as nci-ncindex in namespace search (revision 3)."
    )
    assert "installed" not in text
    commands = [line.strip().split(" -- ")[-1] for line in lines if "kubectl " in line]
    assert commands[:2] == [
        "kubectl rollout status -n search deploy/nci-ncindex-receiver",
        "kubectl rollout status -n search deploy/nci-ncindex-worker-index",
    ]
    assert commands.index("ncindex doctor") < commands.index("ncindex reindex --analyzer")


def test_the_search_page_is_routed_through_the_ingress_when_asked(chart: helm.Chart) -> None:
    """The ingress routed the API alone: the search page (/ and /ui) was not reachable, and a
    prefix / in searchPaths would also have routed /metrics and the health endpoints out."""
    values = with_change(EVERYTHING, "ingress.searchPage", True)
    ingress = by_kind(render(chart, values), "Ingress")["nci-ncindex"]
    paths = {
        (p["path"], p["pathType"]): p["backend"]["service"]["name"]
        for p in ingress["spec"]["rules"][0]["http"]["paths"]
    }
    assert paths[("/", "Exact")] == paths[("/ui", "Prefix")] == "nci-ncindex-search"
    assert paths[("/hooks", "Prefix")] == "nci-ncindex-receiver"
    assert ("/", "Prefix") not in paths and ("/metrics", "Prefix") not in paths
    default = by_kind(render(chart, EVERYTHING), "Ingress")["nci-ncindex"]
    assert "/ui" not in {p["path"] for p in default["spec"]["rules"][0]["http"]["paths"]}


def test_lint_reports_only_the_unvendored_dependencies() -> None:
    report = helm.lint(CHART, copy.deepcopy(MINIMAL), strict=True, kube_version="v1.30.0")
    assert report["errors"] == ["chart directory is missing these dependencies: redis,qdrant"]
    worse = [m for m in report["messages"] if m["severity"] >= 2]
    assert [m["error"] for m in worse] == report["errors"]


def with_change(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with the dotted ``path`` set to ``value``."""
    values = copy.deepcopy(base)
    node = values
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return values


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("secrets.webhookSecret", "short", "webhookSecret"),
        # accepted beside webhookSecret by the receivers: a short one was a way past it
        ("secrets.previousWebhookSecret", "short", "previousWebhookSecret"),
        # no account: accounts.json "{}" rendered, and no document could be read or verified
        ("secrets.accounts", {}, "/secrets/accounts': minProperties"),
        ("secrets", {"webhookSecret": "0123456789abcdef0123"}, "/secrets/accounts"),
        ("config.webhook_secret", "leaked", "webhook_secret"),
        ("config.redis_url", "redis://x", "redis_url"),
        ("config.log_level", "LOUD", "log_level"),
        ("image.pullPolicy", "Sometimes", "pullPolicy"),
        ("workers.groups.index.queues", ["index", "embeddings"], "queues"),
        ("workers.groups.index.concurrency", 0, "concurrency"),
        ("workers.groups.Bad_Name", {}, "groups"),
        ("receiver.replicas", "two", "replicas"),
        ("search.resources.limits.memory", "lots", "memory"),
        ("flower.basicAuth.users", ["admin"], "users"),
        ("externalRedis.url", "http://redis", "url"),
        # the password landed in the ConfigMap: a Secret is the place (externalRedis.existingSecret)
        ("externalRedis.url", "redis://:hunter2@redis.data:6379/0", "externalRedis.existingSecret"),
        ("externalRedis.url", "rediss://ncindex@redis.data:6380/0", "no user or password"),
        # redis-py's from_url (and kombu's URL parsing) read credentials from the query too
        ("externalRedis.url", "redis://redis.data:6379/0?password=hunter2", "existingSecret"),
        ("externalRedis.url", "rediss://redis.data:6380/0?db=0&username=nci", "user or password"),
        ("externalRedis.url", "rediss://redis.data:6380/0?ssl_password=pw", "user or password"),
        # parse_qs percent-decodes the names redis-py reads: the regex took these
        ("externalRedis.url", "redis://redis.data:6379/0?pass%77ord=hunter2", "user or password"),
        (
            "externalRedis.url",
            "redis://redis.data:6379/0?db=0&%75ser%4eame=nci",
            "user or password",
        ),
        ("externalRedis.url", "rediss://redis.data:6380/0?ssl%5Fpassword=pw", "user or password"),
        ("externalRedis.url", "redis://redis.data:6379/0?Password=hunter2", "user or password"),
        ("beat.replicas", 2, "beat"),
        ("gunicorn.preStopSeconds", 0, "preStopSeconds"),
        ("metrics.scrapeAnnotations", "yes", "scrapeAnnotations"),
        ("metrics.prometheusRule.indexLagSeconds", 0, "indexLagSeconds"),
        ("metrics.serviceMonitor.interval", "30 seconds", "interval"),
        ("metrics.grafanaDashboard.labels", {"grafana_dashboard": 1}, "grafana_dashboard"),
        ("ingress.searchPaths", ["/*"], "searchPaths"),
        ("config.qdrant_max_segment_size_kb", 2**40, "qdrant_max_segment_size_kb"),
        ("config.qdrant_sparse_full_scan_share", 1.5, "qdrant_sparse_full_scan_share"),
        ("config.dense_prefetch_share", "half", "dense_prefetch_share"),
        ("config.edge_optimize_after_points", -1, "edge_optimize_after_points"),
        ("config.edge_optimize_check_seconds", 0, "edge_optimize_check_seconds"),
        ("config.public_url", "https://ncindex.example.org/hooks/nextcloud", "public_url"),
        ("config.public_url", "https://ncindex.example.org/?x=1", "public_url"),
        # misspelt: every pod ignored it; then refused "at ''" without naming config
        ("config.task_time_limt", 600, "/config': additional properties 'task_time_limt'"),
        ("config.model_dir", "/models", "model_dir"),  # the chart sets it: a duplicate key
        ("config.qdrant_path", "/data", "qdrant_path"),  # beside the chart's Qdrant server
        # values every pod refused at start (crash loop) while the chart took any value
        ("config.ui_session_seconds", -5, "ui_session_seconds"),
        ("config.index_mime_types", ["garbage"], "index_mime_types"),
        ("config.search_rate_limit", "0/minute", "search_rate_limit"),
        ("config.fusion", "max", "fusion"),
        ("config.embed_threads", 0, "embed_threads"),
        ("config.reconcile_periods", {"file": 5}, "reconcile_periods"),
        ("config.reconcile_disable", ["notes"], "reconcile_disable"),
        ("config.index_required_tags", [" "], "index_required_tags"),
        ("config.nextcloud_url", "cloud.example.org", "nextcloud_url"),
        ("config.nextcloud_url", "", "nextcloud_url"),  # unset: the chart has no simulator
        # KiB taken for MiB: every pool process would be replaced after each task
        ("config.worker_max_memory_per_child", 1200, "worker_max_memory_per_child"),
        ("workers.groups.light.maxMemoryPerChild", 1200, "maxMemoryPerChild"),
        ("workers.groups.light.maxMemoryPerChild", "300M", "maxMemoryPerChild"),
        ("ingress.enabled", True, "host"),  # no placeholder host to serve
    ],
)
def test_schema_rejects_bad_values(chart: helm.Chart, path: str, value: Any, message: str) -> None:
    values = with_change(MINIMAL, path, value)
    with pytest.raises(helm.HelmValuesError, match=message):
        chart.validate_schema(values)
    with pytest.raises(helm.HelmValuesError):
        chart.render(values, name="nci")


@pytest.mark.parametrize("name", sorted(REDIS_URL_CREDENTIALS))
def test_every_spelling_of_a_credential_redis_py_reads_is_refused(
    chart: helm.Chart, name: str
) -> None:
    """Each name redis-py's parse_url reads as a credential, every letter percent-encoded
    (upper- and lower-case hex), is refused, and is one url_without_password leaves out."""
    for hex_format in ("%{:02X}", "%{:02x}"):
        encoded = "".join(hex_format.format(ord(char)) for char in name)
        url = f"redis://redis.data:6379/0?db=0&{encoded}=hunter2"
        assert url_without_password(url) == "redis://redis.data:6379/0?db=0"
        with pytest.raises(helm.HelmValuesError, match="user or password"):
            chart.validate_schema(with_change(MINIMAL, "externalRedis.url", url))


@pytest.mark.parametrize(
    "url",
    [
        "redis://redis.data:6379/0?db=1&socket_timeout=5",
        "rediss://redis.data:6380/0",
        "redis://redis.data:6379/0?client_name=password",  # a value, not a name
    ],
)
def test_a_redis_url_without_credentials_is_taken(chart: helm.Chart, url: str) -> None:
    """Query parameters other than credentials pass the externalRedis.url check."""
    chart.validate_schema(with_change(MINIMAL, "externalRedis.url", url))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("externalRedis.url", "", "no Redis"),
        ("externalQdrant.url", "", "no Qdrant"),
        ("workers.terminationGracePeriodSeconds", 300, "must exceed config.task_time_limit"),
        # the file touched every 60 s is older than 30 s at most probes: pods restarted for ever
        ("workers.heartbeat", {"interval": 60, "maxAge": 30}, "must exceed workers.heartbeat"),
        # webhook events went to a queue no worker read: nothing was indexed, without a word
        ("workers.groups.light", None, "no group consumes the ingest queue"),
        ("workers.groups.light.queues", ["ingest", "evict"], "consumes the reconcile queue"),
        ("flower.basicAuth.users", [], "flower.basicAuth"),
        # the URL went to the ConfigMap and the Secret (with the password) was never read: every
        # pod connected without it, and every Redis command failed with NOAUTH
        ("externalRedis.existingSecret", "redis-creds", "externalRedis.url and externalRedis"),
        # rules across settings every pod checked at start: values breaking one rendered, and
        # each new pod of a helm upgrade stopped at start (beat, Recreate: none left running)
        ("config.task_soft_time_limit", 300, "task_soft_time_limit .300. must be below"),
        ("config.visibility_timeout", 300, "task_time_limit .300. must be below"),
        ("config.lock_ttl", 300, "lock_ttl .300. must exceed"),
        # the two other rules Settings checks across settings (ncindex/settings.py): missed
        # by the chart, so such values rendered and every new pod stopped at start
        ("config.extract_max_seconds", 240, "extract_max_seconds .240. must be below"),
        ("config.chunk_overlap_tokens", 200, "chunk_overlap_tokens .200. must be below"),
        # a pool process's peak stays under its container's limit: a bound at or above it
        # replaced none (the default 1,200,000 KiB on the 1 GiB light group)
        (
            "workers.groups.light.maxMemoryPerChild",
            1_048_576,
            r"workers.groups.light.maxMemoryPerChild .1048576 KiB. must be below",
        ),
        (
            "config.worker_max_memory_per_child",
            2_097_152,
            r"config.worker_max_memory_per_child .2097152 KiB. must be below workers.groups.index",
        ),
        # values.yaml suggests write consistency 2 "with replication 3"; the factor left unset
        ("config.qdrant_write_consistency_factor", 2, "qdrant_write_consistency_factor .2."),
    ],
)
def test_templates_refuse_incomplete_values(
    chart: helm.Chart, path: str, value: Any, message: str
) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(chart, with_change(MINIMAL, path, value))


def test_the_chart_checks_the_rules_across_settings_with_the_settings_defaults() -> None:
    """The defaults ``ncindex.settingsInOrder`` gives a setting absent from ``config`` are the
    settings' own, and each rule it checks is one Settings enforces."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    (block,) = re.findall(r'define "ncindex.settingsInOrder".*?end -}}\n\n', helpers, re.S)
    defaults = dict(re.findall(r'dig "(\w+)" (\d+) \$c', block))
    assert set(defaults) == {
        "task_soft_time_limit", "task_time_limit", "visibility_timeout", "lock_ttl",
        "qdrant_write_consistency_factor", "extract_max_seconds", "chunk_tokens",
        "chunk_overlap_tokens",
    }  # fmt: skip
    for name, default in defaults.items():
        assert Settings.model_fields[name].default == int(default), name
    base = {"webhook_secret": "x", "accounts": {"a": "b"}}
    for bad in (
        {"task_soft_time_limit": 300},
        {"visibility_timeout": 300},
        {"lock_ttl": 300},
        {"qdrant_write_consistency_factor": 2},
        {"extract_max_seconds": 240},
        {"chunk_overlap_tokens": 200},
    ):
        with pytest.raises(ValidationError, match="must"):
            Settings(**base, **bad)


@pytest.mark.parametrize(
    ("qdrant", "config"),
    [
        # the in-cluster cluster's replication factor defaults to 2: write consistency 2 fits
        ({"enabled": True}, {"qdrant_write_consistency_factor": 2}),
        # values.yaml's advice for a Qdrant cluster
        ({}, {"qdrant_replication_factor": 3, "qdrant_write_consistency_factor": 2}),
    ],
)
def test_a_write_consistency_within_the_replication_is_taken(
    chart: helm.Chart, qdrant: dict[str, Any], config: dict[str, Any]
) -> None:
    values = copy.deepcopy(MINIMAL)
    values["qdrant"] = qdrant
    values["config"] = {**NEXTCLOUD, **config}
    (configmap,) = by_kind(render(chart, values), "ConfigMap").values()
    assert configmap["data"]["NCINDEX_QDRANT_WRITE_CONSISTENCY_FACTOR"] == "2"


@pytest.mark.parametrize(
    "public_url",
    ["https://nci.example.org/ncindex", "https://NCI.example.org:443/ncindex/hooks/"],
)
def test_a_public_url_below_a_path_of_the_ingress_host_is_refused(
    chart: helm.Chart, public_url: str
) -> None:
    """The ingress routes /hooks at the root of its host: webhooks registered at
    https://nci.example.org/ncindex/hooks/nextcloud met no rule of it (404), and Nextcloud sends
    each delivery once (nextcloud/server apps/webhook_listeners/lib/BackgroundJobs/
    WebhookCall.php, ``WebhookCall::run``: a QueuedJob that logs a non-2xx answer and is done),
    so every change waited for the next scan."""
    values = copy.deepcopy(MINIMAL)
    values["ingress"] = {"enabled": True, "host": "nci.example.org"}
    values["config"] = {**NEXTCLOUD, "public_url": public_url}
    with pytest.raises(helm.HelmRenderError, match="would reach no receiver"):
        render(chart, values)
    # the root of the ingress host, or a path on another host (a proxy in front) are taken
    for taken in ("https://nci.example.org/", "https://lb.example.org/ncindex"):
        values["config"]["public_url"] = taken
        (configmap,) = by_kind(render(chart, values), "ConfigMap").values()
        assert configmap["data"]["NCINDEX_PUBLIC_URL"] == taken.rstrip("/")


@pytest.mark.parametrize(("pre_stop", "timeout"), [(5, 60), (30, 60), (60, 60), (60, 5), (1, 300)])
def test_a_gunicorn_pod_is_given_its_pause_and_its_graceful_timeout(
    chart: helm.Chart, pre_stop: int, timeout: int
) -> None:
    """Kubernetes counts terminationGracePeriodSeconds from the start of the preStop hook:
    the pod needs the pause, then gunicorn's graceful timeout (GUNICORN_TIMEOUT) for the
    requests in hand, before SIGKILL. The grace was gunicorn.timeout + 30 s whatever
    gunicorn.preStopSeconds said (the schema takes up to 60, e.g. for a cloud load balancer's
    deregistration delay): with 60 and 60, SIGKILL came 30 s into the graceful shutdown."""
    values = with_change(MINIMAL, "gunicorn", {"preStopSeconds": pre_stop, "timeout": timeout})
    deployments = by_kind(render(chart, values), "Deployment")
    for component in ("receiver", "search", "mcp"):
        pod = deployments[f"nci-ncindex-{component}"]["spec"]["template"]["spec"]
        assert container({"spec": {"template": {"spec": pod}}})["lifecycle"]["preStop"] == {
            "sleep": {"seconds": pre_stop}
        }
        # a margin for gunicorn's own exit after its graceful timeout
        assert pod["terminationGracePeriodSeconds"] >= pre_stop + timeout + 10, component
    if (pre_stop, timeout) == (5, 60):  # the defaults keep the grace they had
        assert pod["terminationGracePeriodSeconds"] == 90


def test_values_the_settings_refuse_are_refused_at_render(chart: helm.Chart) -> None:
    """The schema took any string, number, boolean, list or map for a setting: these rendered,
    and every pod then stopped at start on Settings' refusal (a crash loop)."""
    bad: dict[str, Any] = {
        "ui_session_seconds": -5,
        "index_mime_types": ["garbage"],
        "search_rate_limit": "0/minute",
    }
    for name, value in bad.items():
        with pytest.raises(ValidationError, match=name):
            Settings(**{name: value})
    with pytest.raises(helm.HelmValuesError) as refused:
        render(chart, {**MINIMAL, "config": NEXTCLOUD | bad})
    for name in bad:
        assert f"/config/{name}" in str(refused.value)


def test_the_nextcloud_url_is_required(chart: helm.Chart) -> None:
    """values.yaml named https://cloud.example.org: values without a Nextcloud URL rendered,
    and every pod talked to a placeholder."""
    assert "nextcloud_url" not in chart.values["config"]
    values = with_change(MINIMAL, "config", {"public_url": "https://nci.example.org"})
    with pytest.raises(helm.HelmValuesError, match="/config': missing property 'nextcloud_url'"):
        render(chart, values)


def notes(chart: helm.Chart, values: dict[str, Any]) -> str:
    """The text of NOTES.txt for ``values``."""
    rendered = chart.render(copy.deepcopy(values), name="nci", namespace="search")
    (text,) = [t for path, t in rendered.items() if path.endswith("NOTES.txt")]
    return text


def test_the_image_repository_is_required(chart: helm.Chart) -> None:
    """values.yaml named ``ncindex``, which nothing builds or publishes (``make image`` builds
    ``localhost/ncindex:latest``): values without an image rendered, and every pod failed to
    pull ``ncindex:0.1.0``."""
    assert "repository" not in chart.values["image"]
    values = copy.deepcopy(MINIMAL)
    del values["image"]
    with pytest.raises(helm.HelmValuesError, match="/image': missing property 'repository'"):
        render(chart, values)
    images = {container(d)["image"] for d in by_kind(render(chart, MINIMAL), "Deployment").values()}
    assert images == {"registry.example.org/ncindex:0.1.0"}
    images = {
        container(d)["image"] for d in by_kind(render(chart, EVERYTHING), "Deployment").values()
    }
    assert images == {f"registry.example.org/ncindex:{chart.metadata['appVersion']}"}


def test_the_public_url_follows_the_ingress_host(chart: helm.Chart) -> None:
    """NCINDEX_PUBLIC_URL and the notes named https://ncindex.example.org whatever
    ingress.host was: webhooks were registered at a host the ingress did not serve."""
    for tls, scheme in (
        ([{"secretName": "search-tls", "hosts": ["search.example.org"]}], "https"),
        ([{"secretName": "wild-tls", "hosts": ["*.example.org"]}], "https"),
        ([], "http"),
    ):
        values = with_change(EVERYTHING, "ingress.tls", tls)
        config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
        assert config["NCINDEX_PUBLIC_URL"] == f"{scheme}://search.example.org", tls
        # the same origin as the MCP server's, from the one helper
        assert json.loads(config["NCINDEX_MCP_ALLOWED_ORIGINS"]) == [config["NCINDEX_PUBLIC_URL"]]
        hooks = f"point Nextcloud at {scheme}://search.example.org/hooks/nextcloud\n"
        assert hooks in notes(chart, values)
    # set, it wins (with or without an ingress), its trailing slash dropped as Settings drop it
    for base in (EVERYTHING, MINIMAL):
        values = with_change(base, "config.public_url", "https://hooks.example.org/ncindex/")
        config = by_kind(render(chart, values), "ConfigMap")["nci-ncindex"]["data"]
        assert config["NCINDEX_PUBLIC_URL"] == "https://hooks.example.org/ncindex"
        assert "at https://hooks.example.org/ncindex/hooks/nextcloud\n" in notes(chart, values)
    # without an ingress there is nothing to derive it from
    values = with_change(MINIMAL, "config", {"nextcloud_url": "https://cloud.example.org"})
    with pytest.raises(
        helm.HelmRenderError, match=r"config\.public_url is required without ingress"
    ):
        render(chart, values)


def test_the_committed_schema_is_the_generated_one() -> None:
    """values.schema.json's ``config`` is generated from Settings (``make chart-schema``):
    a setting changed without it would be refused, or let through, by a stale schema."""
    committed = SCHEMA_FILE.read_text(encoding="utf-8")
    assert SCHEMA_FILE == CHART / "values.schema.json"
    assert committed == schema_text(committed)


#: Values of the settings whose JSON Schema restates a Python validator, good and bad.
AGREEMENT_SAMPLES: dict[str, list[Any]] = {
    "search_rate_limit": [
        "600/minute", "600/minute;20/second", "10 per hour", "1 per 2 seconds", "5/Minute",
        "100/DAYS", " 3/second , 4/minute ", "1/year|2/month", "7perminute", "1/second:;2/minute",
        "", "   ", "0/minute", "600/minute;0/second", "00/hour", "010/hour", "ten/minute",
        "10/fortnight", "10/minutess", "10", "/minute", "10/minute;", "10 minute", "10/-1 minute",
    ],
    "index_mime_types": [
        ["text/plain"], ["text/*"], ["*/*"], ["application/epub+zip"], ["image/svg+xml"],
        ["application/vnd.oasis.opendocument.text"], ["garbage"], ["text"], ["text/"],
        ["/plain"], ["text/plain; charset=utf-8"], ["text/pl ain"], ["-x/y"], ["text/plain", "x"],
    ],
    # not "": unset, which the settings take (the simulator) and the chart refuses
    "nextcloud_url": [
        "https://cloud.example.org", "http://10.0.0.5:8080/nextcloud", "HTTPS://cloud.example.org/",
        "https://[::1]:8443", "https://cloud.example.org/index.php?x=1", "cloud.example.org",
        "ftp://cloud.example.org", "https://", "https:///nextcloud", "https://:443",
        "https://admin:pw@cloud.example.org", "https://admin@cloud.example.org",
    ],
    "public_url": [
        "https://nci.example.org", "https://nci.example.org/", "http://10.0.0.7:8081/sub",
        "https://u:p@nci.example.org", "Http://nci.example.org", "https://nci.example.org/hooks",
        "https://nci.example.org/hooks/nextcloud", "https://nci.example.org/hooks/nextcloud//",
        "https://x.org/ncindex/hooks/nextcloud", "https://nci.example.org/?x=1",
        "https://nci.example.org/#top", "", "nci.example.org", "https://", "https://u@:80",
    ],
    "note_extensions": [["md"], [".md"], ["MD"], [" txt "], [".."], [""], ["."], [" "], [" . "]],
    "index_required_tags": [["Public"], ["two words"], [], [""], ["  "], ["ok", ""]],
    "index_excluded_tags": [["Private"], ["\t"]],
    "reconcile_periods": [{"file": 600}, {"note": 10}, {}, {"file": 9}, {"files": 600}],
    "reconcile_disable": [["news_item"], ["deck_card", "note"], [], ["news"], ["Note"]],
    # not "info": the variable takes any case, the chart the names as written (README)
    "log_level": [*LOG_LEVELS, "LOUD", ""],
    "namespace": ["ncindex", "prod-1", "Prod", "", "a" * 41],
    "webhook_secret_header": ["X-Ncindex-Secret", "X Secret", ""],
    "ocr_languages": ["eng", "eng+deu", "eng+", ""],
    "worker_max_memory_per_child": [0, 131072, 1200000, 131071, 1200, 1, -1, "1G", 1.5],
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "value"),
    [(name, value) for name, values in AGREEMENT_SAMPLES.items() for value in values],
)
def test_the_schema_and_the_settings_agree(chart: helm.Chart, name: str, value: Any) -> None:
    """What the chart's schema takes for a setting is what Settings takes (its validators run in
    Python; their JSON Schema restatements run in Helm's validator, Go regular expressions)."""
    try:
        Settings(**{name: value})
    except ValidationError as exc:
        assert {error["loc"][0] for error in exc.errors()} == {name}
        settings_take = False
    else:
        settings_take = True
    try:
        chart.validate_schema(with_change(MINIMAL, f"config.{name}", value))
    except helm.HelmValuesError as exc:
        assert f"/config/{name}" in str(exc)
        chart_takes = False
    else:
        chart_takes = True
    assert chart_takes == settings_take


def test_defaults_alone_are_refused_with_a_reason(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmValuesError, match="webhookSecret"):
        chart.render({}, name="nci")


#: Settings ``config`` may not set: the secrets (``secrets``, ``externalRedis``,
#: ``externalQdrant``), what the chart sets itself, and what only ``ncindex up`` reads.
NOT_IN_CONFIG = {
    "webhook_secret",
    "webhook_previous_secret",
    "accounts",
    "accounts_file",
    "qdrant_api_key",
    "redis_url",
    "qdrant_url",
    "model_dir",
    "qdrant_path",
    "data_dir",
    "host",
    "port",
    "shutdown_grace",
}


def test_config_takes_the_name_of_every_other_setting_and_nothing_else() -> None:
    """A key that names no setting became an ``NCINDEX_`` variable that every pod ignored
    (pydantic-settings ignores unknown variables), its setting left at its default."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    assert set(config["properties"]) == set(Settings.model_fields) - NOT_IN_CONFIG
    assert NOT_IN_CONFIG.issubset(Settings.model_fields)


def test_the_chart_leaves_the_log_level_unset_unless_given(chart: helm.Chart) -> None:
    """values.yaml set ``config.log_level: INFO``, so every pod had NCINDEX_LOG_LEVEL set and
    a one-shot command run in one (``kubectl exec … ncindex reconcile``, or ``webhooks
    register`` as the notes advise) logged at INFO — ``reconcile`` each report line again as
    a JSON line — where unset it logs warnings and errors only (allinone/cli.py
    ``_command_log_level``). The long-running roles log at INFO all the same: Celery's
    ``--loglevel`` and the settings' default."""
    objects = render(chart, MINIMAL)
    assert "NCINDEX_LOG_LEVEL" not in by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]
    assert Settings.model_fields["log_level"].default == "INFO"
    celery = [container(d)["args"] for d in by_kind(objects, "Deployment").values()]
    celery = [args for args in celery if args and args[0] == "celery" and "flower" not in args]
    assert celery and all("--loglevel=INFO" in args for args in celery)
    objects = render(chart, with_change(MINIMAL, "config.log_level", "DEBUG"))
    assert by_kind(objects, "ConfigMap")["nci-ncindex"]["data"]["NCINDEX_LOG_LEVEL"] == "DEBUG"
    celery = [container(d)["args"] for d in by_kind(objects, "Deployment").values()]
    celery = [args for args in celery if args and args[0] == "celery" and "flower" not in args]
    assert all("--loglevel=DEBUG" in args for args in celery)


def test_config_log_level_takes_every_level_the_settings_take() -> None:
    """The chart refused CRITICAL, which the settings and Celery's --loglevel take."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    levels = schema["properties"]["config"]["properties"]["log_level"]["enum"]
    assert tuple(levels) == LOG_LEVELS


def test_schema_is_json_and_documents_replication() -> None:
    json.loads((CHART / "values.schema.json").read_text())
    comments = (CHART / "values.yaml").read_text()
    for phrase in ("replication factor of at least 2", "write_consistency_factor", "shard_number"):
        assert phrase in comments
