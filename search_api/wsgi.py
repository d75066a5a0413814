"""WSGI entry: ``gunicorn search_api.wsgi:app``."""

from ncindex.settings import load_settings
from ncindex.telemetry import configure_logging
from search_api.app import create_app

_settings = load_settings()
configure_logging(_settings.log_level, json_lines=_settings.log_json)
app = create_app(_settings)
