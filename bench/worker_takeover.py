"""How long a SIGKILLed worker's user waits: from the SIGKILL to the first consolidation of that user
by another worker (issue 29 item 4; docs/consolidation.md).

Two `memoryscope-plugins worker` processes over one throw-away PostgreSQL, the model faked at the
HTTP boundary (tests/support/worker_fleet.py). The first worker is held mid-step by the fake model
(it holds the user's lease and renews it); the second worker runs meanwhile (and must not take the
user over while the first is alive); then the first is SIGKILLed, the user says something new, and
the time until every message of the user is consolidated is measured. Settings are the defaults
(`lease_ttl_s`, `every_seconds`) unless given.

    python bench/worker_takeover.py [--trials 5] [--lease-ttl 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memoryscope_plugins.bench.throwaway_postgres import postgres_server  # noqa: E402
from memoryscope_plugins.settings import ConsolidationSettings  # noqa: E402
from tests.support.consolidation_helpers import Brain  # noqa: E402
from tests.support.fakes.fake_model_server import FakeModelServer  # noqa: E402
from tests.support.worker_fleet import consolidated, fleet, requests_of, say  # noqa: E402


def one_trial(pg, number: int, folder: Path, lease_ttl_s: float | None, every_seconds: float, warm_s: float) -> dict:
    """One takeover; returns the seconds from the SIGKILL to the user's messages all consolidated."""
    with FakeModelServer() as server, fleet(folder, pg.create_database(f"takeover_{number}"), server, Brain(),
                                            lease_ttl_s=lease_ttl_s, every_seconds=every_seconds) as f:
        say(f.app, 1, "I'm vegetarian.")
        f.first.start()
        if not f.gate.waiting.wait(120):
            raise RuntimeError("the first worker never reached the model: " + f.first.log_text()[-2000:])
        f.second.start()
        # the second worker is up and sweeping while the first renews its lease; a random part so the
        # SIGKILL falls anywhere between two renewals
        time.sleep(warm_s + random.uniform(0, 4))
        while_alive = requests_of(server, f.second.key)
        f.first.signal(signal.SIGKILL)
        killed = time.monotonic()
        f.gate.release.set()
        say(f.app, 2, "I moved to Lisbon last month.")
        while not consolidated(f.app):
            if time.monotonic() - killed > 300:
                raise RuntimeError("no takeover within 300 s: " + f.second.log_text()[-2000:])
            time.sleep(0.05)
        return {"seconds": round(time.monotonic() - killed, 2), "second_worker_calls_while_first_alive": while_alive,
                "second_worker_calls": requests_of(server, f.second.key)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--lease-ttl", type=float, default=None, help="consolidation.lease_ttl_s (default: the "
                        f"setting's default, {ConsolidationSettings().lease_ttl_s:g} s)")
    parser.add_argument("--every-seconds", type=float, default=ConsolidationSettings().every_seconds,
                        help="the workers' sweep interval (default: the setting's default)")
    parser.add_argument("--warm", type=float, default=12.0, help="seconds both workers run before the SIGKILL "
                        "(plus 0-4 s at random); longer than the TTL shows the heartbeat keeps the lease")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    trials = []
    with postgres_server() as pg, tempfile.TemporaryDirectory(prefix="takeover-") as tmp:
        for number in range(args.trials):
            folder = Path(tmp) / str(number)
            folder.mkdir()
            trials.append(one_trial(pg, number, folder, args.lease_ttl, args.every_seconds, args.warm))
            print(f"trial {number + 1}: {trials[-1]}", file=sys.stderr)
    seconds = [t["seconds"] for t in trials]
    summary = {"lease_ttl_s": args.lease_ttl or ConsolidationSettings().lease_ttl_s,
               "every_seconds": args.every_seconds, "trials": trials, "min_s": min(seconds),
               "median_s": round(statistics.median(seconds), 2), "max_s": max(seconds)}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"SIGKILL -> first consolidation by another worker (lease_ttl_s {summary['lease_ttl_s']:g}, "
              f"every_seconds {args.every_seconds:g}): min {summary['min_s']} s, median {summary['median_s']} s, "
              f"max {summary['max_s']} s over {len(seconds)} trials")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
