"""The entity ledger and profile routes on a real server: reading, every edit, names that need encoding,
bad input and unknown names. (The auth and tenant matrix over these routes is in test_api.py.)"""

from __future__ import annotations

import shlex
from urllib.parse import quote

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from memoryscope_plugins.server import ServerConfig  # noqa: E402
from memoryscope_plugins.types import EntityKind  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys, seed, seed_ledger  # noqa: E402

ANNA = "/v1/users/anna"


@pytest.fixture
def keys():
    return make_keys()


@pytest.fixture
def http(engine, keys):
    seed(engine)
    seed_ledger(engine)
    with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.acme}"}, timeout=30) as client:
            yield client


def names(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [e["name"] for e in response.json()["entities"]]


def test_entities_are_listed_by_order_and_kind(http):
    listed = http.get(f"{ANNA}/entities").json()["entities"]
    assert {e["name"] for e in listed} == {"Anna", "Lisbon", "surfing", "Porto", "Mia"}
    lisbon = next(e for e in listed if e["name"] == "Lisbon")
    assert lisbon["user_id"] == "anna" and lisbon["kind"] == "place" and lisbon["aliases"] == ["Lisboa"]
    assert lisbon["mention_count"] == 3 and lisbon["first_mentioned_at"].startswith("2026-06-01")
    assert listed[-1]["name"] == "Mia"  # never mentioned: last whatever the order
    assert names(http.get(f"{ANNA}/entities", params={"order": "frequency", "limit": 2})) == ["Anna", "Lisbon"]
    assert names(http.get(f"{ANNA}/entities", params={"order": "recency"}))[0] == "surfing"
    assert sorted(names(http.get(f"{ANNA}/entities", params={"kind": "place"}))) == ["Lisbon", "Porto"]
    assert names(http.get(f"{ANNA}/entities", params={"kind": "pet"})) == ["Mia"]


def test_an_entity_by_name_alias_or_id_with_its_timeline_and_memories(http):
    details = http.get(f"{ANNA}/entities/Lisboa").json()
    assert details["entity"]["id"] == "ent-lisbon"
    assert [(p["start"][:7], p["mentions"]) for p in details["timeline"]] == [("2026-06", 2), ("2026-08", 1)]
    contents = [m["content"] for m in details["memories"]]
    assert "Anna lives in Lisbon." in contents and "I moved to Lisbon last May." in contents
    assert "Anna surfs on weekends." not in contents
    assert all(m["user_id"] == "anna" for m in details["memories"])
    assert http.get(f"{ANNA}/entities/ent-lisbon").json()["entity"]["name"] == "Lisbon"
    assert http.get(f"{ANNA}/entities/lisbon").json()["entity"]["id"] == "ent-lisbon"  # names are normalised
    weekly = http.get(f"{ANNA}/entities/Lisbon", params={"bucket": "week", "limit": 1}).json()
    assert len(weekly["memories"]) == 1 and sum(p["mentions"] for p in weekly["timeline"]) == 3


def test_rename_alias_merge_and_delete(http, engine):
    renamed = http.patch(f"{ANNA}/entities/Porto", json={"name": "Oporto"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Oporto" and "Porto" in renamed.json()["aliases"]
    assert http.get(f"{ANNA}/entities/Porto").json()["entity"]["name"] == "Oporto"  # the old name still finds it
    aliased = http.post(f"{ANNA}/entities/Lisbon/aliases", json={"alias": "the capital"}).json()
    assert aliased["aliases"] == ["Lisboa", "the capital"]
    merged = http.post(f"{ANNA}/entities/Lisbon/merge", json={"other": "Oporto"}).json()
    assert merged["id"] == "ent-lisbon" and {"Oporto", "Porto"} <= set(merged["aliases"])
    assert merged["mention_count"] == 4
    assert http.get(f"{ANNA}/entities/ent-porto").status_code == 404
    memories = engine.count("acme:anna")
    deleted = http.delete(f"{ANNA}/entities/Lisbon")
    assert deleted.json() == {"deleted": "Lisbon", "links": 5}
    assert http.get(f"{ANNA}/entities/Lisbon").status_code == 404
    assert engine.count("acme:anna") == memories  # its memories stay
    assert http.delete(f"{ANNA}/entities/Mia").json() == {"deleted": "Mia", "links": 0}
    assert names(http.get(f"{ANNA}/entities")) == ["Anna", "surfing"]


def test_names_that_need_encoding_are_one_segment(http):
    for name in ["AC/DC", "x/merge", "50% off?", "王磊"]:
        renamed = http.patch(f"{ANNA}/entities/Porto", json={"name": name})
        assert renamed.status_code == 200, renamed.text
        segment = quote(name, safe="")
        assert http.get(f"{ANNA}/entities/{segment}").json()["entity"]["id"] == "ent-porto"
        added = http.post(f"{ANNA}/entities/{segment}/aliases", json={"alias": f"{name} again"})
        assert added.status_code == 200 and f"{name} again" in added.json()["aliases"], added.text
        http.patch(f"{ANNA}/entities/{segment}", json={"name": "Porto"})


def test_bad_input_and_unknown_names(http):
    assert http.get(f"{ANNA}/entities/Atlantis").status_code == 404
    assert http.patch(f"{ANNA}/entities/Atlantis", json={"name": "Mu"}).status_code == 404
    assert http.delete(f"{ANNA}/entities/Atlantis").status_code == 404
    assert http.post(f"{ANNA}/entities/Lisbon/merge", json={"other": "Atlantis"}).status_code == 404
    assert http.delete(f"{ANNA}/profile/values/pv-none").status_code == 404
    for response in [http.get(f"{ANNA}/entities", params={"order": "loudest"}),
                     http.get(f"{ANNA}/entities", params={"kind": "planet"}),
                     http.get(f"{ANNA}/entities", params={"limit": "ten"}),
                     http.get(f"{ANNA}/entities", params={"limit": "-1"}),
                     http.get(f"{ANNA}/entities/Lisbon", params={"bucket": "century"}),
                     http.patch(f"{ANNA}/entities/Lisbon", json={"name": "  "}),
                     http.patch(f"{ANNA}/entities/Lisbon", json={}),
                     http.patch(f"{ANNA}/entities/Lisbon", json={"name": "Lisboa", "kind": "person"}),
                     http.patch(f"{ANNA}/entities/Lisbon", content=b"not json"),
                     http.post(f"{ANNA}/entities/Lisbon/aliases", json={"alias": 7}),
                     http.post(f"{ANNA}/entities/Lisbon/merge", json={"other": "Lisboa"}),
                     http.put(f"{ANNA}/profile/home", json={}),
                     http.put(f"{ANNA}/profile/home", json={"value": ""}),
                     http.put(f"{ANNA}/profile/home", json={"value": "Sintra", "replace": "yes"}),
                     http.put(f"{ANNA}/profile/home", json=["Sintra"])]:
        assert response.status_code == 400, (response.request.method, response.request.url, response.text)
        assert response.json()["error"]
    assert names(http.get(f"{ANNA}/entities")) != []  # nothing of it changed the ledger
    assert http.get(f"{ANNA}/profile").json()["profile"]["home"][0]["value"] == "Lisbon"


def test_names_and_keys_follow_one_rule_and_errors_name_the_field_as_sent(http, engine):
    def error(response) -> str:
        assert response.status_code == 400, (response.request.method, response.request.url, response.text)
        return response.json()["error"]
    assert error(http.patch(f"{ANNA}/entities/Lisbon", json={"name": 5})) == "name must be a string, not int"
    assert error(http.post(f"{ANNA}/entities/Lisbon/aliases", json={"alias": "Lisb\u202eoa"})).startswith(
        "alias holds U+202E, a format character (Unicode Cf)")
    assert error(http.post(f"{ANNA}/entities/Lisbon/aliases", json={"alias": "🐱🐱"})).startswith(
        "alias holds fewer than 2 letters or digits")
    assert error(http.patch(f"{ANNA}/entities/Lisbon", json={"name": "x" * 300})) == (
        "name has 300 characters; a name or key is at most 80")
    assert error(http.get(f"{ANNA}/entities/Lisbon%E2%80%AE")).startswith(
        "the name in the path holds U+202E, a format character")
    assert error(http.post(f"{ANNA}/entities/Lisbon/merge", json={"other": "Porto\n"})).startswith(
        "other holds U+000A, a control character")
    assert error(http.get(f"{ANNA}/entities", params={"kind": "alien"})) == (
        f"kind must be one of {', '.join(kind.value for kind in EntityKind)}, not 'alien'")
    assert error(http.put(f"{ANNA}/profile/home%0A", json={"value": "Sintra"})).startswith(
        "key holds U+000A, a control character (Unicode Cc)")
    assert error(http.put(f"{ANNA}/profile/home%20", json={"value": "Sintra"})) == (
        "key begins or ends with white space")
    assert error(http.get(f"{ANNA}/profile/home%0A/history")).startswith("key holds U+000A")
    assert [v.value for v in engine.profile("acme:anna")["home"]] == ["Lisbon"]  # home was not replaced
    assert engine.entity("acme:anna", "Lisbon").entity.aliases == ["Lisboa"]


def test_profile_history_set_and_remove(http, engine):
    profile = http.get(f"{ANNA}/profile").json()["profile"]
    assert {k: [v["value"] for v in values] for k, values in profile.items()} == {"home": ["Lisbon"],
                                                                                 "likes": ["surfing"]}
    assert profile["home"][0]["user_id"] == "anna" and profile["home"][0]["current"] is True
    history = http.get(f"{ANNA}/profile/home/history").json()
    assert history["key"] == "home"
    assert [(v["value"], v["current"]) for v in history["history"]] == [("Porto", False), ("Lisbon", True)]
    assert history["history"][0]["valid_to"].startswith("2026-05-20")
    assert history["history"][0]["superseded_by"] == "pv-home-lisbon"

    set_ = http.put(f"{ANNA}/profile/home", json={"value": "Sintra"})
    assert set_.status_code == 200 and set_.json()["set_by"] == "user" and set_.json()["current"]
    assert [(v["value"], v["current"]) for v in http.get(f"{ANNA}/profile/home/history").json()["history"]] == [
        ("Porto", False), ("Lisbon", False), ("Sintra", True)]
    both = http.put(f"{ANNA}/profile/likes", json={"value": "chess", "replace": False})
    assert both.status_code == 200
    assert sorted(v["value"] for v in http.get(f"{ANNA}/profile").json()["profile"]["likes"]) == ["chess", "surfing"]

    ended = http.delete(f"{ANNA}/profile/values/pv-likes-surf")
    assert ended.status_code == 200 and ended.json()["value"] == "surfing" and ended.json()["current"] is False
    assert [v["value"] for v in http.get(f"{ANNA}/profile").json()["profile"]["likes"]] == ["chess"]
    assert "surfing" in [v["value"] for v in http.get(f"{ANNA}/profile/likes/history").json()["history"]]
    assert [v.value for v in engine.profile("acme:anna")["home"]] == ["Sintra"]


def test_a_chinese_key_lands_on_its_canonical_key(http):
    set_ = http.put(f"{ANNA}/profile/{quote('住在', safe='')}", json={"value": "上海"})
    assert set_.status_code == 200 and set_.json()["key"] == "home"
    assert [v["value"] for v in http.get(f"{ANNA}/profile").json()["profile"]["home"]] == ["上海"]
    history = http.get(f"{ANNA}/profile/{quote('家', safe='')}/history").json()
    assert history["key"] == "home"  # the key it read, as every value in it says
    assert [(v["key"], v["value"]) for v in history["history"]][-1] == ("home", "上海")


def _curl_commands(block: str) -> list[dict]:
    """The curl commands of a shell block (-X, -H, -d and the URL), as a shell would read them."""
    commands: list[dict] = []
    for token in shlex.split(block.replace("\\\n", " "), comments=True):
        if token == "curl":
            commands.append({"method": "GET", "headers": {}, "data": None, "url": None})
            flag = None
        elif flag is None and token in ("-X", "-H", "-d"):
            flag = token
        elif flag == "-X":
            commands[-1]["method"], flag = token, None
        elif flag == "-H":
            name, value = token.split(": ", 1)
            commands[-1]["headers"][name], flag = value, None
        elif flag == "-d":
            commands[-1]["data"], flag = token, None
        else:
            commands[-1]["url"] = token
    return commands


def test_the_entities_example_of_server_md_runs_as_shown(engine, keys):
    """docs/server.md's curl session, run literally against a real server on an empty store."""
    text = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    section = text.split("### Entities and the profile", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = _curl_commands(block)
    assert [c["method"] for c in commands] == ["POST", "POST", "GET", "GET", "POST", "PUT", "GET"]
    with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv:
        answers = []
        for command in commands:
            headers = {name: value.replace("$KEY", keys.acme) for name, value in command["headers"].items()}
            response = httpx.request(command["method"], command["url"].replace("http://127.0.0.1:8765", srv.url),
                                     headers=headers, content=command["data"], timeout=30)
            assert response.status_code in (200, 201), (command, response.text)
            answers.append(response.json())
    assert sorted(e["name"] for e in answers[2]["entities"]) == ["Anna", "Mel", "Melanie"]
    assert answers[3]["entity"]["name"] == "Mel"
    assert answers[4]["name"] == "Melanie" and answers[4]["aliases"] == ["Mel"]
    assert answers[5]["key"] == "home" and answers[5]["value"] == "Lisbon"
    assert answers[6]["key"] == "home" and [v["value"] for v in answers[6]["history"]] == ["Lisbon"]
