#!/usr/bin/env bash
# Benchmark the token counter on text that is not ASCII: a generated openai-chat transcript
# (2 000 results of 400 random words each: Cyrillic, CJK, emoji, accented and ASCII words,
# about 8.6 MB), counted with o200k_base (the regex pre-tokenizer path) and cl100k_base.
# Reports the median wall time, the median `timing.count_ms` and the peak RSS of 3 runs.
#
#   scripts/bench-tokens.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench-out
mkdir -p "$OUT"
cargo build --release --quiet
LCC=target/release/lcc
f="$OUT/mixed-scripts.json"
[ -f "$f" ] || python3 - "$f" <<'PY'
import json, random, sys
random.seed(4)
cyr = "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"
cjk = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
def word():
    r = random.random()
    if r < 0.4:
        return "".join(random.choice(cyr) for _ in range(random.randint(2, 9)))
    if r < 0.7:
        return "".join(random.choice(cjk) for _ in range(random.randint(1, 6)))
    if r < 0.8:
        return random.choice(["😀", "👍🏽", "é", "ñ", "ü"]) + "".join(random.choice("abcdef") for _ in range(3))
    return "".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.randint(2, 8)))
msgs = [{"role": "user", "content": "fix it"}]
for i in range(2000):
    args = json.dumps({"command": f"cat f{i}"})
    msgs.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}]})
    msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": " ".join(word() for _ in range(400)) + "\n"})
json.dump({"messages": msgs}, open(sys.argv[1], "w"), ensure_ascii=False)
PY

echo "machine: $(nproc) cores; load $(cut -d' ' -f1 /proc/loadavg); $(date -u +%F)"
for model in gpt-4.1 gpt-4; do
  times=() counts=() rss=0
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" $LCC compact "$f" -q "fix it" --provider rules \
      --model "$model" -o "$OUT/mixed-out.json" -r "$OUT/mixed-report.json" --quiet >/dev/null 2>&1
    read -r t m < "$OUT/time.txt"
    times+=("$t"); (( m > rss )) && rss=$m
    counts+=("$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['timing']['count_ms'])" "$OUT/mixed-report.json")")
  done
  tokens=$(python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print(r['tokens_before'], r['tokenizer'])" "$OUT/mixed-report.json")
  printf 'mixed scripts, %-8s %6s s  count %5s ms  %5s MB  (%s)\n' "$model" \
    "$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)" \
    "$(printf '%s\n' "${counts[@]}" | sort -n | sed -n 2p)" "$((rss / 1024))" "$tokens"
done
