"""What every session shares about tools: the operator's defaults, their connections
(made once, shared), which URLs a client may name, and the counts /metrics shows."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass

from app.config.tools import ToolsSettings
from app.tools.mcp_link import McpLink
from app.tools.specs import TOOL_LIST, McpSpec, ToolSet, UrlPolicy, tool_set

log = logging.getLogger(__name__)

# /metrics labels by server label: clients name theirs, so only this many are told apart.
MAX_LABELS = 32


@dataclass(slots=True)
class ServerStats:
    calls: int = 0
    failures: int = 0
    seconds: float = 0.0


class ToolServers:
    def __init__(self, settings: ToolsSettings) -> None:
        self.settings = settings
        self.policy = UrlPolicy(settings.mcp_allowed_urls)
        self.defaults: ToolSet = tool_set(
            TOOL_LIST.validate_python(settings.default), operator=True
        )
        self._shared: dict[tuple[object, ...], McpLink] = {}
        # Per server label: bounded by what the operator and the allowed URLs permit.
        self.stats: defaultdict[str, ServerStats] = defaultdict(ServerStats)

    def refused(self, spec: McpSpec) -> str | None:
        """Why a client may not use `spec`, or None."""
        if spec.operator:
            return None
        if not self.policy.allows(spec.url):
            return f"the MCP server {spec.url!r} is not one this server allows"
        return None

    def link(self, spec: McpSpec) -> McpLink:
        """A connection for `spec`: the operator's are shared (never closed by a
        session); a client's is its session's own."""
        if not spec.operator:
            return McpLink(spec)
        link = self._shared.get(spec.target)
        if link is None:
            link = self._shared[spec.target] = McpLink(spec)
        return link

    def counted(self, label: str, seconds: float, *, failed: bool) -> None:
        if label not in self.stats and len(self.stats) >= MAX_LABELS:
            label = "other"
        stats = self.stats[label]
        stats.calls += 1
        stats.failures += failed
        stats.seconds += seconds

    async def aclose(self) -> None:
        links, self._shared = list(self._shared.values()), {}
        await asyncio.gather(*(link.aclose() for link in links), return_exceptions=True)
