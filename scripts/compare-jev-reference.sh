#!/usr/bin/env bash
# Compare our Jev decisions with the Python release's on the same transcript and the same
# deterministic mock answers (the reference kit's mock_jev.py: every probability is a hash of
# the question id and wording, so identical questions get identical answers).
#
#   REFKIT=/tmp/refkit scripts/compare-jev-reference.sh            # 50 messages, seed 1
#   MESSAGES=200 SEED=7 EXTRA="--max-state-tokens 32000 --max-request-tokens 64000" ...
#
# REFKIT is a writable copy of the reference kit on which setup.sh has run (it holds venv/
# with lcc 1.2.0). Both tools run with --threshold 0.5 (the Python CLI defaults to 0.4).
# Known, deliberate difference: a call whose result sits in a pinned message is pinned here
# and a candidate there; such calls are listed separately, not counted as mismatches.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REFKIT=${REFKIT:-/tmp/refkit}
MESSAGES=${MESSAGES:-50}
SEED=${SEED:-1}
EXTRA=${EXTRA:-}
BIN=${LCC_BIN:-$ROOT/target/debug/lcc}
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --quiet)

WORK=$(mktemp -d)
MOCK_PID=""
cleanup() {
  if [ -n "$MOCK_PID" ]; then kill "$MOCK_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$REFKIT/gen_transcript.py" --messages "$MESSAGES" --seed "$SEED" -o "$WORK/t.json" \
  --meta "$WORK/meta.json" 2>/dev/null
Q=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['question'])" "$WORK/meta.json")

python3 "$REFKIT/mock_jev.py" --port 0 --port-file "$WORK/port" --lifetime 900 2>"$WORK/mock.log" &
MOCK_PID=$!
for _ in $(seq 50); do [ -s "$WORK/port" ] && break; sleep 0.1; done
export TYPESAFE_API_KEY=compare-key TYPESAFE_ENDPOINT="http://127.0.0.1:$(cat "$WORK/port")/v1/systemone"
export TIKTOKEN_CACHE_DIR=$REFKIT/tiktoken_cache
unset LCC_DISABLE_NETWORK || true

# shellcheck disable=SC2086
"$REFKIT/venv/bin/lcc" compact "$WORK/t.json" -q "$Q" --mode tool-calls --provider jev \
  --threshold 0.5 $EXTRA -o "$WORK/ref.json" -r "$WORK/ref-report.json" >/dev/null 2>&1
# shellcheck disable=SC2086
"$BIN" compact "$WORK/t.json" -q "$Q" --provider jev --threshold 0.5 $EXTRA \
  -o "$WORK/ours.json" -r "$WORK/ours-report.json" --quiet

python3 - "$WORK/ref-report.json" "$WORK/ours-report.json" <<'EOF'
import json, sys
ref, ours = (json.load(open(p)) for p in sys.argv[1:3])
rd = {d["id"]: d for d in ref["decisions"]}
od = {d["id"]: d for d in ours["decisions"]}
same, differ, pinned_here = 0, [], []
for cid, a in rd.items():
    b = od.get(cid)
    if b is None:
        differ.append((cid, a["decision"], "absent"))
    elif b["source"] == "pin" and a["source"] != "pin":
        pinned_here.append(cid)
    elif (a["decision"], a["keep_call"], a["keep_result"]) == (b["decision"], b["keep_call"], b["keep_result"]):
        same += 1
    else:
        differ.append((cid, a["decision"], b["decision"]))
print(f"decisions: {same} identical, {len(differ)} different, {len(pinned_here)} pinned here only")
for row in differ:
    print("  differs:", *row)
for cid in pinned_here:
    print(f"  pinned here (its result sits in a pinned message): {cid} (Python: {rd[cid]['decision']})")
for k in ("provider_used", "semantic_guarantee", "tool_calls_kept", "tool_calls_trimmed",
          "tool_calls_dropped", "requests", "state_fit_stage", "state_tokens"):
    print(f"  {k:20} python={ref.get(k)!s:10} ours={ours.get(k)}")
sys.exit(1 if differ else 0)
EOF
