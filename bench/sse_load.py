#!/usr/bin/env python3
"""How much 50 followers of a run slow it down.

Each repetition runs the same workflow twice in fresh projects, with
`baton serve` up in both: once alone, once while CLIENTS plain HTTP clients
follow the run's server-sent events (`GET /api/runs/RUN/events`) and, with
--browser, one headless Chromium shows its page (whose script follows the
same events). The browser is started, and shows the server's runs list,
before the run starts: its own start-up is not the run's. Once the run
exists, the browser is sent to its page through the DevTools protocol.
Each run starts once the machine has settled (nearly idle for half a
second): the end of the run before must not count against the next.
Reported: the `baton run` wall times, medians, and their ratio (followed /
alone); with a browser, also how long after the run's end its page said so.

`--page blank` sends the browser to `about:blank` instead of the run's
page: what a navigation costs the browser whatever the page, the floor
under the figure with the run's page. `--script` sets what each stage runs
(default `true`): with stages that take some time, the followers' cost is
their steady cost per second rather than the fixed cost of arriving.

Usage: python3 bench/sse_load.py --baton target/release/baton \
           [--shape wide] [--stages 1000] [--clients 50] [--repeat 5] \
           [--browser /usr/bin/chromium] [--page run|blank] [--script CMD] \
           [--scratch DIR]
"""

import argparse
import base64
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


class Browser:
    """A headless Chromium with one page, driven through the DevTools
    protocol over a WebSocket (a minimal client: text frames, one call at
    a time)."""

    def __init__(self, chromium, url, scratch):
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={scratch}", "--remote-debugging-port=0", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        port_file = os.path.join(scratch, "DevToolsActivePort")
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.monotonic() > deadline:
                sys.exit("Chromium never opened its DevTools port")
            time.sleep(0.05)
        port = open(port_file).read().split()[0]
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
                    pages = [t for t in json.load(answer) if t["type"] == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("Chromium shows no page")
            time.sleep(0.05)
        self.conn = websocket(pages[0]["webSocketDebuggerUrl"])
        self.calls = 0
        self.wait_for("document.readyState === 'complete'", 60)
        # Chromium goes on working for a while after it shows its first
        # page: wait until half a second passes with it (nearly) idle.
        deadline = time.monotonic() + 60
        used = cpu_seconds(self.process.pid)
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = cpu_seconds(self.process.pid)
            if now - used < 0.02:
                break
            used = now

    def call(self, method, params):
        """The call's result, or None for an error (an evaluation while the
        page reloads has no context to run in)."""
        self.calls += 1
        send_text(self.conn, json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:
            answer = json.loads(read_text(self.conn))
            if answer.get("id") == self.calls:
                return answer.get("result")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return (result or {}).get("result", {}).get("value")

    def wait_for(self, expression, seconds):
        deadline = time.monotonic() + seconds
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                sys.exit(f"the page never had {expression}")
            time.sleep(0.02)

    def close(self):
        self.conn.close()
        self.process.kill()
        self.process.wait()


def settle(seconds=30):
    """Waits until the machine has been nearly idle for half a second (the
    end of the run before, a browser's or server's start, still use the
    CPU for a while), at most `seconds`."""
    def busy_idle():
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        return sum(ticks) - ticks[3] - ticks[4], ticks[3] + ticks[4]
    deadline = time.monotonic() + seconds
    before = busy_idle()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = busy_idle()
        busy, idle = now[0] - before[0], now[1] - before[1]
        before = now
        if busy <= 0.05 * (busy + idle):
            return


def cpu_seconds(root):
    """User and system CPU seconds of process `root` and its descendants
    alive now."""
    parents, times = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = int(fields[11]) + int(fields[12])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(times.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def websocket(url):
    """An open WebSocket connection to `ws://HOST:PORT/PATH`."""
    address, path = url.removeprefix("ws://").split("/", 1)
    host, port = address.rsplit(":", 1)
    conn = socket.create_connection((host, int(port)), timeout=60)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall(f"GET /{path} HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = conn.recv(1)
        if not byte:
            sys.exit("DevTools closed the connection")
        head += byte
    if not head.startswith(b"HTTP/1.1 101"):
        sys.exit(f"DevTools said {head!r}")
    return conn


def send_text(conn, text):
    payload = text.encode()
    mask = os.urandom(4)
    if len(payload) < 126:
        head = bytes([0x81, 0x80 | len(payload)])
    else:
        head = bytes([0x81, 0x80 | 126]) + len(payload).to_bytes(2, "big")
    conn.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def read_exact(conn, size):
    data = b""
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            sys.exit("DevTools closed the connection")
        data += more
    return data


def read_text(conn):
    """The next whole text message (continuation frames joined)."""
    message = b""
    while True:
        first, second = read_exact(conn, 2)
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(read_exact(conn, 2), "big")
        elif size == 127:
            size = int.from_bytes(read_exact(conn, 8), "big")
        message += read_exact(conn, size)
        if first & 0x80:
            return message.decode()


def one(baton, text, clients, chromium, scratch, page):
    """Wall seconds of one `baton run`, bytes the followers received, the
    seconds from the run's end to its page showing it (or None), and the
    CPU seconds the server, the browser and this script (its client
    threads) used during the run."""
    project = tempfile.mkdtemp(prefix="baton-sse-", dir=scratch)
    try:
        with open(os.path.join(project, "wf.yaml"), "w") as f:
            f.write(text)
        server, address = start_server(baton, project)
        stop, received, threads, browser, shown = threading.Event(), [], [], None, None
        if chromium:
            browser = Browser(chromium, f"http://{address}/", os.path.join(project, "browser"))
        settle()
        cpu = [cpu_seconds(server.pid), cpu_seconds(browser.process.pid) if browser else 0,
               time.process_time()]
        started = time.monotonic()
        run = subprocess.Popen([baton, "run", "wf.yaml"], cwd=project,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if clients or browser:
            run_id = newest_run(address, started + 60)
            for _ in range(clients):
                thread = threading.Thread(target=follow, args=(address, run_id, stop, received))
                thread.start()
                threads.append(thread)
            if browser:
                url = f"http://{address}/runs/{run_id}" if page == "run" else "about:blank"
                browser.call("Page.navigate", {"url": url})
        code = run.wait()
        wall = time.monotonic() - started
        cpu = [cpu_seconds(server.pid) - cpu[0],
               cpu_seconds(browser.process.pid) - cpu[1] if browser else 0,
               time.process_time() - cpu[2]]
        if browser and page == "run":
            browser.wait_for("document.querySelector('[data-run-status]')?.textContent === 'success'", 60)
            shown = time.monotonic() - started - wall
        stop.set()
        for thread in threads:
            thread.join()
        if browser:
            browser.close()
        server.kill()
        server.wait()
        if code != 0:
            sys.exit(f"baton run exited {code}")
        return wall, sum(received), shown, cpu
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
    parser.add_argument("--page", choices=["run", "blank"], default="run",
                        help="where the browser goes once the run exists")
    parser.add_argument("--script", default="true", help="what each stage runs")
    parser.add_argument("--scratch", help="where the projects go (default: the system's temporary "
                        "directory); a tmpfs keeps the file system's own costs out: each run "
                        "writes a thousand files and each repetition deletes them")
    args = parser.parse_args()
    baton = os.path.abspath(args.baton)
    text = workflow(args.shape, args.stages).replace("script: 'true'", "script: " + json.dumps(args.script))
    alone, followed, bytes_seen, shown, server_cpu, browser_cpu, client_cpu = [], [], [], [], [], [], []
    for _ in range(args.repeat):
        alone.append(one(baton, text, 0, None, args.scratch, args.page)[0])
        wall, seen, after, (server, browser, clients) = one(baton, text, args.clients, args.browser, args.scratch, args.page)
        followed.append(wall)
        bytes_seen.append(seen)
        server_cpu.append(server)
        browser_cpu.append(browser)
        client_cpu.append(clients)
        if after is not None:
            shown.append(after)
    a, f = statistics.median(alone), statistics.median(followed)
    print(f"{args.shape} {args.stages} stages running {args.script!r}, {args.clients} SSE clients"
          f"{' + a browser on ' + args.page if args.browser else ''}, {args.repeat} runs each")
    print(f"alone    median {a:.3f}s  all {' '.join(f'{x:.3f}' for x in alone)}")
    print(f"followed median {f:.3f}s  all {' '.join(f'{x:.3f}' for x in followed)}")
    print(f"ratio followed/alone {f / a:.3f}; the clients received {statistics.median(bytes_seen):.0f} bytes (median)")
    print(f"CPU during the followed run, medians: server {statistics.median(server_cpu):.3f}s"
          + (f", browser {statistics.median(browser_cpu):.3f}s" if args.browser else "")
          + f", this script (the clients, the DevTools calls) {statistics.median(client_cpu):.3f}s")
    if shown:
        print(f"the page showed the run's end {statistics.median(shown):.3f}s after it (median), "
              f"all {' '.join(f'{x:.3f}' for x in shown)}")


if __name__ == "__main__":
    main()
