"""Debian's headless Chromium driven by Selenium, for the web console's tests.

The browser and its driver are Debian's (``chromium``, ``chromium-driver``), named by
path, so Selenium never tries to download a browser or a driver of its own. The flags
keep Chromium from reaching out to the network at start (which fails on a closed network)
and from needing a GPU, a sandbox or a large /dev/shm.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
#: Where browser tests save their screenshots (git-ignored).
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
CHROMEDRIVER = "/usr/bin/chromedriver"

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def missing() -> str | None:
    """Why the browser cannot start here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing: apt-get install {package} (make test does it)"
    return None


def start(profile_dir: Path):  # type: ignore[no-untyped-def]
    """A new headless Chromium with an empty profile in ``profile_dir``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    return driver


def screenshot(driver, name: str) -> None:  # type: ignore[no-untyped-def]
    """Save what the browser shows as ``ARTIFACTS/<name>.png`` (a test artifact)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def click_and_wait_for_next_page(driver, element, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Click ``element`` and wait until the page it leads to has replaced this one and shows
    its ``<main>``.

    Selenium's ``staleness_of`` only expects StaleElementReferenceException, but chromedriver
    may answer a question about the old page's element while that page is being torn down
    with another error ("Node with given id does not belong to the document"); that also
    means the old page is gone.
    """
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    element.click()

    def replaced(_driver) -> bool:  # type: ignore[no-untyped-def]
        try:
            old.is_enabled()
        except WebDriverException:
            return True
        return False

    WebDriverWait(driver, timeout).until(replaced)
    WebDriverWait(driver, timeout).until(EC.presence_of_element_located((By.TAG_NAME, "main")))
