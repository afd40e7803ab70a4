#!/usr/bin/env python3
"""The README's command outputs, rerun from the current build.

A fenced block whose opening line is preceded by a comment

    <!-- regenerate: moeperf compare --ablate examples/deepseek-v3/gb300-optimized.json -->

gets the command's standard output (run from the repository root through sh, `moeperf` being
build/bin/moeperf, or the binary named by --moeperf). A block whose first line starts with "$ "
keeps that line and its continuation lines (the command as a reader types it). A pipe in the command (`| grep ...`) picks an
excerpt.

    scripts/readme-blocks.py            rewrite README.md in place, list the blocks that changed
    scripts/readme-blocks.py --check    exit 1 if any block differs, README untouched

The prose around the blocks quotes some of the same figures: after a rewrite, `git diff README.md`
shows which moved, and the prose is edited by hand.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!-- regenerate: (.+) -->\s*$")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--check", action="store_true", help="exit 1 if a block is stale; write nothing")
    ap.add_argument("--moeperf", default="build/bin/moeperf", help="the moeperf binary (default build/bin/moeperf)")
    ap.add_argument("--readme", default="README.md")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    exe = os.path.abspath(a.moeperf)
    if not os.access(exe, os.X_OK):
        print(f"readme-blocks: {a.moeperf}: not an executable (build first: cd build && ninja)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as bindir:
        os.symlink(exe, os.path.join(bindir, "moeperf"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        lines = open(a.readme, encoding="utf-8").read().split("\n")
        out, stale, i = [], [], 0
        while i < len(lines):
            m = MARK.match(lines[i])
            out.append(lines[i])
            i += 1
            if not m:
                continue
            if i >= len(lines) or not lines[i].startswith("```"):
                print(f"readme-blocks: {a.readme}:{i}: a regenerate comment must precede a fenced block", file=sys.stderr)
                return 2
            out.append(lines[i])  # the opening fence
            start = i + 1
            end = start
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                print(f"readme-blocks: {a.readme}:{start}: unclosed block", file=sys.stderr)
                return 2
            old = lines[start:end]
            cmd = m.group(1)
            r = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True)
            if r.returncode != 0 and "|" not in cmd:
                print(f"readme-blocks: `{cmd}` exited {r.returncode}:\n{r.stderr}", file=sys.stderr)
                return 2
            new = r.stdout.rstrip("\n").split("\n")
            if old and old[0].startswith("$ "):
                # the command as a reader types it, with its continuation lines
                keep = 1
                while keep < len(old) and old[keep - 1].rstrip().endswith("\\"):
                    keep += 1
                new = old[:keep] + new
            if new != old:
                stale.append(f"{a.readme}:{start + 1}: {cmd}")
            out.extend(new)
            out.append(lines[end])  # the closing fence
            i = end + 1
        for s in stale:
            print(("stale " if a.check else "rewrote ") + s)
        if a.check:
            return 1 if stale else 0
        if stale:
            with open(a.readme, "w", encoding="utf-8") as f:
                f.write("\n".join(out))
        return 0


if __name__ == "__main__":
    sys.exit(main())
