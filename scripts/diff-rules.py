#!/usr/bin/env python3
"""Differential run: `lcc compact --provider rules` (this crate) against the Python release.

For each seed and rules mode, generate a transcript with the reference kit's generator, run
both tools on it with the same question and defaults, and compare every call's decision by id:
the decision kind, the reason code (the id after `superseded_by_later_call:` is compared too),
the note and `kept_at`. Differences are grouped; the known, deliberate ones are labelled:

  pin_boundary      A call whose result sits in a pinned message: we pin the pair (a pinned
                    message is never changed); Python judges the call and can drop it with
                    the result still inside the pinned turn.
  pointer_cwd       A file pointer for an absolute path: Python appends `(cwd <dir>)` when the
                    call has one; we name the directory only for relative paths.
  dotdot_reason     A `..` path under the disk check: Python says `keep_disk_dotdot`, we say
                    `keep_disk_outside_root` (the seed's reason list).
  stash_note        stashed mode: the same result stashed under the same hash, but our note
                    also counts lines (`[removed: N lines, M tokens · lcc recall <id>]`).
  nonstring_text    stashed mode: a result whose `text` is not a string (a list of blocks, an
                    object) is stashed as its compact JSON; Python escapes non-ASCII there
                    (`json.dumps` defaults), we keep it, so the bytes and the id differ.
  stash_note_longer stashed mode: a short result Python stashes and we keep whole, because our
                    note (with its line count) would not be shorter than the result (the
                    result is shorter than Python's note plus the ` N lines,` we add).

Anything else is printed as UNEXPLAINED and the script exits 1.

Setup (not run in CI):
    cp -r /work/shared/reference-kit /tmp/refkit-rules && bash /tmp/refkit-rules/setup.sh
    cargo build --release
    python3 scripts/diff-rules.py --seeds 1-5 --messages 500
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def run(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")


def key(d: dict) -> tuple:
    return (d["decision"], d["reason"], d.get("note"), d.get("kept_at"))


def classify(py: dict | None, rs: dict | None, nonstring: set[str] = frozenset()) -> str:
    if py is not None and rs is not None:
        if rs.get("source") == "pin" and py.get("source") != "pin":
            return "pin_boundary"
        if (py["decision"], rs["decision"]) == ("replace", "replace"):
            pn, rn = py.get("note") or "", rs.get("note") or ""
            if " (cwd " in pn and pn.replace(pn[pn.index(" (cwd "):pn.index(")", pn.index(" (cwd ")) + 1], "") == rn:
                return "pointer_cwd"
        if py["reason"] == "keep_disk_dotdot" and rs["reason"] == "keep_disk_outside_root":
            return "dotdot_reason"
        if py["reason"].startswith("stashed:") and py["id"] in nonstring:
            return "nonstring_text"
        if (py["decision"], py["reason"]) == (rs["decision"], rs["reason"]) and py["reason"].startswith("stashed:"):
            pid = (py.get("note") or "").rsplit(" ", 1)[-1]
            rid = (rs.get("note") or "").rsplit(" ", 1)[-1]
            if pid == rid:
                return "stash_note"
        if (py["reason"].startswith("stashed:") and rs["reason"] == "short_result_kept_whole"
                and py["chars"] - py["chars_after"] < len(" 9999 lines,")):
            return "stash_note_longer"
    return "UNEXPLAINED"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--refkit", default="/tmp/refkit-rules", help="reference kit with venv/ set up")
    ap.add_argument("--lcc", default=str(ROOT / "target" / "release" / "lcc"))
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--messages", type=int, default=500)
    ap.add_argument("--modes", default="lossless,recoverable,lossy")
    ap.add_argument("--gen-args", default="", help="extra generator arguments, e.g. '--codex-rate 1'")
    ap.add_argument("--workdir", default=None, help="keep inputs/outputs here (default: a temp dir)")
    ap.add_argument("--examples", type=int, default=3, help="example ids shown per difference")
    args = ap.parse_args()

    refkit = Path(args.refkit)
    py_lcc = refkit / "venv" / "bin" / "lcc"
    if not py_lcc.exists():
        sys.exit(f"{py_lcc} not found: copy the reference kit and run its setup.sh first")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="diff-rules-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(refkit / "tiktoken_cache"),
               LCC_DISABLE_NETWORK="1", LCC_STASH_DIR=str(work / "stash"))
    env.pop("TYPESAFE_API_KEY", None)

    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    unexplained = 0
    for seed in parse_seeds(args.seeds):
        transcript = work / f"t{args.messages}-s{seed}.json"
        meta = work / f"t{args.messages}-s{seed}.meta.json"
        run([sys.executable, str(refkit / "gen_transcript.py"), "--messages", str(args.messages),
             "--seed", str(seed), "-o", str(transcript), "--meta", str(meta), *args.gen_args.split()], env)
        question = json.loads(meta.read_text())["question"]
        msgs = json.loads(transcript.read_text())
        msgs = msgs["messages"] if isinstance(msgs, dict) else msgs
        nonstring = {r.get("tool_use_id") for m in msgs for r in (m.get("toolResults") or [])
                     if not isinstance(r.get("text"), (str, type(None)))}
        for mode in args.modes.split(","):
            outs = {}
            for tool, exe, extra in (("py", str(py_lcc), ["--mode", "tool-calls"]), ("rs", args.lcc, ["--quiet"])):
                report = work / f"{tool}-s{seed}-{mode}.report.json"
                run([exe, "compact", str(transcript), "-q", question, *extra, "--provider", "rules",
                     "--rules-mode", mode, "-o", str(work / f"{tool}-s{seed}-{mode}.out.json"),
                     "-r", str(report)], env)
                outs[tool] = {d["id"]: d for d in json.loads(report.read_text())["decisions"]}
            py, rs = outs["py"], outs["rs"]
            groups: dict[tuple, list[str]] = collections.defaultdict(list)
            same = 0
            for cid in sorted(set(py) | set(rs)):
                a, b = py.get(cid), rs.get(cid)
                if a is not None and b is not None and key(a) == key(b):
                    same += 1
                    continue
                label = classify(a, b, nonstring)
                g = (label, a and (a["decision"], a["reason"].split(":")[0]),
                     b and (b["decision"], b["reason"].split(":")[0]))
                groups[g].append(cid)
            print(f"seed {seed} {mode:<11} calls {len(py):>4} same {same:>4} differ {sum(map(len, groups.values()))}")
            for (label, pa, rb), ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
                totals[mode][label] += len(ids)
                if label == "UNEXPLAINED":
                    unexplained += len(ids)
                print(f"    {len(ids):>4} {label:<12} python {pa} -> ours {rb}   e.g. {', '.join(ids[:args.examples])}")
            totals[mode]["same"] += same
    print("\ntotals:")
    for mode, c in totals.items():
        print(f"  {mode:<11} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print(f"work dir: {work}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
