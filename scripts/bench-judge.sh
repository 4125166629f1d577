#!/usr/bin/env bash
# Judge-path concurrency benchmark.
#
# A transcript of 80 call/result pairs is judged with --batch-size 2 (40 requests) against the
# reference kit's mock System One server answering every request after SLOW_MS (default 300)
# ms. With W workers the ideal wall time is ceil(40 / W) x SLOW_MS; the rest is our own time
# (start-up, parsing, fitting, counting, HTTP, rebuild, report).
#
#   scripts/bench-judge.sh                  # --max-workers 1, 4, 8; 3 runs each, median
#   WORKERS="2 8" RUNS=5 SLOW_MS=300 scripts/bench-judge.sh
#
# Needs python3 and the reference kit (LCC_REFERENCE_KIT, default /work/shared/reference-kit,
# only mock_jev.py is used). Builds the release binary. Everything runs on 127.0.0.1.
#
# Two properties of the kit's mock (Python's http.server) are measured away, because they are
# the mock's latency, not ours: it writes each response as two sends (headers, then body) with
# Nagle's algorithm on, so on a kept-alive connection the client's delayed ACK holds the body
# back ~40 ms per request; and its listen backlog is 5, so with 8 connections opened at once
# one SYN is dropped and that request waits for another to finish. The mock is therefore
# started with TCP_NODELAY on its connections and a backlog of 128 (its code unchanged: the
# standard library's own switches). MOCK_AS_SHIPPED=1 runs it exactly as shipped.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIT=${LCC_REFERENCE_KIT:-/work/shared/reference-kit}
SLOW_MS=${SLOW_MS:-300}
WORKERS=${WORKERS:-"1 4 8"}
RUNS=${RUNS:-3}
PAIRS=80
BATCH=2
REQUESTS=$(( (PAIRS + BATCH - 1) / BATCH ))

(cd "$ROOT" && cargo build --release --quiet)
BIN=$ROOT/target/release/lcc

WORK=$(mktemp -d)
MOCK_PID=""
cleanup() {
  if [ -n "$MOCK_PID" ]; then kill "$MOCK_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 - "$PAIRS" > "$WORK/t.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
msgs = [{"role": "user", "text": "Fix the failing parser test in tests/test_parser.py."}]
for i in range(n):
    cid = f"toolu_{i:04d}"
    msgs.append({"role": "assistant", "text": f"Step {i}: looking at module {i % 17}.",
                 "toolUses": [{"tool_use_id": cid, "tool": "Read" if i % 2 else "Bash",
                               "input": {"path": f"src/mod_{i % 17}.py"} if i % 2 else {"command": f"pytest -q tests/test_{i % 23}.py"}}]})
    body = "".join(f"line {j} of output {i}: value={i * j}\n" for j in range(40))
    msgs.append({"role": "user", "toolResults": [{"tool_use_id": cid, "text": body}]})
msgs.append({"role": "assistant", "text": "Done for now."})
json.dump({"messages": msgs}, sys.stdout, indent=1)
EOF

if [ "${MOCK_AS_SHIPPED:-0}" = 1 ]; then NODELAY=False BACKLOG=5; else NODELAY=True BACKLOG=128; fi
python3 -c "
import sys, http.server, socketserver
http.server.BaseHTTPRequestHandler.disable_nagle_algorithm = $NODELAY
socketserver.TCPServer.request_queue_size = $BACKLOG
sys.path.insert(0, sys.argv[1])
import mock_jev
sys.exit(mock_jev.main(sys.argv[2:]))" "$KIT" --port 0 --port-file "$WORK/port" --slow-ms "$SLOW_MS" \
  --lifetime 900 2>"$WORK/mock.log" &
MOCK_PID=$!
for _ in $(seq 50); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT=$(cat "$WORK/port")

export TYPESAFE_API_KEY=bench-key TYPESAFE_ENDPOINT="http://127.0.0.1:$PORT/v1/systemone"
unset LCC_DISABLE_NETWORK || true

echo "lcc judge benchmark: $PAIRS pairs, --batch-size $BATCH ($REQUESTS requests), mock answers after ${SLOW_MS} ms (mock TCP_NODELAY=$NODELAY, backlog $BACKLOG), median of $RUNS runs"
printf '%-14s %10s %10s %12s %10s\n' "--max-workers" "wall (s)" "ideal (s)" "own time (s)" "requests"
for w in $WORKERS; do
  times=()
  for r in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    "$BIN" compact "$WORK/t.json" -q "fix the failing parser test" --provider jev --threshold 0.5 \
      --batch-size "$BATCH" --preserve-recent 1 --max-workers "$w" --dry-run --quiet \
      -r "$WORK/report-$w.json"
    t1=$(date +%s.%N)
    times+=("$(python3 -c "print(f'{$t1 - $t0:.3f}')")")
  done
  python3 - "$w" "$SLOW_MS" "$REQUESTS" "$WORK/report-$w.json" "${times[@]}" <<'EOF'
import json, math, statistics, sys
w, slow_ms, requests, report = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
times = [float(t) for t in sys.argv[5:]]
r = json.load(open(report))
assert r["requests"] == requests, r["requests"]
assert r["semantic_guarantee"] == "judged", (r["semantic_guarantee"], r["warnings"])
wall = statistics.median(times)
ideal = math.ceil(requests / w) * slow_ms / 1000
print(f"{w:<14} {wall:>10.3f} {ideal:>10.2f} {wall - ideal:>12.3f} {r['requests']:>10}")
EOF
done
