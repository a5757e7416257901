"""Page queries are not logged in clear (issue 39, point 5): a search for an erased text must not
outlive the erasure in a log. The development server's request lines lose their query strings;
gunicorn logs the path alone; nginx's access log format carries `$uri` (no query string)."""

from __future__ import annotations

import logging
from pathlib import Path

from config import gunicorn_conf
from config.logs import RedactQueryStrings, without_query

ROOT = Path(__file__).resolve().parent.parent


def test_a_request_line_loses_its_query_string():
    assert (
        without_query('"GET /memory/acme/?q=vault+code HTTP/1.1" 200 512') == '"GET /memory/acme/?… HTTP/1.1" 200 512'
    )
    assert without_query('"POST /api/v1/search/ HTTP/1.1" 200 80') == '"POST /api/v1/search/ HTTP/1.1" 200 80'


def test_the_development_servers_log_goes_through_the_filter(caplog):
    handler = logging.getLogger("django.server").handlers[0]
    assert any(isinstance(f, RedactQueryStrings) for f in handler.filters)
    record = logging.LogRecord(
        "django.server",
        logging.INFO,
        __file__,
        1,
        '"%s" %s %s',
        ("GET /memory/acme/?q=Quillfeather HTTP/1.1", "200", "9"),
        None,
    )
    assert handler.filters[0].filter(record)
    assert "Quillfeather" not in record.getMessage() and "/memory/acme/?…" in record.getMessage()


def test_gunicorn_and_nginx_log_paths_without_queries():
    assert "%(U)s" in gunicorn_conf.access_log_format
    assert "%(r)s" not in gunicorn_conf.access_log_format and "%(q)s" not in gunicorn_conf.access_log_format
    nginx = (ROOT / "config" / "nginx.conf.template").read_text()
    assert "$request_uri" not in nginx and "$args" not in nginx and "$query_string" not in nginx and '"$uri"' in nginx
