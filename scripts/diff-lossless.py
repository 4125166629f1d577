#!/usr/bin/env python3
"""Differential check: `lcc compact --provider rules --rules-mode lossless` against the Python
reference (local-context-compiler 1.2.0) on generated transcripts. Not run in CI.

Usage: scripts/diff-lossless.py --ref-lcc /path/to/venv/bin/lcc [--lcc target/release/lcc]
       [--seeds 1 2 3 4 5] [--messages 500]

Prints, per seed, how many candidate decisions agree, and lists each difference with the
reason it is expected (our pinning rule) or flags it as unexplained (exit 1).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KIT = os.path.join(HERE, "..", "..", "shared", "reference-kit")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r


def decisions(report):
    return {d["id"]: d for d in report["decisions"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref-lcc", required=True)
    ap.add_argument("--lcc", default=os.path.join(HERE, "..", "target", "release", "lcc"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--messages", type=int, default=500)
    ap.add_argument("--rules-mode", default="lossless")
    a = ap.parse_args()
    unexplained = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in a.seeds:
            t = os.path.join(tmp, f"t{seed}.json")
            meta = t + ".meta.json"
            run([sys.executable, os.path.join(KIT, "gen_transcript.py"), "--messages", str(a.messages),
                 "--seed", str(seed), "-o", t, "--meta", meta])
            q = json.load(open(meta))["question"]
            ours, theirs = t + ".ours.json", t + ".ref.json"
            run([a.lcc, "compact", t, "-q", q, "--provider", "rules", "--rules-mode", a.rules_mode,
                 "--threshold", "0.5", "-o", t + ".out", "-r", ours, "--quiet"])
            run([a.ref_lcc, "compact", t, "-q", q, "--mode", "tool-calls", "--provider", "rules",
                 "--rules-mode", a.rules_mode, "--threshold", "0.5", "-o", t + ".refout", "-r", theirs])
            o, r = json.load(open(ours)), json.load(open(theirs))
            od, rd = decisions(o), decisions(r)
            same, diffs = 0, []
            for cid in sorted(set(od) | set(rd)):
                x, y = od.get(cid), rd.get(cid)
                kx = (x["decision"], x.get("kept_at"), x.get("note")) if x else None
                ky = (y["decision"], y.get("kept_at"), y.get("note")) if y else None
                if kx == ky and (x["source"] == "pin") == (y["source"] == "pin"):
                    same += 1
                    continue
                why = "UNEXPLAINED"
                if x and y and x["source"] == "pin" and y["source"] != "pin":
                    why = "ours pins the pair: its result sits in a pinned message (DESIGN.md: pinned messages are never changed)"
                elif x and y and x["decision"] == "keep" and y["decision"] == "dedupe":
                    tgt = od.get(y.get("kept_at"))
                    if tgt is None:
                        why = "UNEXPLAINED"
                diffs.append((cid, kx, ky, x and x["source"], y and y["source"], why))
            print(f"seed {seed}: {len(rd)} reference decisions, {len(od)} ours, {same} identical, {len(diffs)} different")
            for d in diffs:
                print("   ", d)
                if d[-1] == "UNEXPLAINED":
                    unexplained += 1
            print(f"    tokens ours {o['tokens_before']} -> {o['tokens_after']}; reduction ours {o['reduction_ratio']:.4f} ref {r['reduction_ratio']:.4f}")
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()
