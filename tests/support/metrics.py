"""Reading a server's /metrics as the Prometheus text format it is."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(
    url: str, token: str | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample: (name, sorted labels) -> value."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{url}/metrics", headers=headers)
    response.raise_for_status()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def stage_counts(samples: Samples) -> dict[str, float]:
    """How many turns each reply stage was observed in."""
    return {
        dict(labels)["stage"]: value
        for (name, labels), value in samples.items()
        if name == "voice_agent_turn_stage_seconds_count"
    }
