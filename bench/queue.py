#!/usr/bin/env python3
"""Queue throughput: trivial jobs (`true`) claimed, run and completed per second.

Usage: python3 bench/queue.py [--baton target/release/baton] [--jobs 5000]
       [--workers 1,2,4] [--concurrency 8] [--repeat 3]

Each measurement enqueues N jobs in a fresh scratch directory (one
transaction, not timed), then times W `baton worker --once` processes
started together until all have drained the queue, and reports the median
jobs/s and CPU time per job (the workers and the jobs they ran, user +
system). Set BATON_DATABASE_URL to a PostgreSQL URL to measure it instead of
the embedded SQLite (the default worker counts become 1,2,8,32; every
measurement uses a queue of its own).
"""

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time


def measure(baton, jobs, workers, concurrency, tag):
    with tempfile.TemporaryDirectory(prefix="baton-queue-bench.") as scratch:
        queue = f"bench-{os.getpid()}-{tag}"
        subprocess.run(
            [baton, "queue", "enqueue", "--script", "true", "--queue", queue,
             "--count", str(jobs), "--json"],
            cwd=scratch, check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, BATON_WORKER_POLL_MS="50")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        procs = [subprocess.Popen(
            [baton, "worker", "--once", "--queue", queue,
             "--concurrency", str(concurrency), "--json"],
            cwd=scratch, env=env, stdout=subprocess.DEVNULL)
            for _ in range(workers)]
        for proc in procs:
            proc.wait()
        elapsed = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        listed = subprocess.run(
            [baton, "queue", "list", "--queue", queue, "--status", "succeeded", "--json"],
            cwd=scratch, check=True, capture_output=True, text=True).stdout
        done = listed.count('"status": "succeeded"')
        if done != jobs:
            raise SystemExit(f"only {done} of {jobs} jobs succeeded")
        subprocess.run([baton, "queue", "purge", "--older-than", "0s"], cwd=scratch,
                       stdout=subprocess.DEVNULL)
        return jobs / elapsed, cpu * 1000 / jobs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baton", default="target/release/baton")
    parser.add_argument("--jobs", type=int, default=5000)
    postgres = os.environ.get("BATON_DATABASE_URL", "").startswith("postgres")
    parser.add_argument("--workers", default="1,2,8,32" if postgres else "1,2,4")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    baton = os.path.abspath(args.baton)
    backend = "postgres" if postgres else "sqlite"
    print(f"{backend}: {args.jobs} trivial jobs, --concurrency {args.concurrency}, "
          f"median of {args.repeat}")
    for workers in [int(w) for w in args.workers.split(",")]:
        runs = [measure(baton, args.jobs, workers, args.concurrency, f"{workers}-{i}")
                for i in range(args.repeat)]
        rates = [rate for rate, _ in runs]
        cpu = statistics.median(cpu for _, cpu in runs)
        print(f"  {workers:>2} worker(s): {statistics.median(rates):8.0f} jobs/s, "
              f"{cpu:.2f} ms CPU per job (runs: {', '.join(f'{r:.0f}' for r in rates)})",
              flush=True)


if __name__ == "__main__":
    main()
