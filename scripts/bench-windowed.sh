#!/usr/bin/env bash
# Benchmark the windowed judge stage end to end against the reference kit's mock Jev server
# with 300 ms of latency per request: generated sessions of 500, 5 000 and 50 000 messages
# (seed 7), default flags and --max-workers 4.
#
#   REFKIT=/tmp/refkit-win scripts/bench-windowed.sh          # SIZES="500 5000 50000"
#   SIZES=5000 EXTRA="--batch-size 8" scripts/bench-windowed.sh
#
# REFKIT is a writable copy of the reference kit. When `bash setup.sh` has run there (venv/
# with tiktoken, tiktoken_cache/), every request body the mock received is counted exactly
# with o200k_base: the largest state and request, and the input tokens really sent, checked
# against the budgets (--max-state-tokens 25000, --max-request-tokens 30000). Without it
# those columns say "-".
#
# Columns: exit code, fit stage, windows, requests, input tokens as the report gives them
# (the mock's usage.input_tokens, which it estimates as body bytes / 2.6), input tokens
# counted exactly, largest state and request (exact), wall time, and our own CPU time
# (user + system of the lcc process: waiting for the server costs none), peak memory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REFKIT=${REFKIT:-/tmp/refkit-win}
SIZES=${SIZES:-"500 5000 50000"}
EXTRA=${EXTRA:-}
SLOW_MS=${SLOW_MS:-300}
cd "$ROOT"
cargo build --release --quiet
BIN=$ROOT/target/release/lcc

WORK=$(mktemp -d)
MOCK_PID=""
cleanup() {
  if [ -n "$MOCK_PID" ]; then kill "$MOCK_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

PY=python3
if [ -x "$REFKIT/venv/bin/python" ] && [ -d "$REFKIT/tiktoken_cache" ]; then
  PY=$REFKIT/venv/bin/python
  export TIKTOKEN_CACHE_DIR=$REFKIT/tiktoken_cache
fi

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F); mock latency ${SLOW_MS} ms; flags: --max-workers 4 ${EXTRA}"
printf '| %-8s | %-4s | %-8s | %7s | %8s | %14s | %14s | %9s | %11s | %7s | %8s | %6s |\n' \
  messages exit stage windows requests "input (report)" "input (exact)" "max state" "max request" wall "our CPU" "RSS MB"
printf '|%s|\n' "----------|------|----------|---------|----------|----------------|----------------|-----------|-------------|---------|----------|--------"
for n in $SIZES; do
  t="$REFKIT/t$n.json"
  if [ ! -f "$t" ]; then
    python3 "$REFKIT/gen_transcript.py" --messages "$n" --seed 7 -o "$t" --meta "$t.meta" 2>/dev/null
  fi
  meta="$t.meta"; [ -f "$meta" ] || meta="$REFKIT/t$n.meta.json"
  q=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['question'])" "$meta")
  rm -rf "$WORK/dump" "$WORK/port"
  python3 "$REFKIT/mock_jev.py" --port 0 --port-file "$WORK/port" --slow-ms "$SLOW_MS" \
    --dump-dir "$WORK/dump" --lifetime 3600 2>"$WORK/mock.log" &
  MOCK_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  set +e
  # shellcheck disable=SC2086
  TYPESAFE_API_KEY=bench-key TYPESAFE_ENDPOINT="http://127.0.0.1:$(cat "$WORK/port")/v1/systemone" \
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" \
    env -u LCC_DISABLE_NETWORK "$BIN" compact "$t" -q "$q" --provider jev --max-workers 4 $EXTRA \
    -o "$WORK/out.json" -r "$WORK/report.json" --quiet 2>"$WORK/err"
  code=$?
  set -e
  kill "$MOCK_PID" 2>/dev/null || true
  wait "$MOCK_PID" 2>/dev/null || true
  MOCK_PID=""
  read -r wall user sys rss < "$WORK/time"
  "$PY" - "$WORK/report.json" "$WORK/dump" "$n" "$code" "$wall" "$user" "$sys" "$rss" <<'EOF'
import json, os, sys
report, dump, n, code, wall, user, sys_t, rss = sys.argv[1:9]
try:
    r = json.load(open(report))
except (OSError, ValueError):
    r = {}
try:
    import tiktoken
    enc = tiktoken.get_encoding("o200k_base")
except Exception:
    enc = None
exact = max_state = max_req = "-"
if enc is not None and os.path.isdir(dump):
    total, ms, mr = 0, 0, 0
    for name in sorted(os.listdir(dump)):
        if not name.startswith("req-"):
            continue
        body = open(os.path.join(dump, name), encoding="utf-8").read()
        start = body.index('"state": ') + len('"state": ')
        end = body.rindex(', "questions": {')
        b, s = len(enc.encode_ordinary(body)), len(enc.encode_ordinary(body[start:end]))
        total += b
        ms, mr = max(ms, s), max(mr, b)
    exact, max_state, max_req = f"{total:,}", f"{ms:,}", f"{mr:,}"
    assert ms <= 25000 and mr <= 30000, f"over budget: state {ms}, request {mr}"
judged = [d for d in r.get("decisions", []) if d.get("source") not in ("pin",)]
if r:
    assert all(d["source"] == "jev" for d in judged), "a candidate without a judge decision"
cpu = float(user) + float(sys_t)
print(f"| {int(n):>8,} | {code:>4} | {r.get('state_fit_stage', '-'):<8} | {r.get('state_windows', 0):>7,} | "
      f"{r.get('requests', 0):>8,} | {r.get('input_tokens_sent', 0):>14,} | {exact:>14} | {max_state:>9} | "
      f"{max_req:>11} | {float(wall):>6.1f}s | {cpu:>7.2f}s | {int(rss) // 1024:>6} |")
EOF
done
