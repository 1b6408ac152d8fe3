#!/usr/bin/env python3
"""How much 50 followers of a run slow it down.

Each repetition runs the same workflow twice in fresh projects, with
`baton serve` up in both: once alone, once while CLIENTS plain HTTP clients
follow the run's server-sent events (`GET /api/runs/RUN/events`) and, with
--browser, one headless Chromium shows its page (whose script follows the
same events). Reported: the `baton run` wall times, medians, and their
ratio (followed / alone).

Usage: python3 bench/sse_load.py --baton target/release/baton \
           [--shape wide] [--stages 1000] [--clients 50] [--repeat 5] \
           [--browser /usr/bin/chromium]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_vs_make import workflow  # noqa: E402


def start_server(baton, project):
    server = subprocess.Popen(
        [baton, "serve", "--bind", "127.0.0.1:0"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = server.stdout.readline()
    if not line.startswith("listening on http://"):
        server.kill()
        sys.exit(f"baton serve said {line!r}")
    return server, line.strip().removeprefix("listening on http://").rstrip("/")


def newest_run(address, deadline):
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{address}/api/runs", timeout=5) as answer:
                runs = json.load(answer)
            if runs:
                return runs[-1]["run_id"]
        except OSError:
            pass
        time.sleep(0.005)
    sys.exit("the run never showed up")


def follow(address, run, stop, received):
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(
            f"GET /api/runs/{run}/events HTTP/1.1\r\nHost: {address}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        conn.settimeout(0.5)
        while not stop.is_set():
            try:
                data = conn.recv(65536)
            except socket.timeout:
                continue
            if not data:
                break
            received.append(len(data))


def browse(chromium, address, run, scratch):
    return subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={scratch}", "--remote-debugging-port=0",
         f"http://{address}/runs/{run}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def one(baton, text, clients, chromium):
    """Wall seconds of one `baton run`, and bytes the followers received."""
    project = tempfile.mkdtemp(prefix="baton-sse-")
    try:
        with open(os.path.join(project, "wf.yaml"), "w") as f:
            f.write(text)
        server, address = start_server(baton, project)
        stop, received, threads, browser = threading.Event(), [], [], None
        started = time.monotonic()
        run = subprocess.Popen([baton, "run", "wf.yaml"], cwd=project,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if clients:
            run_id = newest_run(address, started + 60)
            for _ in range(clients):
                thread = threading.Thread(target=follow, args=(address, run_id, stop, received))
                thread.start()
                threads.append(thread)
            if chromium:
                browser = browse(chromium, address, run_id, os.path.join(project, "browser"))
        code = run.wait()
        wall = time.monotonic() - started
        stop.set()
        for thread in threads:
            thread.join()
        if browser:
            browser.kill()
            browser.wait()
        server.kill()
        server.wait()
        if code != 0:
            sys.exit(f"baton run exited {code}")
        return wall, sum(received)
    finally:
        shutil.rmtree(project, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baton", default="target/release/baton")
    parser.add_argument("--shape", default="wide")
    parser.add_argument("--stages", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", help="a Chromium to follow the run's page too")
    args = parser.parse_args()
    baton = os.path.abspath(args.baton)
    text = workflow(args.shape, args.stages)
    alone, followed, bytes_seen = [], [], []
    for _ in range(args.repeat):
        alone.append(one(baton, text, 0, None)[0])
        wall, seen = one(baton, text, args.clients, args.browser)
        followed.append(wall)
        bytes_seen.append(seen)
    a, f = statistics.median(alone), statistics.median(followed)
    print(f"{args.shape} {args.stages} stages, {args.clients} SSE clients"
          f"{' + a browser' if args.browser else ''}, {args.repeat} runs each")
    print(f"alone    median {a:.3f}s  all {' '.join(f'{x:.3f}' for x in alone)}")
    print(f"followed median {f:.3f}s  all {' '.join(f'{x:.3f}' for x in followed)}")
    print(f"ratio followed/alone {f / a:.3f}; the clients received {statistics.median(bytes_seen):.0f} bytes (median)")


if __name__ == "__main__":
    main()
