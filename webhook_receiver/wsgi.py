"""WSGI entry: ``gunicorn webhook_receiver.wsgi:app``."""

from ncindex.settings import load_settings
from ncindex.telemetry import configure_logging
from webhook_receiver.app import create_app

_settings = load_settings()
configure_logging(_settings.log_level, json_lines=_settings.log_json)
app = create_app(_settings)
