"""The monitoring profile agrees with the app, checked without Docker: Prometheus scrapes the
route and port the agent serves, Grafana's dashboard asks only for metrics the app exports,
from the data source provisioned beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.main import create_app
from tests.test_compose import COMPOSE

REPO = Path(__file__).resolve().parents[1]
MONITORING = REPO / "deploy" / "monitoring"
DASHBOARD = json.loads((MONITORING / "grafana/dashboards/voice-agent.json").read_text())
# What a family's samples are called beyond its own name.
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_info", "_created")


def exported_names() -> set[str]:
    """Metric family names /metrics serves, before any call (and any engine) exists."""
    answer = TestClient(create_app(Settings(_env_file=None)), base_url="http://localhost").get(
        "/metrics"
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    return {base_name(family.name) for family in text_string_to_metric_families(answer.text)}


def expressions(panels: list[dict[str, Any]]) -> list[str]:
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def base_name(sample: str) -> str:
    for suffix in SUFFIXES:
        if sample.endswith(suffix):
            return sample[: -len(suffix)]
    return sample


def test_prometheus_scrapes_the_agents_metrics_route_on_its_port() -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    (target,) = job["static_configs"][0]["targets"]
    assert target == f"127.0.0.1:{Settings(_env_file=None).server.port}"
    assert job["metrics_path"] == "/metrics"
    assert exported_names(), "the route answers with metrics"


def test_every_dashboard_query_names_a_metric_the_app_exports() -> None:
    exported = exported_names()
    used = {
        base_name(name)
        for expr in expressions(DASHBOARD["panels"])
        for name in re.findall(r"voice_agent_[a-z_]+", expr)
    }
    assert len(used) >= 8
    assert used - exported == set(), "the dashboard asks for metrics nobody exports"


def test_grafana_finds_the_data_source_and_the_dashboard_it_is_given() -> None:
    (source,) = yaml.safe_load(
        (MONITORING / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"]
    listen = next(
        arg for arg in COMPOSE["cpu"]["services"]["prometheus"]["command"]
        if arg.startswith("--web.listen-address=")
    )  # fmt: skip
    assert source["url"] == "http://" + listen.split("=", 1)[1]
    uids = {panel["datasource"]["uid"] for panel in DASHBOARD["panels"]}
    assert uids == {source["uid"]}
    (provider,) = yaml.safe_load(
        (MONITORING / "grafana/provisioning/dashboards/voice-agent.yml").read_text()
    )["providers"]
    mounts = dict(
        volume.rsplit(":", 2)[:2] if volume.endswith(":ro") else volume.split(":", 1)
        for volume in COMPOSE["cpu"]["services"]["grafana"]["volumes"]
    )
    dashboards = next(
        host for host, inside in mounts.items() if inside == provider["options"]["path"]
    )
    assert (REPO / dashboards / "voice-agent.json").is_file()


def test_the_monitoring_services_only_start_with_their_profile() -> None:
    for config in COMPOSE.values():
        services = config["services"]
        for name in ("prometheus", "grafana"):
            assert services[name]["profiles"] == ["monitoring"], name
        for volume in services["prometheus"]["volumes"]:
            host = volume.split(":", 1)[0]
            assert not host.startswith("./") or (REPO / host).exists(), volume
