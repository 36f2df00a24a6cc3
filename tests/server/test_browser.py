"""The memory browser in a real headless Chromium (Debian's chromium + chromedriver, driven by Selenium).

Set BROWSER_SCREENSHOT=path.png to keep the screenshots of the live page; docs/server-browser.png and
docs/server-browser-entities.png are made so (the command is in docs/server.md, "The memory browser").
"""

from __future__ import annotations

import json
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

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from memoryscope_plugins.types import Memory, MemoryType  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys, seed, seed_ledger  # noqa: E402

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


def open_as_admin(browser, srv, admin_key: str) -> WebDriverWait:
    """The page, connected with `admin_key`, showing anna (tenant acme has two users)."""
    wait = WebDriverWait(browser, 15)
    browser.get(srv.url + "/")
    browser.find_element(By.ID, "key").send_keys(admin_key)
    browser.find_element(By.ID, "connect").click()
    wait.until(lambda d: len(Select(d.find_element(By.ID, "user")).options) == 2)
    Select(browser.find_element(By.ID, "user")).select_by_value("anna")
    return wait


def test_browse_search_edit_expire_delete(engine, browser, tmp_path):
    keys = make_keys()
    seed(engine)
    with RunningServer(engine, keys.ring) as srv:
        wait = open_as_admin(browser, srv, keys.admin)
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


def _prompt(driver, wait, text: str | None = None) -> None:
    """Answer the page's prompt() with `text` (or its confirm() with OK)."""
    wait.until(EC.alert_is_present())
    if text is not None:
        driver.switch_to.alert.send_keys(text)
    driver.switch_to.alert.accept()


def _entity_names(driver) -> list[str]:
    try:
        return texts(driver, "#entityList .entity .name")
    except StaleElementReferenceException:  # the list is being redrawn
        return []


def _text(driver, css: str) -> str:
    try:
        return " ".join(texts(driver, css))
    except StaleElementReferenceException:  # being redrawn
        return ""


def _settled(driver) -> bool:
    """The Entities view has finished every load it started (list, plot, profile, detail)."""
    return not driver.find_elements(By.CSS_SELECTOR, "#entitiesView.loading")


def test_entities_view_plot_detail_edits_and_profile_history(engine, browser, tmp_path):
    keys = make_keys()
    seed(engine)
    seed_ledger(engine)
    with RunningServer(engine, keys.ring) as srv:
        wait = open_as_admin(browser, srv, keys.admin)
        browser.find_element(By.ID, "viewEntities").click()
        assert not browser.find_element(By.ID, "timeline").is_displayed()
        wait.until(lambda d: len(_entity_names(d)) == 5)
        assert set(_entity_names(browser)) == {"Anna", "Lisbon", "surfing", "Porto", "Mia"}

        # the plot: one series per mentioned top entity (Mia has no mention), over May to August 2026
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#entityPlot svg g.series"))
        series = browser.find_elements(By.CSS_SELECTOR, "#entityPlot svg g.series")
        assert {g.get_attribute("data-entity") for g in series} == {"ent-anna", "ent-lisbon", "ent-surf", "ent-porto"}
        assert all(len(g.find_element(By.TAG_NAME, "polyline").get_attribute("points").split()) == 4 for g in series)
        lisbon = browser.find_element(By.CSS_SELECTOR, '#entityPlot g.series[data-entity="ent-lisbon"]')
        assert len(lisbon.find_elements(By.CSS_SELECTOR, "circle.point")) == 2  # June and August
        assert texts(browser, "#entityPlot text.month") == ["2026-05", "2026-06", "2026-07", "2026-08"]
        assert "Lisbon" in browser.find_element(By.CSS_SELECTOR, "#entityPlot .legend").text
        # surfing and Anna both have 1 mention in July and in August: neither line may hide the other
        drawn = {g.get_attribute("data-entity"): g.find_element(By.TAG_NAME, "polyline").get_attribute("points").split()
                 for g in series}
        assert all(not set(a) & set(b) for one, a in drawn.items() for other, b in drawn.items() if one < other), drawn

        Select(browser.find_element(By.ID, "entityKind")).select_by_value("place")
        wait.until(lambda d: sorted(_entity_names(d)) == ["Lisbon", "Porto"])
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#entityPlot g.series")) == 2)
        Select(browser.find_element(By.ID, "entityKind")).select_by_value("")
        Select(browser.find_element(By.ID, "entityOrder")).select_by_value("recency")
        wait.until(lambda d: _entity_names(d)[:1] == ["surfing"])
        wait.until(_settled)

        # the detail: its memories; then rename, alias, merge, delete
        browser.find_element(By.CSS_SELECTOR, '#entityList .entity[data-id="ent-lisbon"]').click()
        wait.until(lambda d: "Anna lives in Lisbon." in _text(d, "#entityDetail"))
        shown = browser.find_element(By.ID, "entityDetail").text
        assert "I moved to Lisbon last May." in shown
        shown_ids = {e.get_attribute("data-id") for e in browser.find_elements(By.CSS_SELECTOR, "#entityDetail .mem")}
        assert {"obs-new", "ins-1"} <= shown_ids and "obs-surf" not in shown_ids
        assert "2026-06 ×2" in shown and not browser.find_elements(By.CSS_SELECTOR, "#entityDetail .mem .actions")
        if os.environ.get("BROWSER_SCREENSHOT"):
            browser.save_screenshot(os.environ["BROWSER_SCREENSHOT"].replace(".png", "-entities.png"))
        assert browser.save_screenshot(str(tmp_path / "entities.png"))
        browser.find_element(By.CSS_SELECTOR, '#entityList .entity[data-id="ent-porto"]').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#entityDetail .detail[data-id="ent-porto"]'))
        browser.find_element(By.CSS_SELECTOR, "#entityDetail button.rename").click()
        _prompt(browser, wait, "Oporto")
        wait.until(lambda d: "Oporto" in _entity_names(d))
        wait.until(_settled)
        assert "also: Porto" in browser.find_element(By.ID, "entityDetail").text
        browser.find_element(By.CSS_SELECTOR, "#entityDetail button.alias").click()
        _prompt(browser, wait, "Invicta")
        wait.until(lambda d: "Invicta" in _text(d, "#entityDetail"))
        wait.until(_settled)
        browser.find_element(By.CSS_SELECTOR, '#entityList .entity[data-id="ent-lisbon"]').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#entityDetail .detail[data-id="ent-lisbon"]'))
        browser.find_element(By.CSS_SELECTOR, "#entityDetail button.merge").click()
        _prompt(browser, wait, "Invicta")
        wait.until(lambda d: "Oporto" not in _entity_names(d) and "Oporto" in _text(d, "#entityDetail"))
        wait.until(_settled)
        lisbon_now = {e.id: e for e in engine.store.entities("acme:anna")}["ent-lisbon"]
        assert {"Lisboa", "Oporto", "Porto", "Invicta"} <= set(lisbon_now.aliases) and lisbon_now.mention_count == 4
        browser.find_element(By.CSS_SELECTOR, '#entityList .entity[data-id="ent-mia"]').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#entityDetail .detail[data-id="ent-mia"]'))
        browser.find_element(By.CSS_SELECTOR, "#entityDetail button.delete").click()
        _prompt(browser, wait)
        wait.until(lambda d: "Mia" not in _entity_names(d) and len(_entity_names(d)) == 3)
        wait.until(_settled)
        assert {e.name for e in engine.store.entities("acme:anna")} == {"Anna", "Lisbon", "surfing"}
        assert engine.count("acme:anna") == 6  # the memories stay

        # the profile: a key's history, a value set by hand, one removed
        home = browser.find_element(By.CSS_SELECTOR, '#profile .pkey[data-key="home"]')
        assert "Lisbon" in home.text and "Porto" not in home.text
        home.find_element(By.CSS_SELECTOR, "button.history-toggle").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#profile .pkey[data-key="home"] .history .pval.ended'))
        history = browser.find_element(By.CSS_SELECTOR, '#profile .pkey[data-key="home"] .history')
        assert texts(browser, '#profile .pkey[data-key="home"] .history .pval .v') == ["Porto", "Lisbon"]
        assert "2025-01-01 → 2026-05-20" in history.text
        browser.find_element(By.ID, "profileKey").send_keys("home")
        browser.find_element(By.ID, "profileValue").send_keys("Sintra")
        browser.find_element(By.CSS_SELECTOR, "#profileForm button").click()
        wait.until(lambda d: "Sintra" in _text(d, '#profile .pkey[data-key="home"]'))
        assert [(v.value, v.set_by) for v in engine.profile("acme:anna")["home"]] == [("Sintra", "user")]
        browser.find_element(By.CSS_SELECTOR, '#profile .pkey[data-key="home"] button.history-toggle').click()
        wait.until(lambda d: _text(d, '#profile .pkey[data-key="home"] .history .pval .v') == "Porto Lisbon Sintra")
        assert len(browser.find_elements(By.CSS_SELECTOR, '#profile .pkey[data-key="home"] .history .pval.ended')) == 2
        browser.find_element(By.CSS_SELECTOR, '#profile .pval[data-id="pv-likes-surf"] button.remove').click()
        _prompt(browser, wait)
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, '#profile .pkey[data-key="likes"]'))
        assert "likes" not in engine.profile("acme:anna")

        browser.find_element(By.ID, "viewMemories").click()
        wait.until(lambda d: d.find_element(By.ID, "timeline").is_displayed())


# -- an agent's procedures and tools (issue 43, item 5) ---------------------------------------------------

def _seed_agent(engine) -> list[str]:
    """acme's anna ran the concierge agent (tool calls: one failed); the agent has a procedure of acme's
    resting on her words, a tool call and another user's message, and one of globex's."""
    from memoryscope_plugins.procedures.scope import procedure_scope
    from tests.procedures.test_procedures import booking_run

    ids = engine.record("acme:anna", booking_run("acme:anna"), agent_id="concierge")
    data = {"when": "booking a table for a given day", "do": "call book_table with day as an ISO date",
            "why": "", "tools": ["book_table"], "runs": 2, "uses": 3, "successes": 2, "failures": 1, "weight": 1.5,
            "language": "en"}
    acme = Memory(id="proc-1", user_id=procedure_scope("acme:anna", "concierge"), agent_id="concierge",
                  content="When booking a table for a given day: call book_table with day as an ISO date",
                  type=MemoryType.PROCEDURE, source_ids=[ids[0], ids[2], "msg-of-another-user"], metadata=data)
    globex = Memory(id="proc-globex", user_id=procedure_scope("globex:anna", "concierge"), agent_id="concierge",
                    content="When globex books: call book_table at once", type=MemoryType.PROCEDURE,
                    source_ids=[], metadata=data)
    engine.store.put([acme, globex], None)
    return ids


def test_agents_view_shows_procedures_with_sources_and_failing_tools(engine, browser):
    keys = make_keys()
    seed(engine)
    _seed_agent(engine)
    with RunningServer(engine, keys.ring) as srv:
        wait = open_as_admin(browser, srv, keys.admin)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline .mem"))
        browser.find_element(By.ID, "viewAgents").click()
        assert not browser.find_element(By.ID, "timeline").is_displayed()
        browser.find_element(By.ID, "agentId").clear()
        browser.find_element(By.ID, "agentId").send_keys("concierge")
        browser.find_element(By.CSS_SELECTOR, "#agentForm button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#procedures .mem.procedure[data-id="proc-1"]'))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#tools .mem.tool'))
        procedure = browser.find_element(By.CSS_SELECTOR, '#procedures .mem.procedure[data-id="proc-1"]')
        assert "call book_table with day as an ISO date" in procedure.text
        assert texts(browser, '#procedures .badge.tool') == ["book_table"] and "runs 2" in procedure.text
        # its sources: anna's words as text; the tool call and another user's message only counted
        assert texts(browser, "#procedures .source") == ["↳ Book me a table at Rosa's for Friday"]
        assert "sources: 3 messages (2 not of this user, or tool calls)" in procedure.text
        assert "globex" not in browser.find_element(By.ID, "agentsView").text
        failing = browser.find_element(By.CSS_SELECTOR, '#tools .mem.tool.failing[data-tool="book_table"]')
        assert "2 calls, 1 failed" in failing.text and "Invalid date" in failing.text
        fine = browser.find_element(By.CSS_SELECTOR, '#tools .mem.tool[data-tool="find_restaurant"]')
        assert "1 calls, 0 failed" in fine.text and "failing" not in fine.get_attribute("class")

        # an edit that names a tool the procedure does not hold is refused; a fair one is kept
        procedure.find_element(By.CSS_SELECTOR, "button.edit").click()
        _prompt(browser, wait, "call reserve_seat first")
        wait.until(lambda d: "names a tool" in d.find_element(By.ID, "status").text)
        browser.find_element(By.CSS_SELECTOR, '#procedures .mem[data-id="proc-1"] button.edit').click()
        _prompt(browser, wait, "call book_table with the day as YYYY-MM-DD")
        wait.until(lambda d: "YYYY-MM-DD" in _text(d, '#procedures .mem[data-id="proc-1"] .text'))
        [edited] = engine.procedures("concierge", team="acme")
        assert edited.metadata["do"] == "call book_table with the day as YYYY-MM-DD" and edited.metadata["runs"] == 2
        browser.find_element(By.CSS_SELECTOR, '#procedures .mem[data-id="proc-1"] button.delete').click()
        _prompt(browser, wait)
        wait.until(lambda d: "no procedures" in _text(d, "#procedures .meta"))
        assert engine.procedures("concierge", team="acme") == []
        assert [p.id for p in engine.procedures("concierge", team="globex")] == ["proc-globex"]

        # a key bound to anna sees her tools but manages none of the tenant's agents' procedures
        browser.find_element(By.ID, "key").send_keys(keys.anna_only)
        browser.find_element(By.ID, "connect").click()
        wait.until(lambda d: "connected: 1 users" in d.find_element(By.ID, "status").text)
        Select(browser.find_element(By.ID, "user")).select_by_value("anna")
        wait.until(lambda d: "403" in _text(d, "#procedures .meta"))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#tools .mem.tool[data-tool="book_table"]'))


# -- hostile ids and text (issue 20, item 2), against a real `serve` process --------------------------

VIEWED = "an na?#%;é"  # legal under the identifier rule, hostile to anyone who builds URLs by hand
HOSTILE_IDS = ["%2e%2e", "%2e%2e%2f%2e%2e%2fbob", "q?x=1", "h#frag", "semi;colon", "space inside", "ünï-code",
               "..%2fbob", "__proto__"]
HOSTILE_TEXT = ['<script>document.title="pwned"</script>', '"quoted" \'single\' </textarea><b>bold</b>',
                '<img src=x onerror="document.title=\'pwned\'">']
BOB = {"bob-1": "Bob lives in Oslo.", "bob-2": "Bob plays chess.", "bob-3": "Bob has a cat."}


def _request_paths(driver) -> list[tuple[str, str]]:
    """(method, path as sent) of every request the page made, from Chromium's network log."""
    from urllib.parse import urlsplit
    out = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            request = message["params"]["request"]
            out.append((request["method"], urlsplit(request["url"]).path))
    return out


def test_hostile_ids_and_text_never_send_a_request_outside_the_viewed_user(tmp_path, local_embedder):
    from urllib.parse import unquote

    import httpx

    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.errors import ValidationError
    from tests.support.serve_context import serving

    store = tmp_path / "memory.db"  # where serving(tmp_path, ...) keeps its store
    viewed, bob = f"acme:{VIEWED}", "acme:bob"
    with MemoryScope(path=store, embedder=local_embedder) as engine:
        for i, memory_id in enumerate(HOSTILE_IDS):
            engine.add(viewed, HOSTILE_TEXT[i % len(HOSTILE_TEXT)] + f" #{i}", memory_id=memory_id)
        for memory_id, content in BOB.items():
            engine.add(bob, content, memory_id=memory_id)
        for attack in ["../../bob", "../../bob/memories/bob-1", "a/b", "..", "x\r\ny"]:  # refused at the engine
            with pytest.raises(ValidationError):
                engine.add(viewed, "attack", memory_id=attack)

    keys = make_keys()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    with serving(tmp_path, keys.ring) as srv:
        # the old attack ids are refused at import, over HTTP too
        for attack in ["../../bob", "../../bob/memories/bob-1", "a/b"]:
            line = json.dumps({"id": attack, "content": "attack"}) + "\n"
            answer = httpx.post(srv.url + "/v1/users/anna/import", content=line,
                                headers={"Authorization": f"Bearer {keys.admin}"})
            assert answer.status_code == 400
        page = httpx.get(srv.url + "/")
        policy = dict(part.strip().split(" ", 1) for part in page.headers["content-security-policy"].split(";"))
        assert policy["script-src"] == "'self'" and "unsafe-inline" not in policy["script-src"]
        assert policy["base-uri"] == "'none'" and policy["form-action"] == "'self'"
        assert policy["frame-ancestors"] == "'none'" and "<script>" not in page.text.replace(
            '<script src="/static/browser.js"></script>', "")

        driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
        try:
            wait = WebDriverWait(driver, 20)
            driver.get(srv.url + "/")
            driver.find_element(By.ID, "key").send_keys(keys.admin)
            driver.find_element(By.ID, "connect").click()
            wait.until(lambda d: len(Select(d.find_element(By.ID, "user")).options) == 3)
            Select(driver.find_element(By.ID, "user")).select_by_value(VIEWED)
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline .mem")) == len(HOSTILE_IDS))

            def box(memory_id):
                found = [e for e in driver.find_elements(By.CSS_SELECTOR, "#timeline .mem")
                         if e.get_attribute("data-id") == memory_id]
                assert len(found) == 1, memory_id
                return found[0]

            def expired(memory_id):
                try:
                    return "expired" in box(memory_id).get_attribute("class")
                except (AssertionError, StaleElementReferenceException):  # the timeline is being redrawn
                    return False

            timeline = driver.find_element(By.ID, "timeline").text
            for text in HOSTILE_TEXT:  # shown as text, never run
                assert text in timeline
            assert not driver.find_elements(By.CSS_SELECTOR, "#timeline b, #timeline img, #timeline script")

            left = list(HOSTILE_IDS)
            for n, memory_id in enumerate(HOSTILE_IDS):
                if n % 3 == 0:  # edit (prompt)
                    box(memory_id).find_element(By.CSS_SELECTOR, "button.edit").click()
                    wait.until(EC.alert_is_present())
                    driver.switch_to.alert.send_keys(f"edited {n}")
                    driver.switch_to.alert.accept()
                    wait.until(lambda d, n=n: f"edited {n}" in d.find_element(By.ID, "timeline").text)
                elif n % 3 == 1:  # expire
                    box(memory_id).find_element(By.CSS_SELECTOR, "button.expire").click()
                    wait.until(lambda d, memory_id=memory_id: expired(memory_id))
                else:  # delete (confirm)
                    box(memory_id).find_element(By.CSS_SELECTOR, "button.delete").click()
                    wait.until(EC.alert_is_present())
                    driver.switch_to.alert.accept()
                    left.remove(memory_id)
                    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline .mem")) == len(left))
            driver.find_element(By.ID, "query").send_keys("Bob Oslo chess cat")
            driver.find_element(By.CSS_SELECTOR, "#searchForm button").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .mem, #results .meta"))
            assert driver.title != "pwned"
            sent = _request_paths(driver)
        finally:
            driver.quit()

    api = [(method, path) for method, path in sent if path.startswith("/v1/")]
    assert any(method == "DELETE" for method, _ in api) and any(method == "PATCH" for method, _ in api)
    for method, path in api:
        if path == "/v1/users":
            continue
        parts = path.split("/")  # ['', 'v1', 'users', <user>, ...]: every part one encoded segment
        assert unquote(parts[3]) == VIEWED, (method, path)
        if len(parts) > 5:
            assert parts[4] == "memories" and unquote(parts[5]) in HOSTILE_IDS and len(parts) == 6, (method, path)
    with MemoryScope(path=store, embedder=local_embedder) as engine:
        assert {m.id: m.content for m in engine.list(bob)} == BOB  # bob untouched
        assert all(m.status.value == "active" for m in engine.list(bob))
        mine = {m.id: m for m in engine.list(viewed)}
        assert set(mine) == set(left)
        assert mine[HOSTILE_IDS[0]].content == "edited 0" and mine[HOSTILE_IDS[1]].status.value == "expired"
