"""Issue 29, item 1: the deployment as a team runs it, in CI. Two `serve` instances (``consolidation.worker:
none``) and two `worker` processes on one embedded PostgreSQL, the model faked at the HTTP boundary (one fake
endpoint for the instances, whose chat calls fail and are counted, another for the workers), client threads
recording and retrieving for users of two tenants through both instances. One instance and one worker are
SIGKILLed (the worker while it waits for the model) and started again; then PostgreSQL is stopped and started
again on the same data folder and port.

The scenario is bench/deploy_load.py's (75 s of load and a 30 s outage there); here it is shorter: an 8 s
outage, which shows the same behaviour (requests on the connections PostgreSQL cut answer 503 at once, the
others after the pool's wait; both instances serve again without a restart)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter

import pytest

pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
pytest.importorskip("psycopg_pool")

from tests.support.fakes.fake_model_server import OPENAI_CHAT, FakeModelServer, RecordedRequest, Reply  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402

BENCH = ROOT / "bench" / "deploy_load.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("deploy_load_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_two_instances_and_two_workers_survive_kills_and_a_database_outage(postgres, tmp_path):
    bench = load_bench()
    traffic = bench.ModelTraffic(latency=0.3)  # a model call lasts long enough to kill a worker inside it

    def worker_chat(server: FakeModelServer, request: RecordedRequest) -> Reply:
        return Reply(json=traffic.chat(request.headers.get("authorization", ""), request.json or {}))

    def instance_chat(server: FakeModelServer, request: RecordedRequest) -> Reply:
        return Reply(status=500, json={"error": {"message": "instances must not call the model"}})

    with FakeModelServer(embedding_dim=bench.EMBEDDING_DIM) as worker_model, \
            FakeModelServer(embedding_dim=bench.EMBEDDING_DIM) as instance_model:
        worker_model.route(OPENAI_CHAT, worker_chat)
        instance_model.route(OPENAI_CHAT, instance_chat)

        def instance_model_calls() -> int:
            return len(instance_model.requests_to(OPENAI_CHAT))

        timeline = bench.Timeline(clients=4, users_per_tenant=3, kill_after_s=6.0, down_s=2.0, outage_after_s=4.0,
                                  outage_s=8.0, recovery_s=5.0, drain_timeout_s=60.0, pause_s=0.05)
        result = bench.run(postgres, tmp_path, instance_model.url, instance_model_calls, worker_model.url, traffic,
                           timeline, lease_ttl_s=3.0)

    checks = result["checks"]
    assert checks == dict.fromkeys(checks, 0), result  # every check counts what went wrong
    assert set(checks) >= {"lost", "duplicated", "not_consolidated", "duplicate_observations", "pending", "leaks",
                           "server_errors", "unavailable_without_retry_after", "instance_model_calls",
                           "instances_not_serving_after_outage"}
    assert result["acknowledged_writes"] >= 50 and result["retrievals"] >= 50, result
    assert result["retrievals_with_own_memories"] > 0, result  # the leak check read real results
    assert result["worker_killed_mid_call"], result  # the SIGKILL came while the worker waited for the model
    assert result["unavailable_during_outage"] > 0, result  # the outage was seen, as 503 + Retry-After
    assert result["worker_model_calls"] > 0


def test_the_checks_count_a_leak_a_loss_and_a_duplicate():
    bench = load_bench()
    outcome = bench.Outcome()
    outcome.acked["[acme/anna#1]"] = bench.Acked("acme", "anna", ["m1"], 0.0)
    outcome.acked["[acme/anna#2]"] = bench.Acked("acme", "anna", ["m2"], 0.0)
    leaked = {"memories": [{"memory": {"id": "x", "user_id": "anna", "content": "[globex/anna#5] hello"}}],
              "context": ""}
    outcome.leaks += bench.check_retrieval(leaked, "acme", "anna")
    state = {"turns": Counter({"[acme/anna#1]": 2}), "observations": Counter({"[acme/anna#1]": 1}),
             "owners": {"[acme/anna#1]": {"acme:anna", "globex:anna"}}, "ids": {"m1"}, "messages": Counter(),
             "states": Counter({"pending": 1})}
    checks = bench.verdict(outcome, state, instance_model_calls=1)
    assert checks["leaks"] == 1
    assert checks["lost"] == 1  # #2 acknowledged, not stored
    assert checks["duplicated"] == 1
    assert checks["not_consolidated"] == 1
    assert checks["misplaced"] == 1
    assert checks["pending"] == 1
    assert checks["instance_model_calls"] == 1
