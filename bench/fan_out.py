#!/usr/bin/env python3
"""Times a run-time fan-out: one source stage listing N items, one inline
fan-out stage running `true` per item (no outputs), on a fresh project each time.

Usage: python3 bench/fan_out.py [--baton target/release/baton] [--items 10000]
       [--repeat 3] [--max-parallel 4] [--database-url postgres://…]

Reports, per item count: the median wall time of `baton run`, the wall time per
child, the per-child time left after subtracting what spawning N `true`
processes costs on this machine with the same parallelism (`xargs -P`, the
floor any engine pays), and the peak resident set size of the baton process
(getrusage of that child). Without --database-url (or BATON_DATABASE_URL) the
run uses the project's embedded SQLite store. Targets: under 2 ms of engine
overhead per child and under 200 MB.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def workflow():
    return """name: fan-bench
version: '1'
description: d
trigger: {source: manual}
stages:
  - name: src
    kind: execute
    description: d
    executor: inline
    script: cp "$BATON_PROJECT_DIR/items.json" outputs/items.json
    writes_to: [items.json]
  - name: fan
    kind: execute
    description: d
    executor: inline
    depends_on: [src]
    script: 'true'
    fan_out: {source: src, field: items, key: id}
"""


def run_once(baton, n, max_parallel, env):
    """Returns (wall seconds, peak RSS in KiB) of one `baton run`."""
    with tempfile.TemporaryDirectory() as scratch:
        with open(os.path.join(scratch, "wf.yaml"), "w") as f:
            f.write(workflow())
        with open(os.path.join(scratch, "items.json"), "w") as f:
            json.dump({"items": [{"id": f"i{i:06}"} for i in range(n)]}, f)
        log_path = os.path.join(scratch, "baton.log")
        with open(log_path, "w") as log:
            start = time.perf_counter()
            child = subprocess.Popen(
                [baton, "run", "wf.yaml", "--max-parallel", str(max_parallel)],
                cwd=scratch, env=env, stdout=subprocess.DEVNULL, stderr=log)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            with open(log_path) as log:
                raise SystemExit(f"baton run failed ({child.returncode}): {log.read()[-2000:]}")
        return wall, usage.ru_maxrss


def spawn_floor(n, max_parallel):
    """Seconds to spawn `true` n times, max_parallel at a time."""
    start = time.perf_counter()
    subprocess.run(f"seq {n} | xargs -P {max_parallel} -n 1 true", shell=True, check=True)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", default="target/release/baton")
    parser.add_argument("--items", default="10000", help="comma-separated item counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-parallel", type=int, default=4)
    parser.add_argument("--database-url", default=os.environ.get("BATON_DATABASE_URL"))
    args = parser.parse_args()
    baton = os.path.abspath(args.baton)
    env = dict(os.environ)
    env.pop("BATON_DATABASE_URL", None)
    backend = "sqlite"
    if args.database_url:
        env["BATON_DATABASE_URL"] = args.database_url
        backend = "postgres"
    print(f"{'backend':8} {'items':>6} {'median s':>9} {'ms/child':>9} {'floor ms':>9} {'overhead':>9} {'peak MB':>8}")
    for n in map(int, args.items.split(",")):
        walls, peaks = [], []
        for _ in range(args.repeat):
            wall, peak = run_once(baton, n, args.max_parallel, env)
            walls.append(wall)
            peaks.append(peak)
        wall = statistics.median(walls)
        floor = spawn_floor(n, args.max_parallel)
        per_child = wall / n * 1000
        floor_per_child = floor / n * 1000
        print(f"{backend:8} {n:>6} {wall:>9.2f} {per_child:>9.3f} {floor_per_child:>9.3f} "
              f"{per_child - floor_per_child:>9.3f} {max(peaks) / 1024:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
