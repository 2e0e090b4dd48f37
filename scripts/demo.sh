#!/usr/bin/env bash
# `make demo`: a two-minute soak of pdns-recursor forwarding to a dnsmasq upstream
# (scenarios/pdns-recursor-dnsmasq.yaml, its phases scaled down in proportion) with the
# embedded SQLite store, 1-s ticks and 10-s leak windows, then the HTML report.
# Everything runs on 127.0.0.1 and is stopped at the end. SOAK_DEMO_DIR moves the data.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK=${SOAK:-.venv/bin/soak}
DATA=${SOAK_DEMO_DIR:-/tmp/soak-demo}
SCENARIO=scenarios/pdns-recursor-dnsmasq.yaml
DURATION=${SOAK_DEMO_DURATION:-2m}
mkdir -p "$DATA"

"$SOAK" validate "$SCENARIO"
echo "demo: a ${DURATION} soak; data in $DATA"

set +e
"$SOAK" start "$SCENARIO" --foreground --duration "$DURATION" \
  --set samplers.interval_s=1 --set leaks.window_s=10s --set leaks.interval_s=10s \
  --data-dir "$DATA"
rc=$?
set -e
# 0: every criterion passed; 1: the run completed and a criterion failed (the report
# says which). Anything else means the soak itself did not run.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
  echo "demo: the soak did not run (exit $rc)" >&2
  exit "$rc"
fi

run_id=$("$SOAK" list --data-dir "$DATA" --json | python3 -c \
  'import json, sys; print(json.load(sys.stdin)[-1]["id"])')
echo
echo "demo: summary of $run_id"
"$SOAK" status "$run_id" --data-dir "$DATA"
if [ "$rc" -eq 1 ]; then
  echo
  echo "demo: a criterion failed (exit 1). In two minutes the recursor's caches are still"
  echo "demo: filling with the miss names (each new name is kept for its one-hour TTL: see"
  echo "demo: cache_entries in the report), and the leak verdict sees that memory growth."
  echo "demo: The full scenario judges memory after a two-hour warm-up, over a day."
fi
echo
echo "demo: HTML report: $DATA/runs/$run_id/report.html"
echo "demo: also report.md and report.json beside it; or: $SOAK report $run_id --data-dir $DATA --format md"
