#!/usr/bin/env python3
"""Times `baton run` against `make -j2` on the same DAG of N trivial stages.

Usage: python3 bench/run_vs_make.py [--baton target/release/baton] [--sizes 100,1000]
       [--shapes wide,chain,layered] [--repeat 5] [--max-parallel 2]

For each shape and size it writes a workflow of inline stages running `true`
and a Makefile with the same dependencies, runs each several times in a fresh
scratch directory, and prints the median wall time of both and their ratio,
and the median CPU time (user + system, children included) of each.
Set BATON_DATABASE_URL to measure PostgreSQL instead of the embedded SQLite.

Scratch directories are removed only at the end. On ext4 without a journal
the kernel skips inodes freed in the last minute (six while their inode
table block is unwritten) when it creates a file, one lookup each. After
the runs of an earlier benchmark were deleted, a profile of `baton run`
showed 38 % of its CPU in creating its 1 000 result envelopes, about a
millisecond per file. Make creates no files, so
removing each repetition's directory before the next would charge baton
for the benchmark's own cleanup. Leave a few minutes after deleting many
files before measuring.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time


def edges(shape, n):
    """Yields (stage, [dependencies]) for stages s0..s{n-1}."""
    width = max(1, int(n ** 0.5))
    for i in range(n):
        if shape == "wide":
            yield i, []
        elif shape == "chain":
            yield i, [i - 1] if i else []
        else:  # layered: sqrt(n) layers, each stage depends on two of the layer before
            layer, pos = divmod(i, width)
            if layer == 0:
                yield i, []
            else:
                base = (layer - 1) * width
                yield i, sorted({base + pos, base + (pos + 1) % width})


def workflow(shape, n):
    lines = ["name: bench", "version: '1'", "description: d", "trigger: {source: manual}", "stages:"]
    for i, deps in edges(shape, n):
        dep = f", depends_on: [{', '.join(f's{d}' for d in deps)}]" if deps else ""
        lines.append(f"  - {{name: s{i}, kind: execute, description: d, executor: inline, script: 'true'{dep}}}")
    return "\n".join(lines) + "\n"


def makefile(shape, n):
    lines = [".PHONY: all " + " ".join(f"s{i}" for i in range(n)), "all: " + " ".join(f"s{i}" for i in range(n))]
    for i, deps in edges(shape, n):
        lines.append(f"s{i}: " + " ".join(f"s{d}" for d in deps))
        lines.append("\ttrue")
    return "\n".join(lines) + "\n"


def timed(command, cwd):
    """Wall time and CPU time (user + system, the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", default="target/release/baton")
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--shapes", default="wide,chain,layered")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-parallel", default="2")
    args = parser.parse_args()
    baton = os.path.abspath(args.baton)
    # CPU time says where a gap comes from, and moves less than wall time
    # when the machine is shared: both are medians.
    print(f"{'shape':8} {'n':>6} {'baton s':>9} {'make s':>9} {'ratio':>7} "
          f"{'baton cpu':>10} {'make cpu':>9}")
    root = tempfile.mkdtemp(prefix="baton-bench-")
    try:
        for shape in args.shapes.split(","):
            for n in map(int, args.sizes.split(",")):
                measure(args, baton, root, shape, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(args, baton, root, shape, n):
    baton_times, make_times = [], []
    for _ in range(args.repeat):
        scratch = tempfile.mkdtemp(dir=root)
        with open(os.path.join(scratch, "wf.yaml"), "w") as f:
            f.write(workflow(shape, n))
        with open(os.path.join(scratch, "Makefile"), "w") as f:
            f.write(makefile(shape, n))
        baton_times.append(timed([baton, "run", "wf.yaml", "--max-parallel", args.max_parallel], scratch))
        make_times.append(timed(["make", "-s", "-j2"], scratch))
    b = statistics.median(wall for wall, _ in baton_times)
    m = statistics.median(wall for wall, _ in make_times)
    bc = statistics.median(cpu for _, cpu in baton_times)
    mc = statistics.median(cpu for _, cpu in make_times)
    print(f"{shape:8} {n:>6} {b:>9.3f} {m:>9.3f} {b / m:>7.2f} {bc:>10.3f} {mc:>9.3f}",
          flush=True)


if __name__ == "__main__":
    main()
