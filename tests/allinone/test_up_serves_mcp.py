"""``ncindex up`` serves the MCP server at ``/mcp`` (and ``/mcp/``) of its one HTTP port
(relayed to uvicorn), driven by the official SDK's client: tools listed, a tool called as the
caller, credentials required.

It runs in a child process, like ``test_up_with_refused_classes``: ``allinone.embedded.start``
makes its Celery app the process's default and starts a worker and beat."""

from __future__ import annotations

from pathlib import Path

from support import UP_BESIDE_A_SIMULATOR, run_scenario

SCENARIO = (
    UP_BESIDE_A_SIMULATOR
    + r"""
import asyncio, base64
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

running = start(settings, load_sample=False)
auth = "Basic " + base64.b64encode(b"admin:admin-pw").decode()


async def main():
    async with (
        create_mcp_http_client(headers={"Authorization": auth}) as http,
        Client(streamable_http_client(running.url + "/mcp", http_client=http)) as client,
    ):
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        status = await client.call_tool("index_status", {})
    # an MCP client configured with a trailing slash, which the server alone redirects
    async with (
        create_mcp_http_client(headers={"Authorization": auth}) as http,
        Client(streamable_http_client(running.url + "/mcp/", http_client=http)) as client,
    ):
        assert sorted(t.name for t in (await client.list_tools()).tools) == tools
    return tools, status.structured_content


try:
    tools, status = asyncio.run(main())
    anonymous = httpx.post(
        running.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    out = {"tools": tools, "status": status, "anonymous": anonymous.status_code,
           "code": anonymous.json()["error"]["data"]["code"]}  # an MCP client's Accept
finally:
    running.close()
    server.close(close_simulator=True)
    redis_server.stop()
print("\nRESULT " + json.dumps(out), flush=True)
"""
)


def test_up_serves_the_mcp_server_at_mcp(tmp_path: Path) -> None:
    result = run_scenario(SCENARIO, tmp_path)
    assert result["tools"] == [
        "fetch",
        "index_status",
        "list_filters",
        "list_folders",
        "list_tags",
        "list_values",
        "search",
    ]
    status = result["status"]
    assert status["user"] == "admin"
    assert sum(t["indexed"] for t in status["doc_types"].values()) == 0
    assert (result["anonymous"], result["code"]) == (401, "unauthenticated")
