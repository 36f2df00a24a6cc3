#!/usr/bin/env bash
# Run every framework example offline (fake model clients, embedded store in a temp folder).
# Each example exits non-zero when the memory told in session 1 did not reach session 2.
# Set MEMORYSCOPE_EXAMPLES_LIVE=1 to let them use a real model when OPENAI_API_KEY or
# DASHSCOPE_API_KEY is set. PYTHON selects the interpreter (default: python).
set -uo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python}"
MODE="--offline"
if [ "${MEMORYSCOPE_EXAMPLES_LIVE:-0}" = "1" ]; then
    MODE=""
fi

examples=(
    autogen_classic_example.py
    autogen_agentchat_example.py
    agentscope_example.py
    ag2_example.py
    langchain_chain_example.py
    langchain_agent_example.py
)

failed=()
for example in "${examples[@]}"; do
    echo "=== $example"
    if ! "$PYTHON" "$example" $MODE; then
        failed+=("$example")
    fi
    echo
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "FAILED examples: ${failed[*]}"
    exit 1
fi
echo "all ${#examples[@]} examples passed"
