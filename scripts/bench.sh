#!/usr/bin/env bash
# Benchmark `lcc compact --provider rules` (lossless) on generated transcripts of 5 000 and
# 50 000 messages, and the floor (parse + write back with nothing decided).
#
#   scripts/bench.sh                 # ours only
#   REF_LCC=/path/venv/bin/lcc TIKTOKEN_CACHE_DIR=... scripts/bench.sh   # + Python at 5 000
#   REF_50K=1 ...                    # + Python at 50 000 (about 4 minutes)
#
# Wall time is the median of 3 runs; peak memory is the largest max RSS seen.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench-out
mkdir -p "$OUT"
KIT=../shared/reference-kit
cargo build --release --quiet
LCC=target/release/lcc

for n in 5000 50000; do
  f="$OUT/t$n.json"
  [ -f "$f" ] || python3 "$KIT/gen_transcript.py" --messages "$n" --seed 1 -o "$f" --meta "$f.meta" >/dev/null 2>&1
done

median_run() { # label, command...
  local label=$1; shift
  local times=() rss=0
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$@" >/dev/null 2>&1
    read -r t m < "$OUT/time.txt"
    times+=("$t"); (( m > rss )) && rss=$m
  done
  local med
  med=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  printf '%-44s %8s s %8s MB\n' "$label" "$med" "$((rss / 1024))"
}

echo "machine: $(nproc) cores; $(date -u +%F)"
for n in 5000 50000; do
  f="$OUT/t$n.json"
  size=$(( $(stat -c %s "$f") / 1000000 ))
  q=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['question'])" "$f.meta")
  median_run "lcc rules lossless, $n msgs (${size} MB)" \
    $LCC compact "$f" -q "$q" --provider rules -o "$OUT/out.json" -r "$OUT/report.json" --quiet
  python3 - "$OUT/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timing"]
print(f"    stages ms: parse {t['parse_ms']} decide {t['decide_ms']} rebuild {t['rebuild_ms']} count {t['count_ms']} write {t['write_ms']}; deduped {r['tool_calls_deduped']}, tokens {r['tokens_before']} -> {r['tokens_after']}")
PY
  if [ -n "${REF_LCC:-}" ] && { [ "$n" = 5000 ] || [ -n "${REF_50K:-}" ]; }; then
    median_run "python lcc 1.2.0 rules lossless, $n msgs" \
      "$REF_LCC" compact "$f" -q "$q" --mode tool-calls --provider rules --threshold 0.5 -o "$OUT/ref.json" -r "$OUT/ref-report.json"
  fi
done
echo "floor (50 000 msgs):"
cargo bench --quiet --bench floor -- "$OUT/t50000.json"
