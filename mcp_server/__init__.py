"""The MCP server: ncindex's verified search as Model Context Protocol tools over Streamable
HTTP at ``/mcp`` (``uvicorn mcp_server.asgi:app``)."""

from mcp_server.app import create_app

__all__ = ["create_app"]
