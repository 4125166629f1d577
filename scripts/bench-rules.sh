#!/usr/bin/env bash
# Benchmark every `--provider rules` mode on a generated 50 000-message transcript, and show
# what recoverable's disk check recovers against the transcript proxy on a generated repo.
#
#   scripts/bench-rules.sh                # 50 000 messages (seed 1), 3 runs per mode
#   MESSAGES=5000 RUNS=5 scripts/bench-rules.sh
#
# Wall time and CPU time (user + system, all threads) are medians of RUNS runs; on a shared
# machine the CPU time is the steadier figure. Peak memory is the largest max RSS. stashed is
# timed twice: into an empty stash (every removed output is a new file) and into the stash
# the previous run filled (the usual case when a session is compacted again: files that are
# already there are re-hashed, not rewritten). Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench-out
MESSAGES=${MESSAGES:-50000}
RUNS=${RUNS:-3}
KIT=${KIT:-../shared/reference-kit}
[ -d "$KIT" ] || KIT=/work/shared/reference-kit
mkdir -p "$OUT"
cargo build --release --quiet
LCC=target/release/lcc

f="$OUT/t$MESSAGES.json"
[ -f "$f" ] || python3 "$KIT/gen_transcript.py" --messages "$MESSAGES" --seed 1 -o "$f" --meta "$f.meta" >/dev/null 2>&1
q=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['question'])" "$f.meta")

median_run() { # label, setup command (run before each timed run), command...
  local label=$1 setup=$2; shift 2
  local times=() cpus=() rss=0
  for _ in $(seq "$RUNS"); do
    eval "$setup"
    /usr/bin/time -f "%e %U %S %M" -o "$OUT/time.txt" "$@" >/dev/null 2>&1
    read -r t u sy m < "$OUT/time.txt"
    times+=("$t"); cpus+=("$(echo "$u + $sy" | bc)"); (( m > rss )) && rss=$m
  done
  local mid=$(( (RUNS + 1) / 2 )) med cpu
  med=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "${mid}p")
  cpu=$(printf '%s\n' "${cpus[@]}" | sort -n | sed -n "${mid}p")
  printf '%-46s %6s s wall %6s s cpu %6s MB\n' "$label" "$med" "$cpu" "$((rss / 1024))"
}

stages() {
  python3 - "$OUT/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timing"]
print(f"    stages ms: parse {t['parse_ms']} decide {t['decide_ms']} rebuild {t['rebuild_ms']} count {t['count_ms']}"
      f" write {t['write_ms']}; kept {r['tool_calls_kept']} trimmed {r['tool_calls_trimmed']}"
      f" dropped {r['tool_calls_dropped']} deduped {r['tool_calls_deduped']} replaced {r['tool_calls_replaced']}"
      f" (stashed {r['tool_calls_stashed']}); tokens {r['tokens_before']} -> {r['tokens_after']}")
PY
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F)"
echo "input: $f ($(( $(stat -c %s "$f") / 1000000 )) MB)"
for mode in lossless recoverable lossy; do
  median_run "rules $mode" ":" \
    $LCC compact "$f" -q "$q" --provider rules --rules-mode "$mode" -o "$OUT/out.json" -r "$OUT/report.json" --quiet
  stages
done
# Each "empty stash" run gets a new directory, and nothing is deleted before the timed runs:
# right after thousands of files are deleted, creating files is several times slower on this
# machine's ext4 for a few minutes (its inode allocator skips recently freed inodes, reading
# each one's inode block; `perf` shows it as recently_deleted / find_get_block_common), and a
# deletion just before would charge that to lcc. The directories are removed at the end, so
# wait a few minutes before running this script again (cargo builds delete files too).
stash_root="$PWD/$OUT/stash-$(date +%s)"
for old in "$OUT"/stash-*; do
  [ -e "$old" ] && echo "note: $old is left from an earlier run; remove it by hand (not now: see above)"
done
run_no=0
median_run "rules stashed, empty stash" 'run_no=$((run_no + 1)); export LCC_STASH_DIR="$stash_root/$run_no"' \
  $LCC compact "$f" -q "$q" --provider rules --rules-mode stashed -o "$OUT/out.json" -r "$OUT/report.json" --quiet
stages
echo "    stash: $(find "$LCC_STASH_DIR" -type f | wc -l) files, $(du -sh "$LCC_STASH_DIR" | cut -f1)"
median_run "rules stashed, stash already filled" ":" \
  $LCC compact "$f" -q "$q" --provider rules --rules-mode stashed -o "$OUT/out.json" -r "$OUT/report.json" --quiet
median_run "rules stashed, --dry-run (decisions only)" ":" \
  $LCC compact "$f" -q "$q" --provider rules --rules-mode stashed --dry-run -r "$OUT/report.json" --quiet

# The disk check on a generated repo: the generator's virtual project is written out in its
# final state under $OUT/repo, and the session's paths point there. A read is recoverable
# from disk when the file still holds what was read (it was not edited afterwards).
REPO_MSGS=${REPO_MESSAGES:-5000}
repo="$PWD/$OUT/repo"
rm -rf "$repo"
python3 - "$KIT" "$repo" "$REPO_MSGS" "$OUT/repo.json" <<'PY'
import argparse, json, os, sys
kit, root, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, kit)
import gen_transcript as g
args = argparse.Namespace(messages=n, seed=1, root=root, codex_rate=0.25, reminder_rate=0.1,
                          question_rate=0.25, edge_cases=0.0, allow_pending=False)
s = g.Session(args)
msgs = s.build()
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"messages": [g.to_camel(m) for m in msgs]}, fh, ensure_ascii=False)
with open(out + ".meta", "w", encoding="utf-8") as fh:
    json.dump({"question": s.last_goal or "get familiar with the repository"}, fh)
for rel in s.project.files:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(s.project.text(rel))
PY
rq=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['question'])" "$OUT/repo.json.meta")
echo "disk check on a generated repo ($REPO_MSGS messages, files in their final state under $OUT/repo):"
for how in proxy disk; do
  flags=()
  [ "$how" = disk ] && flags=(--workspace-root "$repo")
  /usr/bin/time -f "%e" -o "$OUT/time.txt" \
    $LCC compact "$OUT/repo.json" -q "$rq" --provider rules --rules-mode recoverable "${flags[@]}" \
    -o "$OUT/out.json" -r "$OUT/report.json" --quiet
  python3 - "$OUT/report.json" "$how" "$(cat "$OUT/time.txt")" <<'PY'
import collections, json, sys
r = json.load(open(sys.argv[1]))
c = collections.Counter(d["reason"] for d in r["decisions"])
reads = {k: v for k, v in c.items() if k.startswith(("replace_disk", "keep_disk", "recoverable_file", "file_written"))}
print(f"  {sys.argv[2]:<5} ({r['recoverability_check']}, {sys.argv[3]} s): replaced {r['tool_calls_replaced']},"
      f" deduped {r['tool_calls_deduped']}, tokens {r['tokens_before']} -> {r['tokens_after']}; {dict(sorted(reads.items()))}")
PY
done
rm -rf "$stash_root"
