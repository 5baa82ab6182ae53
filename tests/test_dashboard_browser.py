"""The dashboard in a real headless browser: Debian's chromium, driven by Selenium,
against `durability serve` on a loopback port.

The screenshot lands in `artifacts/dashboard-3.X.png` (one per Python version) at the
repository root (ignored by git) and its path is printed. Without chromium and its
driver the test skips, saying so; CI installs both.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from _served import call, served

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "_dashboard_worker.py"
SCREENSHOT = ROOT / "artifacts" / f"dashboard-{sys.version_info[0]}.{sys.version_info[1]}.png"
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 30
"""How long the browser may take to show a change (the page refreshes every 2 s)."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="needs Debian's chromium and chromium-driver "
        "(apt-get install chromium chromium-driver)",
    ),
]


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    """Headless chromium with its own driver: nothing is downloaded, nothing leaves loopback."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1500",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _panel(driver: webdriver.Chrome) -> str:
    return str(driver.find_element(By.ID, "panel").text)


def _wait(driver: webdriver.Chrome, check: Callable[[webdriver.Chrome], object]) -> None:
    """Retry `check` until it is truthy; the panel is replaced on every refresh, so an
    element found a moment ago may be gone (stale) and is looked up again."""
    WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)).until(check)


def _click(element: Any) -> bool:
    """Click `element`; true, so a wait that clicks is done once the click went through."""
    element.click()
    return True


def _until(driver: webdriver.Chrome, what: str, *texts: str) -> None:
    """Wait until the panel shows every one of `texts` (each a refresh at most apart)."""
    try:
        _wait(driver, lambda d: all(t in _panel(d) for t in texts))
    except Exception:
        pytest.fail(f"the page never showed {what}: {texts!r}\n--- panel ---\n{_panel(driver)}")


def test_dashboard_shows_the_work_and_refreshes_itself(
    tmp_path: Path, browser: webdriver.Chrome
) -> None:
    """The page shows each object by name with its pending and failed operations, named
    alarm, log lag and stored errors as text; it picks up a new object and a move of
    virtual time on its own, keeping an opened traceback open."""
    with served(WORKER, tmp_path / "data", "--virtual-time") as base:
        assert call("POST", f"{base}/acme/order/inv-1")[0] == 201
        assert call("POST", f"{base}/_durability/advance?ms=60000")[0] == 200
        browser.get(f"{base}/_durability")
        assert browser.title == f"durability · {tmp_path / 'data'}"
        _until(
            browser,
            "the first shop",
            "acme",
            "RuntimeError: card <b>declined</b> for inv-1",
            "ConnectionError: courier offline",
            "renew",
            "mailer",
        )
        assert browser.find_elements(By.CSS_SELECTOR, "#panel b") == []
        failed = "#summary .total.bad dd"
        _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, failed).text == "1")

        summary = "#failures details.traceback summary"
        _wait(browser, lambda d: _click(d.find_element(By.CSS_SELECTOR, summary)))
        opened = "#failures details.traceback[open]"
        _wait(
            browser,
            lambda d: (
                'raise RuntimeError(f"card <b>declined</b>'
                in d.find_element(By.CSS_SELECTOR, opened).text
            ),
        )

        assert call("POST", f"{base}/%3Ci%3Ebeta%3C%2Fi%3E/order/inv-2")[0] == 201
        _until(browser, "the new shop", "<i>beta</i>", "ship-inv-2")
        assert browser.find_elements(By.CSS_SELECTOR, "#panel i") == []
        _wait(
            browser,
            lambda d: (
                "Traceback (most recent call last)" in d.find_element(By.CSS_SELECTOR, opened).text
            ),
        )

        assert call("POST", f"{base}/_durability/advance?ms=7200000")[0] == 200
        _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, failed).text == "2")
        _wait(browser, lambda d: "updated" in d.find_element(By.ID, "status").text)
        SCREENSHOT.parent.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(SCREENSHOT))
        assert browser.get_log("browser") == []
    print(f"dashboard screenshot: {SCREENSHOT}")
