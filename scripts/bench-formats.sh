#!/usr/bin/env bash
# Benchmark: Claude Code session JSONL vs the same session in lcc's own shape.
#
# For each size (default 5000 and 50000 messages) the reference kit's generator writes one
# synthetic session twice, with the same seed: as Claude Code JSONL (--shape claude-jsonl) and
# in lcc's shape (--shape camel). `lcc compact --provider rules` (lossless) runs on both under
# /usr/bin/time -v; the table gives wall time, peak memory and the JSONL/lcc ratios (target:
# within 1.5x). Each figure is the median of --runs runs (default 3). CPU time (user + sys)
# is given too: on a shared machine it moves less than wall time.
#
# Usage: scripts/bench-formats.sh [--sizes "5000 50000"] [--runs 3] [--seed 7]
#                                 [--kit DIR] [--work DIR] [--bin PATH]
# Needs: python3, /usr/bin/time, a release build (built here unless --bin is given).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
sizes="5000 50000"
runs=3
seed=7
kit="$root/../shared/reference-kit"
work=""
bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --kit) kit="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench-formats: unknown option $1" >&2; exit 2 ;;
  esac
done

gen="$kit/gen_transcript.py"
[ -f "$gen" ] || { echo "bench-formats: $gen not found (use --kit DIR)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-formats: /usr/bin/time is needed" >&2; exit 2; }
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release --quiet)
  bin="$root/target/release/lcc"
fi
if [ -z "$work" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

# One timed run: prints "<wall seconds> <peak KiB> <cpu seconds>".
measure() {
  local input="$1" log="$work/time.log"
  /usr/bin/time -v "$bin" compact "$input" --provider rules --quiet \
    -o "$work/out" -r "$work/report.json" 2>"$log" >/dev/null
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log" |
    awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$log")
  echo "$wall $rss $cpu"
}

# Median of each figure over $runs runs: prints "<wall> <peak KiB> <cpu>".
median() {
  local input="$1" i
  for ((i = 0; i < runs; i++)); do measure "$input"; done > "$work/runs"
  local col out=""
  for col in 1 2 3; do
    out+="$(cut -d' ' -f"$col" "$work/runs" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}') "
  done
  echo "$out"
}

printf '| messages | shape | file MB | wall s | cpu s | peak MB | deduped |\n'
printf '|---:|---|---:|---:|---:|---:|---:|\n'
summary=""
for n in $sizes; do
  jsonl="$work/s$n.jsonl"
  camel="$work/s$n.json"
  python3 "$gen" --messages "$n" --seed "$seed" --shape claude-jsonl -o "$jsonl" 2>/dev/null
  python3 "$gen" --messages "$n" --seed "$seed" --shape camel -o "$camel" 2>/dev/null
  declare -A wall=() peak=() cpu=()
  for shape in claude-jsonl lcc; do
    input="$jsonl"; [ "$shape" = lcc ] && input="$camel"
    read -r w m c < <(median "$input")
    wall[$shape]=$w; peak[$shape]=$m; cpu[$shape]=$c
    deduped=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["tool_calls_deduped"])' "$work/report.json")
    mb=$(awk -v b="$(stat -c %s "$input")" 'BEGIN {printf "%.1f", b / 1048576}')
    printf '| %s | %s | %s | %.2f | %.2f | %.0f | %s |\n' "$n" "$shape" "$mb" "$w" "$c" "$(awk -v k="$m" 'BEGIN {print k / 1024}')" "$deduped"
  done
  summary+=$(awk -v n="$n" -v a="${wall[claude-jsonl]}" -v b="${wall[lcc]}" -v c="${peak[claude-jsonl]}" -v d="${peak[lcc]}" \
    -v e="${cpu[claude-jsonl]}" -v f="${cpu[lcc]}" \
    'BEGIN {printf "%s messages: JSONL/lcc wall %.2fx, cpu %.2fx, peak memory %.2fx\n", n, (b > 0 ? a / b : 0), (f > 0 ? e / f : 0), (d > 0 ? c / d : 0)}')$'\n'
done
printf '\n%s' "$summary"
