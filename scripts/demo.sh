#!/usr/bin/env bash
# `make demo`: a 90-second soak of the reference Go DNS server (testbed/refdns, built by
# scripts/build-refdns.sh) forwarding to a dnsmasq upstream, with its SQLite query log on
# (scenarios/refdns-demo.yaml): goroutines, heap, query-log rows and drops, API latency,
# anonymous and file-backed RSS every second, leak verdicts on 10-s windows, the report.
#
# `make demo-leak` (SOAK_DEMO_LEAK=1): the same server started with -leak (a parked
# goroutine holding 16 KiB per unique forwarded name) and a local Alertmanager as the
# run's receiver; it ends with the `growing` verdicts and the alert Alertmanager holds.
#
# Everything runs on 127.0.0.1 and is stopped at the end. Each demo keeps its data in a
# directory of its own (printed at the start; SOAK_DEMO_DIR names one instead), and
# summarises the run it started, by that run's id: two demos at once do not mix.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK=${SOAK:-.venv/bin/soak}
DATA=${SOAK_DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/soak-demo.XXXXXX")}
SCENARIO=scenarios/refdns-demo.yaml
LEAK=${SOAK_DEMO_LEAK:-0}
mkdir -p "$DATA"

bash scripts/build-refdns.sh
"$SOAK" validate "$SCENARIO"

sets=()
am_url=""
if [ "$LEAK" = 1 ]; then
  am_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  am_dir=$(mktemp -d)
  printf 'route:\n  receiver: "null"\n  group_wait: 1s\nreceivers:\n  - name: "null"\n' >"$am_dir/am.yml"
  prometheus-alertmanager --config.file="$am_dir/am.yml" --storage.path="$am_dir" \
    --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$DATA/alertmanager.log" 2>&1 &
  am_pid=$!
  trap 'kill "$am_pid" 2>/dev/null; wait "$am_pid" 2>/dev/null; rm -rf "$am_dir"' EXIT
  am_url="http://127.0.0.1:$am_port"
  for _ in $(seq 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('$am_url/-/ready', timeout=1)" 2>/dev/null && break
    sleep 0.2
  done
  sets=(--set target.argv.9=-leak=true --set target.version=format-2-leak
        --set "alerting.alertmanagers=[$am_url]" --set alerting.resend_interval_s=5s)
  echo "demo: refdns with -leak; alerts go to the Alertmanager at $am_url"
fi

echo "demo: a 90-second soak of testbed/refdns; data in $DATA"
result=$(mktemp "${TMPDIR:-/tmp}/soak-demo-result.XXXXXX")
set +e
# --json: the ended run's status (its id among it) on stdout; the live view is on stderr.
"$SOAK" start "$SCENARIO" --foreground --json --data-dir "$DATA" "${sets[@]}" >"$result"
rc=$?
set -e
# 0: every criterion passed; 1: the run completed and a criterion failed (the report
# says which). Anything else means the soak itself did not run.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
  echo "demo: the soak did not run (exit $rc)" >&2
  rm -f "$result"
  exit "$rc"
fi

run_id=$(python3 -c 'import json, sys; t = open(sys.argv[1]).read(); print(json.loads(t[t.index("{"):])["id"])' "$result")
rm -f "$result"
echo
echo "demo: summary of $run_id"
# It exits by the run's outcome (1 for a failed criterion): the demo says so below.
"$SOAK" status "$run_id" --data-dir "$DATA" || true
if [ -n "$am_url" ]; then
  echo
  echo "demo: what Alertmanager holds ($am_url/api/v2/alerts):"
  python3 - "$am_url" <<'EOF'
import json, sys, urllib.request
url = sys.argv[1] + "/api/v2/alerts?filter=alertname%3DSoakLeakGrowing"
for a in json.load(urllib.request.urlopen(url, timeout=5)):
    print(f"  {a['labels'].get('resource')}: {a['annotations'].get('summary')} (since {a['startsAt']})")
    if a["annotations"].get("culprit"):
        print(f"    culprit: {a['annotations']['culprit']}; {a['annotations'].get('projection')}")
EOF
fi
echo
echo "demo: what grew (from the report):"
python3 - "$DATA/runs/$run_id/report.json" <<'EOF'
import json, sys
grew = json.load(open(sys.argv[1])).get("what_grew") or {}
for resource, said in (grew.get("culprits") or {}).items():
    print(f"  {resource} growing: {said.get('culprit') or 'no culprit named'}; {said.get('projection')}")
for title, key in (("goroutine stack", "goroutine_stacks"), ("heap function", "heap_functions")):
    for g in (grew.get(key) or [])[:1]:
        print(f"  top growing {title}: {g['name']} ({g['site']}) {g['start']:.0f} -> {g['end']:.0f}")
for m in (grew.get("mappings") or [])[:3]:
    print(f"  mapping {m['name']}: {m['start'] / 2**20:.1f} -> {m['end'] / 2**20:.1f} MiB")
EOF
if [ "$rc" -eq 1 ] && [ "$LEAK" != 1 ]; then
  echo
  echo "demo: a criterion failed (exit 1): the report's criteria table says which."
fi
echo
echo "demo: HTML report: $DATA/runs/$run_id/report.html"
echo "demo: also report.md and report.json beside it; or: $SOAK report $run_id --data-dir $DATA --format md"
if [ "$LEAK" = 1 ] && [ "$rc" -eq 0 ]; then
  echo "demo: refdns ran with -leak and every criterion passed: the leak was not caught" >&2
  exit 1
fi
