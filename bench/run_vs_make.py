#!/usr/bin/env python3
"""Times `baton run` against `make -j2` on the same DAG of N trivial stages.

Usage: python3 bench/run_vs_make.py [--baton target/release/baton] [--sizes 100,1000]
       [--shapes wide,chain,layered] [--repeat 5] [--max-parallel 2] [--scratch DIR]

For each shape and size it writes a workflow of inline stages running `true`
and a Makefile with the same dependencies and prints the medians of several
repetitions: make's wall time; baton's in a fresh directory ("new", which
creates the store first, as a project's first run does) and in a directory
whose store exists ("again", as every later run), each with its ratio to
make; the CPU time (user + system, children included) of baton's new runs
and of make; the CPU the rest of the machine used while baton's new runs
ran ("other cpu": PostgreSQL's server when measuring it, else background
work); baton's peak resident set; what creating a file cost just before the
row; and the share of the machine's time the hypervisor took ("steal"). Set
BATON_DATABASE_URL to measure PostgreSQL instead of the embedded SQLite (then
"new" and "again" differ only in the workspace).

On a virtual machine whose host is busy, the hypervisor runs other guests on
this one's cores now and then; a command's wall time then grows by whatever
it lost. A repetition (make, new, again) in which any of the three lost more
than --max-steal percent of the machine's time is run again, up to --repeat
extra times in a row; the steal column says what the kept ones lost.

Scratch directories are removed only at the end. On ext4 without a journal
the kernel skips inodes freed in the last minute (six while their inode
table block is unwritten) when it creates a file, one lookup each: after a
few thousand files were deleted, creating one costs ten or more times what
it does otherwise, for minutes. Make creates no files and baton creates one
result envelope per stage, so each row waits (up to --max-wait seconds)
until creating a file two directories down costs at most --create-limit us,
and prints the figure it started with.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
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


def machine_times():
    """(busy, stolen) CPU seconds of the whole machine since boot, from the
    first line of /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal ...
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy / tick, (fields[7] if len(fields) > 7 else 0) / tick


def timed(command, cwd):
    """Wall time, CPU time (user + system) and peak resident set of one
    command, from its own wait4 (the command and the children it waited
    for); the CPU time every other process used meanwhile; and the share of
    the machine's time stolen by the hypervisor (0 to 1)."""
    before = machine_times()
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    after = machine_times()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {child.returncode} in {cwd}")
    cpu = usage.ru_utime + usage.ru_stime
    other, steal = 0.0, 0.0
    if before and after:
        other = max(0.0, after[0] - before[0] - cpu)
        steal = (after[1] - before[1]) / (wall * (os.cpu_count() or 1))
    return wall, cpu, usage.ru_maxrss / 1024, other, steal


def creation_cost(root):
    """Microseconds to create an empty file two directories below a new
    directory of `root`, as a run's result envelopes are, over 200 files."""
    where = os.path.join(tempfile.mkdtemp(dir=root, prefix="probe-"), "a", "b")
    os.makedirs(where)
    start = time.perf_counter()
    for i in range(200):
        with open(os.path.join(where, f"f{i}"), "w"):
            pass
    return (time.perf_counter() - start) / 200 * 1e6


def settled(root, limit, max_wait):
    """Waits (up to `max_wait` s) until creating a file costs at most
    `limit` us; returns the last cost measured."""
    deadline = time.monotonic() + max_wait
    cost = creation_cost(root)
    while cost > limit and time.monotonic() < deadline:
        print(f"# creating a file costs {cost:.0f} us here (files were deleted recently); waiting",
              file=sys.stderr, flush=True)
        time.sleep(15)
        cost = creation_cost(root)
    return cost


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", default="target/release/baton")
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--shapes", default="wide,chain,layered")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-parallel", default="2")
    parser.add_argument("--scratch", help="directory for the runs (default: a new one in TMPDIR)")
    parser.add_argument("--create-limit", type=float, default=60,
                        help="wait before a row until creating a file costs at most this many us")
    parser.add_argument("--max-wait", type=float, default=420, help="seconds to wait for that at most")
    parser.add_argument("--max-steal", type=float, default=5,
                        help="run a repetition again when the hypervisor took more than this percentage "
                             "of the machine's time during one of its commands")
    args = parser.parse_args()
    baton = os.path.abspath(args.baton)
    # CPU time says where a gap comes from, and moves less than wall time
    # when the machine is shared: both are medians. "new" runs in a fresh
    # directory, so baton creates its store first, as in a project's first
    # run; "again" runs where the store already exists, as every later run
    # does. Make keeps no state, so it has one column.
    print(f"{'shape':8} {'n':>6} {'make s':>8} {'new s':>8} {'ratio':>6} {'again s':>8} {'ratio':>6} "
          f"{'baton cpu':>10} {'make cpu':>9} {'other cpu':>9} {'peak MiB':>9} {'create us':>10} {'steal':>6}")
    root = tempfile.mkdtemp(prefix="baton-bench-", dir=args.scratch)
    try:
        for shape in args.shapes.split(","):
            for n in map(int, args.sizes.split(",")):
                measure(args, baton, root, shape, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def scratch_dir(root, shape, n):
    scratch = tempfile.mkdtemp(dir=root)
    with open(os.path.join(scratch, "wf.yaml"), "w") as f:
        f.write(workflow(shape, n))
    with open(os.path.join(scratch, "Makefile"), "w") as f:
        f.write(makefile(shape, n))
    return scratch


def measure(args, baton, root, shape, n):
    cost = settled(root, args.create_limit, args.max_wait)
    run = [baton, "run", "wf.yaml", "--max-parallel", args.max_parallel]
    project = scratch_dir(root, shape, n)
    timed(run, project)  # creates the store the "again" runs find
    new, again, made = [], [], []
    retries = args.repeat
    while len(new) < args.repeat:
        scratch = scratch_dir(root, shape, n)
        triple = (timed(run, scratch), timed(run, project), timed(["make", "-s", "-j2"], scratch))
        stolen = max(row[4] for row in triple)
        if stolen * 100 > args.max_steal and retries > 0:
            retries -= 1
            print(f"# the hypervisor took {stolen:.0%} of the machine during a repetition; running it again",
                  file=sys.stderr, flush=True)
            continue
        new.append(triple[0])
        again.append(triple[1])
        made.append(triple[2])
    median = lambda rows, i: statistics.median(row[i] for row in rows)
    m, b, a = median(made, 0), median(new, 0), median(again, 0)
    rows = new + again + made
    steal = sum(row[4] * row[0] for row in rows) / sum(row[0] for row in rows)
    print(f"{shape:8} {n:>6} {m:>8.3f} {b:>8.3f} {b / m:>6.2f} {a:>8.3f} {a / m:>6.2f} "
          f"{median(new, 1):>10.3f} {median(made, 1):>9.3f} {median(new, 3):>9.3f} "
          f"{max(row[2] for row in new + again):>9.1f} {cost:>10.0f} {steal:>6.1%}", flush=True)


if __name__ == "__main__":
    main()
