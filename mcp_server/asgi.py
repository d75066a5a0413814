"""ASGI entry: ``uvicorn mcp_server.asgi:app`` (or gunicorn with a uvicorn worker)."""

from mcp_server.app import create_app
from ncindex.settings import load_settings
from ncindex.telemetry import configure_logging

_settings = load_settings()
configure_logging(_settings.log_level, json_lines=_settings.log_json)
app = create_app(_settings)
