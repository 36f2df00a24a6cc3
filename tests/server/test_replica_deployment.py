"""Issue 44, item 3 (the replica half): the deployment of test_deployment.py with a read standby, on real
parts. A throw-away primary and a streaming standby made from it (``pg_basebackup`` from the same binaries,
loopback ports); two `serve` instances reading from the standby (``store.read_urls``), one `worker` on the
primary, the model faked at the HTTP boundary; bench/deploy_load.py's clients record and retrieve for users of
two tenants through both instances. Mid-run the standby is stopped (the instances' reads move to the
primary: no error); then the primary too (nothing can answer: every instance says 503 with Retry-After),
which is started again; then the standby (the instances' reads come back to it). The checks are the deployment test's:
nothing lost, nothing duplicated, no user's memory shown to another. The same runs on a partitioned store
(issue 44: the tables made with ``store.partitions: 4`` on the primary before the standby is made from it;
every process then follows that layout): the same phases, the same checks."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import httpx
import pytest

pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
pytest.importorskip("psycopg_pool")

import psycopg  # noqa: E402

from tests.server.test_deployment import load_bench  # noqa: E402
from tests.support.fakes.fake_model_server import OPENAI_CHAT, FakeModelServer, RecordedRequest, Reply  # noqa: E402

PARTITIONS = 4
SECONDS = 6.0  # of each load phase
LAYOUTS = {"unpartitioned": "deployment", "partitioned": "deployment_p4"}  # a database each, one standby


def in_database(dsn: str, database: str) -> str:
    return dsn.rsplit("/", 1)[0] + "/" + database


@pytest.fixture(scope="module")
def pair():
    """(primary, standby) with a database per layout, the partitioned one's tables made with
    ``partitions=4`` before the standby is made from the primary; skipped where they cannot start (a
    failure under CI=true)."""
    from memoryscope_plugins.storage.postgres_store import PostgresStore
    from tests.support import servers
    try:
        with servers.postgres_server() as primary:
            for database in LAYOUTS.values():
                primary.create_database(database)
            PostgresStore(in_database(primary.dsn, LAYOUTS["partitioned"]), partitions=PARTITIONS).close()
            with servers.standby_server(primary) as standby:
                yield primary, standby
    except servers.ServerUnavailable as exc:
        pytest.skip(f"a PostgreSQL primary and standby could not start here: {exc}")


def standby_reads(standby_dsn: str) -> int:
    """Transactions the standby has run in the DSN's database (its own statistics; ours excepted)."""
    with psycopg.connect(standby_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
        assert row is not None
        return int(row[0])


def partitions_of(dsn: str, table: str = "memoryscope_memories") -> int:
    """The number of partitions of `table` (0: a plain table)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", (table,)).fetchone()
        assert row is not None
        return int(row[0])


def load(bench, deployment, seconds: float, outcome, users, phase: int) -> None:
    """The clients' traffic for `seconds`: bench/deploy_load.py's clients, each through both instances in
    turn, for three users (an odd number: each of them is both recorded and retrieved), client numbers,
    hence message tags, unique per phase."""
    stop = threading.Event()
    threads = [threading.Thread(target=bench.client, args=(3 * phase + c, (users + users)[2 * c:2 * c + 3],
                                                           deployment, 1_000_000, stop, outcome, 0.05), daemon=True)
               for c in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(90)


def change_pattern(database: str) -> re.Pattern[str]:
    """A standby's change of state, as an instance logs it."""
    return re.compile(rf"read standby 0 \(postgresql://postgres@127\.0\.0\.1:\d+/{database}\): (\w+) -> (\w+)")


def wait_until_back(deployment, change: re.Pattern[str], timeout_s: float = 60) -> None:
    """Until every instance has said the standby is back in use (it checks every second)."""
    deadline = time.monotonic() + timeout_s
    while not all(change.findall(i.log.read_text(errors="replace"))[-1:] in ([("down", "ok")], [("lagging", "ok")])
                  for i in deployment.instances):
        assert time.monotonic() < deadline, "an instance did not take the standby back"
        time.sleep(0.2)


PROBE = ("acme", "user0")  # a user of the load, who has memories


def probe(deployment) -> list[tuple[int, bool]]:
    """A retrieve and a record through each instance: (status, whether a Retry-After came with it)."""
    tenant, user = PROBE
    headers = {"Authorization": f"Bearer {deployment.keys[tenant]}"}
    answers = []
    with httpx.Client(timeout=60, headers=headers) as http:
        for instance in deployment.instances:
            for op, body in (("retrieve", {"query": "what do I like?"}),
                             ("record", {"messages": [{"role": "user", "content": "I like tea."}]})):
                response = http.post(f"{instance.url}/v1/users/{user}/{op}", json=body)
                answers.append((response.status_code, "retry-after" in response.headers))
    return answers


def wait_until_answering(deployment, timeout_s: float = 60) -> float:
    """Seconds until every instance answers a retrieve again once the primary is back."""
    tenant, user = PROBE
    started = time.monotonic()
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {deployment.keys[tenant]}"}) as http:
        for instance in deployment.instances:
            while http.post(f"{instance.url}/v1/users/{user}/retrieve",
                            json={"query": "what do I like?"}).status_code != 200:
                assert time.monotonic() - started < timeout_s, "an instance did not answer after the primary came back"
                time.sleep(0.2)
    return round(time.monotonic() - started, 1)


def retrievals_ok(outcome) -> int:
    return outcome.statuses[("retrieve", 200)]


ROUTED = re.compile(r'^memoryscope_routed_reads_total\{reason="(\w*)",served_by="(\w+)"\} ([0-9.e+]+)$', re.M)


def routed(metrics_urls: list[str]) -> Counter[tuple[str, str]]:
    """The instances' routed reads, by (served_by, reason), from their Prometheus metrics."""
    total: Counter[tuple[str, str]] = Counter()
    for url in metrics_urls:
        for reason, served_by, value in ROUTED.findall(httpx.get(url, timeout=10).text):
            total[(served_by, reason)] += int(float(value))
    return total


def by_standby(counts: Counter[tuple[str, str]]) -> int:
    return counts[("standby", "")]


def by_primary(counts: Counter[tuple[str, str]]) -> int:
    return sum(n for (served_by, _), n in counts.items() if served_by == "primary")


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_instances_read_the_standby_and_move_to_the_primary_while_it_is_down(pair, tmp_path, layout):
    primary, standby = pair
    database = LAYOUTS[layout]
    dsn, standby_dsn = in_database(primary.dsn, database), in_database(standby.dsn, database)
    change = change_pattern(database)
    bench = load_bench()
    traffic = bench.ModelTraffic(latency=0.05)

    def worker_chat(server: FakeModelServer, request: RecordedRequest) -> Reply:
        return Reply(json=traffic.chat(request.headers.get("authorization", ""), request.json or {}))

    def instance_chat(server: FakeModelServer, request: RecordedRequest) -> Reply:
        return Reply(status=500, json={"error": {"message": "instances must not call the model"}})

    with FakeModelServer(embedding_dim=bench.EMBEDDING_DIM) as worker_model, \
            FakeModelServer(embedding_dim=bench.EMBEDDING_DIM) as instance_model:
        worker_model.route(OPENAI_CHAT, worker_chat)
        instance_model.route(OPENAI_CHAT, instance_chat)
        deployment = bench.Deployment(tmp_path, dsn, instance_model.url, worker_model.url, lease_ttl_s=3.0,
                                      workers=1, read_urls=[standby_dsn])
        metrics_urls = []
        for instance in deployment.instances:  # each with a keyless metrics listener of its own
            port = bench.free_port()
            instance.argv += ["--metrics-port", str(port)]
            metrics_urls.append(f"http://127.0.0.1:{port}/metrics")
        outcome = bench.Outcome()
        users = [(tenant, f"user{i}") for tenant in bench.TENANTS for i in range(3)]
        phases: dict[str, Counter[tuple[str, str]]] = {}
        served: dict[str, int] = {}
        try:
            deployment.start()
            marks = [routed(metrics_urls), standby_reads(standby_dsn)]
            load(bench, deployment, SECONDS, outcome, users, 0)
            served["up"] = retrievals_ok(outcome)
            phases["up"] = routed(metrics_urls) - marks[0]
            standby.stop()
            try:
                marks = [routed(metrics_urls)]
                load(bench, deployment, SECONDS, outcome, users, 1)
                phases["down"] = routed(metrics_urls) - marks[0]
                served["down"] = retrievals_ok(outcome) - served["up"]
                primary.stop()  # nothing can answer a read now
                try:
                    nobody = probe(deployment)
                finally:
                    primary.start()
                answered_again_s = wait_until_answering(deployment)
            finally:
                standby.start()
            wait_until_back(deployment, change)
            marks = [routed(metrics_urls), standby_reads(standby_dsn)]
            load(bench, deployment, SECONDS, outcome, users, 2)
            phases["back"] = routed(metrics_urls) - marks[0]
            served["back"] = retrievals_ok(outcome) - served["up"] - served["down"]
            standby_side = standby_reads(standby_dsn) - marks[1]
            drain_s = bench.wait_until_consolidated(dsn, 60.0)
        finally:
            deployment.stop()
        logs = [instance.log.read_text(errors="replace") for instance in deployment.instances]
        checks = bench.verdict(outcome, bench.store_state(dsn), len(instance_model.requests_to(OPENAI_CHAT)))
    figures = {"layout": (layout, partitions_of(dsn), partitions_of(standby_dsn)),
               "nobody_to_read": nobody, "answered_again_s": answered_again_s,
               "routed": phases, "retrievals": served, "standby_transactions_back": standby_side, "drain_s": drain_s,
               "statuses": dict(outcome.statuses), "checks": checks}
    print(figures)  # shown with -s: the figures of the run
    expected = PARTITIONS if layout == "partitioned" else 0  # the layout made, and read on the standby
    assert figures["layout"] == (layout, expected, expected), figures
    assert checks == dict.fromkeys(checks, 0), figures  # 0 lost, 0 duplicated, 0 leaks, no 5xx ...
    assert not outcome.unavailable, figures  # the primary answered every read the standby could not
    assert len(outcome.acked) >= 20, figures
    # the standby served reads before its outage and again after it; while it was down, the primary did
    assert all(served.values()), figures
    # with the standby and the primary both down: 503 with Retry-After from every instance, never a 500
    assert nobody == [(503, True)] * (2 * len(deployment.instances)), figures
    assert by_standby(phases["up"]) > 0, figures
    assert phases["up"][("primary", "standby_failed")] == 0, figures
    assert by_standby(phases["down"]) == 0 and by_primary(phases["down"]) > 0, figures
    assert by_standby(phases["back"]) > 0 and standby_side > 0, figures
    for text in logs:  # each instance said once that the standby went away, and that it came back
        changes = change.findall(text)
        assert ("ok", "down") in changes, text[-3000:]
        assert changes[-1][1] == "ok", changes
        assert sum(1 for _, state in changes if state == "down") <= 3, changes  # per change, not per read
