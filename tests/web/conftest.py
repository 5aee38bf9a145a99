"""The web screens in a real headless browser: Debian's Chromium driven by Playwright, the
auth-on app served over real HTTP on 127.0.0.1 (werkzeug in a thread) with a real Celery
worker, so jobs run. Skipped with a clear message when no browser can be found.

Data: bank ``web-a`` with two documents retained synchronously by the bootstrap admin, one
unit whose audience is member ``carol`` only, one ``<script>`` memory and two
near-duplicates (a dedup proposal); member ``bob`` reads ``web-a``; bank ``web-b`` he
holds no grant on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.access.conftest import ADMIN, auth_services, auth_settings, make_member  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BANK, OTHER = "web-a", "web-b"
SCRIPT_TEXT = '<script>window.__pwned = 1</script> a memory that tries to run a script'


def _chromium() -> str | None:
    """/usr/bin/chromium; installed with apt when missing and running as root."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=False, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], env=env, check=False,
                       timeout=1200)
    return CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("web tests need the 'playwright' Python package (pip install playwright)")
    path = _chromium()
    if not path:
        pytest.skip("web tests need Chromium at /usr/bin/chromium (apt-get install chromium); "
                    "none found and it could not be installed")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def web_app(auth_services, auth_settings, worker):  # noqa: F811  (fixtures imported above)
    from api.app import celery_enqueuer, create_app

    return create_app(services=auth_services, enqueue=celery_enqueuer(auth_settings))


@pytest.fixture(scope="session")
def base_url(web_app):
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, web_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="web-test-server", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


@pytest.fixture(scope="session")
def data(web_app):
    """The banks, members and units of the module doc; ``{"bob", "carol", "ids": {...}}``."""
    api = web_app.test_client()
    items = [{"content": "The deploy pipeline needs the staging database migrated before "
                         "the release tag is pushed.", "document_id": "runbook"},
             {"content": "Maya prefers the blue dashboard theme for the operations room.",
              "document_id": "notes"},
             {"content": SCRIPT_TEXT, "document_id": "hostile"},
             {"content": "Rotate the Redis password every ninety days on the cache hosts.",
              "document_id": "dup-1"},
             {"content": "Rotate the Redis password every ninety days on all cache hosts.",
              "document_id": "dup-2"}]
    r = api.post(f"/v1/default/banks/{BANK}/memories", json={"items": items, "async": False},
                 headers=ADMIN)
    assert r.get_json()["state"] == "succeeded", r.get_json()
    r = api.post(f"/v1/default/banks/{OTHER}/memories", json={
        "items": [{"content": "Bank B holds the payroll cutoff date.", "document_id": "b1"}],
        "async": False}, headers=ADMIN)
    assert r.status_code == 200, r.get_json()
    # member ids of this run only: the suite shares one database (tests/access makes a 'bob')
    bob_id, carol_id = f"bob-{uuid.uuid4().hex[:6]}", f"carol-{uuid.uuid4().hex[:6]}"
    bob = make_member(api, bob_id, BANK, "read")
    carol = make_member(api, carol_id, BANK, "write")
    r = api.post(f"/banks/{BANK}/units", json={
        "text": "Carol's private note: the vault combination is under the plant.",
        "audience": carol_id}, headers={"Authorization": f"Bearer {carol}"})
    assert r.status_code == 201, r.get_json()
    secret_id = r.get_json()["id"]
    r = api.post(f"/v1/default/banks/{BANK}/dedup-proposals/scan", headers=ADMIN)
    assert r.status_code == 200, r.get_json()
    svc = web_app.extensions["rcll"]
    units, _ = svc.documents.list_memories(svc.access.bootstrap_admin(), BANK, 50, 0)
    ids = {}
    for u in units:
        for key, probe in (("deploy", "deploy pipeline"), ("script", "<script>"),
                           ("maya", "Maya prefers")):
            if probe in u["text"]:
                ids[key] = u["id"]
    return {"bob": bob, "carol": carol, "bob_id": bob_id, "carol_id": carol_id,
            "secret": secret_id, "ids": ids,
            "secret_text": "combination is under the plant"}


@pytest.fixture()
def page(browser, base_url):
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    context.close()


def sign_in(page, key: str, then: str = "/ui") -> None:
    page.goto(then)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def shot(page, name: str) -> None:
    """Save the screen for the README (docs/screenshots/<name>.png)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
