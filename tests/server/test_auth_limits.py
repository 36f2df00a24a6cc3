"""Issue 29 item 2 on real `memoryscope-plugins serve` processes: failed authentications never lock out a
valid key, the client's address comes from X-Forwarded-For only through a trusted proxy, the per-key rate
limit holds on /mcp as on /v1, and /mcp takes browser calls from this server's own origin only."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
pytest.importorskip("mcp", reason="the [server] extra is not installed")

from memoryscope_plugins.server.auth import RateLimiter  # noqa: E402
from memoryscope_plugins.server.peers import TrustedProxies, client_address, same_origin  # noqa: E402
from tests.support.server_harness import ServeProcess  # noqa: E402

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "X-Memory-User": "anna"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
# 10 failures, then one per 1,000 s: a held-back client stays held back for the whole test, however slow
SLOW_REFILL = ("--auth-failure-burst", "10", "--auth-failure-rate", "0.001")


class KeyedServe(ServeProcess):
    """A serve process with the keys its tests use."""

    admin: str
    throttled: str


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    """A serve process reached directly (no proxy trusted), with a small per-key rate limit."""
    proc = KeyedServe(tmp_path_factory.mktemp("direct"), "--rate", "0.2", "--burst", "3", *SLOW_REFILL)
    proc.admin = proc.create_key("acme", "--admin")
    proc.throttled = proc.create_key("acme")
    proc.start()
    yield proc
    assert proc.stop() == 0


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """A serve process behind a 'proxy' on 127.0.0.1 (trusted), with no per-key rate limit."""
    proc = KeyedServe(tmp_path_factory.mktemp("proxied"), "--rate", "0", "--forwarded-allow-ips", "127.0.0.1",
                        *SLOW_REFILL,
                        "--allowed-host", "mem.example", "--allowed-host", "127.0.0.1")
    proc.admin = proc.create_key("acme", "--admin")
    proc.start()
    yield proc
    assert proc.stop() == 0


def get_users(srv: ServeProcess, key: str, **headers: str) -> httpx.Response:
    return httpx.get(srv.url + "/v1/users", headers={"X-API-Key": key, **headers}, timeout=60)


def fail_until_held_back(srv: ServeProcess, key_of, **headers: str) -> list[int]:
    statuses = []
    for i in range(30):
        statuses.append(get_users(srv, key_of(i), **headers).status_code)
    return statuses


def test_a_valid_key_is_served_after_100_failed_authentications_from_its_address(direct):
    statuses = [get_users(direct, f"msk_wrong-{i}").status_code for i in range(100)]
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429] * 90  # failures are limited...
    assert get_users(direct, direct.admin).status_code == 200  # ...a valid key from that address is not
    assert get_users(direct, "msk_wrong-again").status_code == 429
    missing = httpx.get(direct.url + "/v1/users", timeout=60)  # no key at all counts as a failure too
    assert missing.status_code == 429 and int(missing.headers["retry-after"]) >= 1


def test_forwarded_for_from_an_untrusted_peer_is_ignored(direct):
    # every wrong key claims another address; the server is not behind a trusted proxy, so the claims are
    # ignored and the one real address is held back (after the previous test, or after 20 more failures)
    statuses = fail_until_held_back(direct, lambda i: f"msk_spoof-{i}", **{"X-Forwarded-For": "10.9.9.9"})
    assert statuses[-1] == 429
    assert get_users(direct, direct.admin).status_code == 200


def test_behind_a_trusted_proxy_each_client_address_is_limited_alone(proxied):
    one = {"X-Forwarded-For": "203.0.113.1"}
    assert fail_until_held_back(proxied, lambda i: f"msk_a-{i}", **one)[-1] == 429
    # another client behind the same proxy is not held back by the first one's failures
    assert get_users(proxied, "msk_b-0", **{"X-Forwarded-For": "203.0.113.2"}).status_code == 401
    # the client cannot escape by prepending an address: the right-most untrusted one is its own
    spoofed = {"X-Forwarded-For": "198.51.100.7, 203.0.113.1"}
    assert get_users(proxied, "msk_a-x", **spoofed).status_code == 429
    assert get_users(proxied, proxied.admin, **one).status_code == 200


def test_one_wrong_key_is_limited_across_addresses(proxied):
    statuses = [get_users(proxied, "msk_revoked-key", **{"X-Forwarded-For": f"198.18.0.{i}"}).status_code
                for i in range(1, 15)]
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429] * 4


def test_a_key_throttled_on_v1_is_throttled_on_mcp(direct):
    statuses = [get_users(direct, direct.throttled).status_code for _ in range(6)]
    assert 429 in statuses
    response = httpx.post(direct.url + "/mcp", json=TOOLS_LIST, timeout=60,
                          headers={**MCP_HEADERS, "X-API-Key": direct.throttled})
    assert response.status_code == 429 and int(response.headers["retry-after"]) >= 1


def mcp_call(srv: KeyedServe, **headers: str) -> httpx.Response:
    return httpx.post(srv.url + "/mcp", json=TOOLS_LIST, timeout=60,
                      headers={**MCP_HEADERS, "X-API-Key": srv.admin, **headers})


def test_mcp_takes_only_its_own_origin(proxied):
    port = proxied.port
    assert mcp_call(proxied).status_code == 200  # no Origin: not a browser
    assert mcp_call(proxied, Origin=f"http://127.0.0.1:{port}").status_code == 200
    for origin in ("https://localhost:443", "https://localhost", f"https://127.0.0.1:{port}",
                   f"http://127.0.0.1:{port + 1}", "http://127.0.0.1", "null", f"http://mem.example:{port}"):
        refused = mcp_call(proxied, Origin=origin)
        assert refused.status_code == 403, origin
        assert refused.json()["request_id"] == refused.headers["x-request-id"]
    # behind the trusted TLS proxy: the browser's origin is https://mem.example (port 443)
    tls = {"Host": "mem.example", "X-Forwarded-Proto": "https"}
    assert mcp_call(proxied, Origin="https://mem.example", **tls).status_code == 200
    assert mcp_call(proxied, Origin="http://mem.example", **tls).status_code == 403


def test_mcp_checks_the_scheme_forwarded_only_by_a_trusted_proxy(direct):
    port = direct.port
    assert mcp_call(direct, Origin=f"http://localhost:{port}", Host=f"localhost:{port}").status_code != 403
    refused = mcp_call(direct, Origin=f"https://localhost:{port}", Host=f"localhost:{port}",
                       **{"X-Forwarded-Proto": "https"})
    assert refused.status_code == 403


# -- the parts, without a server ----------------------------------------------------------------------------------

def scope(peer: str, *headers: tuple[str, str]) -> dict:
    return {"client": (peer, 5000), "scheme": "http",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}


def test_client_address_rules():
    proxies = TrustedProxies(["10.0.0.0/8, ::1"])
    assert client_address(scope("192.0.2.1", ("X-Forwarded-For", "1.2.3.4")), proxies) == "192.0.2.1"
    assert client_address(scope("10.1.1.1", ("X-Forwarded-For", "1.2.3.4, 10.0.0.9")), proxies) == "1.2.3.4"
    assert client_address(scope("::1", ("X-Forwarded-For", "9.9.9.9"), ("X-Forwarded-For", "5.6.7.8")),
                          proxies) == "5.6.7.8"
    assert client_address(scope("10.1.1.1", ("X-Forwarded-For", "10.0.0.2, 10.0.0.3")), proxies) == "10.0.0.2"
    assert client_address(scope("10.1.1.1"), proxies) == "10.1.1.1"
    assert client_address(scope("10.1.1.1", ("X-Forwarded-For", "1.2.3.4")), TrustedProxies()) == "10.1.1.1"
    with pytest.raises(ValueError, match="not an IP"):
        TrustedProxies(["proxy.example"])


def test_same_origin_rules():
    none = TrustedProxies()
    assert same_origin("http://localhost:8765", scope("127.0.0.1", ("Host", "localhost:8765")), none)
    assert same_origin("http://[::1]:8765", scope("::1", ("Host", "[::1]:8765")), none)
    assert same_origin("http://mem.example", scope("127.0.0.1", ("Host", "mem.example:80")), none)
    assert not same_origin("http://mem.example/x", scope("127.0.0.1", ("Host", "mem.example")), none)
    assert not same_origin("http://localhost:8765", scope("127.0.0.1"), none)
    assert not same_origin("ftp://localhost:8765", scope("127.0.0.1", ("Host", "localhost:8765")), none)


def test_the_failure_limiter_memory_is_bounded():
    limiter = RateLimiter(0.001, 1, max_tracked=50)
    for i in range(500):
        limiter.take(f"addr:{i}")
    assert len(limiter._buckets) <= 50
    assert limiter.wait("addr:499") > 0  # the most recent are kept
