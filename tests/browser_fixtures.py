"""Playwright driving Debian Chromium, for the browser tests of the review site."""

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connections
from django.test import Client

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
SCREENSHOTS = Path(django_settings.BASE_DIR) / "artifacts" / "screenshots"


@pytest.fixture
def chromium(monkeypatch):
    """A headless Chromium; the ORM may run in this thread while Playwright's loop does."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (never `playwright install`).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
            connections.close_all()


def logged_in_page(browser, user, base_url: str, width: int = 1280):
    """A page whose session is `user`'s (the session cookie of a forced login)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base_url}])
    return context.new_page()


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
