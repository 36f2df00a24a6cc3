"""The HTTP API on a real server with a real HTTP client, and the auth matrix over every route."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from memoryscope_plugins.server import ServerConfig  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys, seed, seed_ledger  # noqa: E402

# (method, path, JSON body or None, admin only)
ROUTES = [
    ("GET", "/v1/users", None, False),
    ("GET", "/v1/users/anna/memories", None, False),
    ("POST", "/v1/users/anna/memories", {"content": "Anna's cat is called Mia."}, False),
    ("GET", "/v1/users/anna/memories/obs-new", None, False),
    ("PATCH", "/v1/users/anna/memories/obs-surf", {"content": "Anna surfs every Sunday."}, False),
    ("POST", "/v1/users/anna/record", {"messages": [{"role": "user", "content": "I start a new job."}]}, False),
    ("POST", "/v1/users/anna/retrieve", {"query": "where does Anna live?"}, False),
    ("GET", "/v1/users/anna/export", None, False),
    ("POST", "/v1/users/anna/consolidate", None, True),
    ("POST", "/v1/users/anna/reflect", None, True),
    ("POST", "/v1/users/anna/import", None, True),
    ("GET", "/v1/users/anna/entities", None, False),
    ("GET", "/v1/users/anna/entities/Lisbon", None, False),
    ("PATCH", "/v1/users/anna/entities/Porto", {"name": "Oporto"}, False),
    ("POST", "/v1/users/anna/entities/Lisbon/aliases", {"alias": "the capital"}, False),
    ("POST", "/v1/users/anna/entities/Lisbon/merge", {"other": "Porto"}, False),
    ("DELETE", "/v1/users/anna/entities/Mia", None, False),
    ("GET", "/v1/users/anna/profile", None, False),
    ("GET", "/v1/users/anna/profile/home/history", None, False),
    ("PUT", "/v1/users/anna/profile/home", {"value": "Sintra"}, False),
    ("DELETE", "/v1/users/anna/profile/values/pv-likes-surf", None, False),
    ("GET", "/v1/users/anna/tool-stats?agent_id=assistant", None, False),
    ("GET", "/v1/agents/assistant/procedures", None, False),
    ("DELETE", "/v1/users/anna/memories/obs-old", None, False),
    ("DELETE", "/v1/users/anna", None, True),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, False),
]


@pytest.fixture
def keys():
    return make_keys()


@pytest.fixture
def running(engine, keys):
    seed(engine)
    seed_ledger(engine)
    with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv:
        yield srv


def call(srv, method, path, body, key=None, **extra):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if path == "/mcp":
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
    content = None if body is None else json.dumps(body)
    if path.endswith("/import"):
        content = ""
    return httpx.request(method, srv.url + path, content=content, headers={**headers, **extra}, timeout=30)


def acme_anna_ids(engine):
    """acme's anna as far as a request can change her: her memory ids, entities and profile values."""
    store = engine.store
    return ({m.id for m in engine.list("acme:anna", limit=1000)},
            {(e.id, e.name, tuple(e.aliases), e.mention_count) for e in store.entities("acme:anna")},
            {(v.id, v.value, v.valid_to) for v in store.profile_values("acme:anna")})


def test_health_openapi_and_page_need_no_key(running):
    assert httpx.get(running.url + "/health").json() == {"status": "ok"}
    spec = httpx.get(running.url + "/openapi.json").json()
    assert "/v1/users/{user}/retrieve" in spec["paths"]
    assert {"/v1/users/{user}/entities/{name}/merge", "/v1/users/{user}/profile/{key}/history"} <= set(spec["paths"])
    assert {"/v1/agents/{agent}/procedures", "/v1/agents/{agent}/procedures/{procedure_id}"} <= set(spec["paths"])
    page = httpx.get(running.url + "/")
    assert page.status_code == 200 and "Memory browser" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize("method,path,body,admin", ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES])
def test_every_route_refuses_no_key_and_a_wrong_key(running, engine, method, path, body, admin):
    before = acme_anna_ids(engine)
    assert call(running, method, path, body).status_code == 401
    assert call(running, method, path, body, key="msk_not-a-real-key").status_code == 401
    assert call(running, method, path, body, **{"X-API-Key": "msk_wrong"}).status_code == 401
    assert acme_anna_ids(engine) == before


def call_outside_acme(srv, engine, method, path, body, key) -> httpx.Response:
    """`call` with a key of another tenant than acme (as MCP user anna), checking that no text of acme's
    anna is in the answer and that nothing of hers changed or went away."""
    before = acme_anna_ids(engine)
    contents = {m.content for m in engine.list("acme:anna", limit=1000)}
    response = call(srv, method, path, body, key=key, **({"X-Memory-User": "anna"} if path == "/mcp" else {}))
    assert response.status_code in (200, 201, 404), response.text
    assert not any(text in response.text for text in contents), "acme's memory text leaked to another tenant"
    assert acme_anna_ids(engine) == before
    return response


@pytest.mark.parametrize("method,path,body,admin", ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES])
def test_another_tenants_key_never_reaches_this_tenants_users(running, engine, keys, method, path, body, admin):
    response = call_outside_acme(running, engine, method, path, body, keys.other)
    if path == "/v1/users":
        assert "anna" not in response.json()["users"]
    if path.endswith(("/memories", "/record")) and method == "POST":  # writes land in globex's own anna
        assert engine.count("globex:anna") > 0


OWN_ANNA = "The store's own Anna keeps bees in Lisbon."


@pytest.mark.parametrize("method,path,body,admin", ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES])
def test_the_default_tenant_is_the_stores_own_users_and_no_other_tenants(running, engine, keys, method, path, body,
                                                                        admin):
    """The default tenant's anna is the store's anna (the one the CLI and the API fill); it reaches nothing of
    acme's anna, not even by naming her store id, and acme's and globex's keys reach nothing of it."""
    engine.add("anna", OWN_ANNA)
    before = acme_anna_ids(engine)
    response = call_outside_acme(running, engine, method, path, body, keys.default)
    if path == "/v1/users":
        assert response.json()["users"] == ["anna"]
    if (method, path) == ("GET", "/v1/users/anna/memories"):
        assert [m["content"] for m in response.json()["memories"]] == [OWN_ANNA]
    if "/anna" in path:  # acme's store id named as a default user: refused, whatever the route
        named = call(running, method, path.replace("/anna", "/acme%3Aanna"), body, key=keys.default)
        assert named.status_code == 400 and "cannot contain ':'" in named.json()["error"]
    assert acme_anna_ids(engine) == before
    for other in (keys.admin, keys.other):  # other tenants' keys: their own anna, never the store's
        seen = call(running, "GET", "/v1/users/anna/memories", None, key=other)
        assert OWN_ANNA not in seen.text


@pytest.mark.parametrize("method,path,body,admin", ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES])
def test_user_bound_and_non_admin_keys(running, keys, method, path, body, admin):
    if "/anna" in path:  # a key bound to anna may not reach bob
        assert call(running, method, path.replace("/anna", "/bob"), body, key=keys.anna_only).status_code == 403
    expected = 403 if admin else (200, 201)
    status = call(running, method, path, body, key=keys.acme,
                  **({"X-Memory-User": "anna"} if path == "/mcp" else {})).status_code
    assert status == expected if admin else status in expected


def test_round_trip_record_retrieve_update_expire_delete_export_import(running, engine, keys):
    h = {"Authorization": f"Bearer {keys.admin}"}
    with httpx.Client(base_url=running.url, headers=h, timeout=30) as http:
        ids = http.post("/v1/users/bob/record", json={"messages": [
            {"role": "user", "content": "My sister Clara lives in Berlin."},
            {"role": "assistant", "content": "Nice, do you visit her?"}]}).json()["ids"]
        assert len(ids) == 2
        found = http.post("/v1/users/bob/retrieve", json={"query": "Where does Clara live?", "top_k": 3}).json()
        assert found["memories"][0]["memory"]["content"] == "My sister Clara lives in Berlin."
        assert found["memories"][0]["memory"]["user_id"] == "bob"
        assert found["memories"][0]["score"] > 0 and "Berlin" in found["context"]
        changed = http.patch(f"/v1/users/bob/memories/{ids[0]}", json={"content": "Clara lives in Munich."})
        assert changed.json()["content"] == "Clara lives in Munich."
        assert http.patch(f"/v1/users/bob/memories/{ids[1]}", json={"status": "expired"}).json()["status"] == "expired"
        active = http.get("/v1/users/bob/memories", params={"include_expired": "false"}).json()["memories"]
        assert [m["id"] for m in active] == [ids[0]]
        assert active[0]["when"].startswith("said ")  # the listing says when it was said
        exported = http.get("/v1/users/bob/export")
        lines = [json.loads(line) for line in exported.text.splitlines()]
        lines = [line for line in lines if "record" not in line]  # the memories; the ledger's lines follow
        assert {m["id"] for m in lines} == set(ids) and all(m["user_id"] == "bob" for m in lines)
        assert not any("when" in m for m in lines)  # an export holds the stored fields only
        assert http.delete("/v1/users/bob").json() == {"deleted": 2}
        assert http.get("/v1/users/bob/memories").json()["memories"] == []
        restored = http.post("/v1/users/bob/import", content=exported.text).json()
        assert restored["imported"] == 2 and set(restored["ids"]) == set(ids)  # every id the lines named
        again = http.post("/v1/users/bob/import", content=exported.text).json()
        assert again == restored  # idempotent: the same stored ids, no duplicates
        assert len(http.get("/v1/users/bob/memories").json()["memories"]) == 2
        moved = restored["ids"][ids[0]]
        assert http.get(f"/v1/users/bob/memories/{moved}").json()["content"] == "Clara lives in Munich."
        own = http.get("/v1/users/bob/export").text  # ids already bob's are kept
        assert http.post("/v1/users/bob/import", content=own).json()["ids"] == {v: v for v in restored["ids"].values()}
        assert http.delete(f"/v1/users/bob/memories/{moved}").status_code == 200
        assert http.get(f"/v1/users/bob/memories/{moved}").status_code == 404
        assert sorted(http.get("/v1/users").json()["users"]) == ["anna", "bob"]
    with httpx.Client(base_url=running.url, headers={"Authorization": f"Bearer {keys.anna_only}"}) as http:
        assert http.get("/v1/users").json()["users"] == ["anna"]


def test_a_keyed_record_retried_records_nothing_twice_and_keys_are_each_tenants_own(running, engine, keys):
    body = {"messages": [{"role": "user", "content": "My flight lands at 9.", "key": "chat-7/msg-1"}]}
    first = call(running, "POST", "/v1/users/carl/record", body, key=keys.admin)
    retried = call(running, "POST", "/v1/users/carl/record", body, key=keys.admin)  # the answer was lost
    assert first.status_code == retried.status_code == 201
    assert retried.json()["ids"] == first.json()["ids"]
    assert [m.content for m in engine.list("acme:carl")] == ["My flight lands at 9."]
    elsewhere = call(running, "POST", "/v1/users/carl/record", body, key=keys.other)  # globex's carl
    assert elsewhere.json()["ids"] != first.json()["ids"]
    assert [m.content for m in engine.list("globex:carl")] == ["My flight lands at 9."]
    bad = call(running, "POST", "/v1/users/carl/record", {"messages": [{"role": "user", "content": "x", "key": 7}]},
               key=keys.admin)
    assert bad.status_code == 400 and "key" in bad.text


def test_bad_input_gets_a_clear_error(running, keys):
    h = {"Authorization": f"Bearer {keys.admin}"}
    with httpx.Client(base_url=running.url, headers=h, timeout=30) as http:
        assert http.post("/v1/users/anna/retrieve", content=b"not json").status_code == 400
        assert http.post("/v1/users/anna/retrieve", json=["a list"]).status_code == 400
        bad = http.post("/v1/users/anna/retrieve", json={"query": "x", "top_k": 0})
        assert bad.status_code == 400 and "top_k" in bad.json()["error"]
        assert http.post("/v1/users/anna/retrieve", json={"query": "x", "limit": 3}).status_code == 400
        assert http.post("/v1/users/anna/record", json={"messages": []}).status_code == 400
        assert http.patch("/v1/users/anna/memories/obs-new", json={"status": "gone"}).status_code == 400
        assert http.get("/v1/users/anna/memories", params={"limit": "ten"}).status_code == 400
        assert http.post("/v1/users/anna/import", content="{broken\n").status_code == 400


def test_size_and_rate_limits(engine, keys):
    with RunningServer(engine, keys.ring, ServerConfig(max_body_bytes=2000, rate_per_second=1, rate_burst=3)) as srv:
        h = {"Authorization": f"Bearer {keys.admin}"}
        big = {"content": "x" * 5000}
        assert httpx.post(srv.url + "/v1/users/anna/memories", json=big, headers=h).status_code == 413
        statuses = [httpx.get(srv.url + "/v1/users", headers=h).status_code for _ in range(6)]
        assert 429 in statuses
        # another key has its own bucket
        assert httpx.get(srv.url + "/v1/users", headers={"X-API-Key": keys.acme}).status_code == 200
    assert engine.list("acme:anna") == []


def test_cors_is_off_by_default_and_on_when_asked(engine, keys):
    origin = {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
    with RunningServer(engine, keys.ring) as srv:
        response = httpx.options(srv.url + "/v1/users", headers=origin)
        assert "access-control-allow-origin" not in response.headers
    with RunningServer(engine, keys.ring, ServerConfig(cors_origins=["https://app.example"])) as srv:
        ok = httpx.options(srv.url + "/v1/users", headers={**origin, "Origin": "https://app.example"})
        assert ok.headers["access-control-allow-origin"] == "https://app.example"
        assert "access-control-allow-origin" not in httpx.options(srv.url + "/v1/users", headers=origin).headers


def test_keys_are_hashed_at_rest_and_never_logged(running, keys, tmp_path, caplog):
    path = tmp_path / "keys.json"
    keys.ring.save(path)
    stored = path.read_text()
    assert keys.admin not in stored and keys.other not in stored
    from memoryscope_plugins.server.auth import KeyRing
    assert KeyRing.load(path).lookup(keys.admin).tenant == "acme"
    caplog.set_level(logging.DEBUG)
    call(running, "GET", "/v1/users/anna/memories", None, key=keys.admin)
    call(running, "POST", "/v1/users/anna/retrieve", {"query": "Lisbon"}, key=keys.admin)
    call(running, "GET", "/v1/users", None, key="msk_wrong-key-value")
    logged = caplog.text
    assert keys.admin not in logged and "msk_wrong-key-value" not in logged and "Lisbon" not in logged


def test_serve_create_key_prints_it_once_and_stores_only_its_hash(tmp_path, capsys):
    from memoryscope_plugins.cli.main import main
    from memoryscope_plugins.server.auth import KeyRing
    path = tmp_path / "keys.json"
    assert main(["serve", "--keys", str(path), "--create-key", "acme", "--key-user", "anna"]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("msk_") and key not in path.read_text()
    found = KeyRing.load(path).lookup(key)
    assert found.tenant == "acme" and found.users == ("anna",) and not found.admin
    assert main(["serve", "--keys", str(path), "--create-key", "bad/tenant"]) == 1


def test_the_cli_imports_without_the_server_extra():
    import subprocess
    import sys
    code = ("import sys; [sys.modules.__setitem__(m, None) for m in ('starlette', 'uvicorn', 'mcp')]; "
            "from memoryscope_plugins.cli.main import main; sys.exit(main(['serve', '--port', '1']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "pip install 'memoryscope-plugins[server]'" in done.stderr


def test_retrieve_takes_a_consistency(running, keys):
    """``consistency`` picks where the reads go when the store has read standbys (none here: the same
    answer); anything else than replica or primary is a 400 that names the field."""
    h = {"Authorization": f"Bearer {keys.admin}"}
    with httpx.Client(base_url=running.url, headers=h, timeout=30) as http:
        asked = {"query": "where does Anna live?", "top_k": 3}
        plain = http.post("/v1/users/anna/retrieve", json=asked).json()
        for consistency in ("primary", "replica"):
            answer = http.post("/v1/users/anna/retrieve", json={**asked, "consistency": consistency})
            assert answer.status_code == 200
            assert [m["memory"]["id"] for m in answer.json()["memories"]] == [m["memory"]["id"] for m in
                                                                              plain["memories"]]
        refused = http.post("/v1/users/anna/retrieve", json={**asked, "consistency": "nearest"})
        assert refused.status_code == 400 and "consistency" in refused.text
