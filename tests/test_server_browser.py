"""The memory browser in a real headless Chromium (Debian's chromium + chromedriver, driven by Selenium).

Set BROWSER_SCREENSHOT=path.png to keep the screenshot (docs/server-browser.png is made this way).
"""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra has it)")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="no Chromium/chromedriver here (apt-get install chromium chromium-driver; "
                                       ".ci/servers.sh does it in CI)")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from server_harness import RunningServer, make_keys, seed  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,860"]


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def texts(driver, css):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def test_browse_search_edit_expire_delete(engine, browser, tmp_path):
    keys = make_keys()
    seed(engine)
    with RunningServer(engine, keys.ring) as srv:
        wait = WebDriverWait(browser, 15)
        browser.get(srv.url + "/")
        browser.find_element(By.ID, "key").send_keys(keys.admin)
        browser.find_element(By.ID, "connect").click()
        wait.until(lambda d: len(Select(d.find_element(By.ID, "user")).options) == 2)
        Select(browser.find_element(By.ID, "user")).select_by_value("anna")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline .mem")) == 6)

        timeline = browser.find_element(By.ID, "timeline").text
        assert "I moved to Lisbon last May." in timeline and "How do you like Lisbon?" in timeline
        expired = browser.find_element(By.CSS_SELECTOR, '#timeline .mem.expired[data-id="obs-old"]')
        assert "replaced by: Anna lives in Lisbon." in expired.text
        insight = browser.find_element(By.CSS_SELECTOR, '#timeline .mem.insight[data-id="ins-1"]')
        assert "Anna lives in Lisbon." in insight.text and "Anna surfs on weekends." in insight.text

        browser.find_element(By.ID, "query").send_keys("where does Anna live?")
        browser.find_element(By.CSS_SELECTOR, "#searchForm button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .mem"))
        assert all(s.startswith("score ") for s in texts(browser, "#results .score"))
        assert "Lisbon" in browser.find_element(By.CSS_SELECTOR, "#results .mem .text").text
        if os.environ.get("BROWSER_SCREENSHOT"):
            browser.save_screenshot(os.environ["BROWSER_SCREENSHOT"])
        assert browser.save_screenshot(str(tmp_path / "browser.png"))

        # edit (the page asks with prompt())
        browser.find_element(By.CSS_SELECTOR, '#timeline .mem[data-id="obs-surf"] button.edit').click()
        wait.until(EC.alert_is_present())
        alert = browser.switch_to.alert
        alert.send_keys("Anna surfs every Sunday.")
        alert.accept()
        wait.until(lambda d: "Anna surfs every Sunday." in d.find_element(By.ID, "timeline").text)
        assert engine.get("acme:anna", "obs-surf").content == "Anna surfs every Sunday."

        # expire
        browser.find_element(By.CSS_SELECTOR, '#timeline .mem[data-id="obs-new"] button.expire').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#timeline .mem.expired[data-id="obs-new"]'))
        assert engine.get("acme:anna", "obs-new").status.value == "expired"

        # delete (confirm())
        browser.find_element(By.CSS_SELECTOR, '#timeline .mem[data-id="obs-old"] button.delete').click()
        wait.until(EC.alert_is_present())
        browser.switch_to.alert.accept()
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, '#timeline .mem[data-id="obs-old"]'))
        assert "obs-old" not in {m.id for m in engine.list("acme:anna")}

        # a wrong key is told so, and sees nothing
        browser.find_element(By.ID, "key").send_keys("msk_wrong")
        browser.find_element(By.ID, "connect").click()
        wait.until(lambda d: "401" in d.find_element(By.ID, "status").text)
