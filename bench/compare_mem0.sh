#!/usr/bin/env bash
# Side by side, in one run: this project's LoCoMo benchmark and mem0 (OSS, offline, dense only) on
# the same data and metric, both on one CPU thread. Needs the reference venv described in
# ../shared/bench/README.md (torch, mem0ai, qdrant-client, ...), given as REFBENCH.
#   REFBENCH=/tmp/refbench bash bench/compare_mem0.sh ../shared/data/locomo_dev.json [OUT_DIR]
set -euo pipefail
DATA="${1:?usage: compare_mem0.sh LOCOMO_JSON [OUT_DIR]}"
OUT="${2:-bench_out}"
REFBENCH="${REFBENCH:?set REFBENCH to the reference venv}"
SHARED_BENCH="$(cd "$(dirname "$DATA")/../bench" && pwd)"
mkdir -p "$OUT"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

echo "== memoryscope-plugins (turn mode, default offline configuration)"
memoryscope-plugins bench locomo --data "$DATA" --out "$OUT/memoryscope.json"

echo "== mem0 $("$REFBENCH/bin/python" -c 'import importlib.metadata as m; print(m.version("mem0ai"))')"
MEM0_TELEMETRY=False MEM0_DIR="$OUT/mem0home" OPENAI_API_KEY=dummy HF_HUB_OFFLINE=1 \
    "$REFBENCH/bin/python" "$SHARED_BENCH/mem0_offline_bench.py" --data "$DATA" --convs 5 \
    --workdir "$OUT/mem0run" --out "$OUT/mem0.json" > /dev/null

python - "$OUT/memoryscope.json" "$OUT/mem0.json" <<'PY'
import json, sys
ours, mem0 = (json.load(open(p)) for p in sys.argv[1:3])
r5_ours, r5_mem0 = ours["recall"]["1-4"]["5"], mem0["cats_1_4"]["R@5"]
p50_ours, p50_mem0 = ours["search_ms"]["p50"], mem0["search_ms"]["p50"]
print(f"recall@5 (cats 1-4): memoryscope {r5_ours:.3f}  mem0 {r5_mem0:.3f}  ratio {r5_ours / r5_mem0:.2f}x")
print(f"search p50 ms:       memoryscope {p50_ours:.2f}  mem0 {p50_mem0:.2f}  mem0 is {p50_mem0 / p50_ours:.1f}x slower")
PY
