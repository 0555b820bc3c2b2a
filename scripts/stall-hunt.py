#!/usr/bin/env python3
"""Issue 23 item 1 (a silent stall): idles a lockproxy, then bursts
connections with pipelined PING/LOCK/UNLOCK while busy loops load the
cores, over and over, and reports any run that was not answered in time.

  scripts/stall-hunt.py --proxy build/lockproxy [--io uring|epoll]
      [--runs N] [--idle S] [--conns N] [--spin N] [--max-clients N]

Starts its own redis-server and lockproxy on free loopback ports and
stops them at the end; each busy loop is a child killed after the burst
(and bounded by a timer of its own). One line per run: answered, the
slowest answer, the INFO round trip after the burst and the loop's
latency figures; "client gap" is the longest pause of this script's own
loop during the burst: a long one means the whole machine stalled, not
the proxy. Exit status 1 if any run missed."""
import argparse
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

BURST_WAIT = 5.5  # the run length


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def info(port, timeout=30.0):
    t0 = time.time()
    s = socket.create_connection(("127.0.0.1", port), timeout)
    s.settimeout(timeout)
    s.sendall(b"*2\r\n$4\r\nINFO\r\n$7\r\nlatency\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
        if data.startswith(b"$"):
            n = int(data[1:data.index(b"\r\n")])
            if len(data) >= data.index(b"\r\n") + 2 + n + 2:
                break
    s.close()
    kv = {}
    for line in data.decode(errors="replace").splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            kv[k] = v
    return time.time() - t0, kv


def spin(n, secs):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            end = time.time() + secs
            while time.time() < end:
                pass
            os._exit(0)
        pids.append(pid)
    return pids


def burst(port, n, run):
    sel = selectors.DefaultSelector()
    want = b"+PONG\r\n+OK\r\n:1\r\n"
    conns = {}
    start = time.time()
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        name = b"h%d_%d" % (run, i)
        req = (b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nLOCK\r\n$%d\r\n%s\r\n*2\r\n$6\r\nUNLOCK\r\n$%d\r\n%s\r\n"
               % (len(name), name, len(name), name))
        conns[s] = [req, b"", None]
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)
    answered = 0
    gap, prev = 0.0, time.monotonic()
    while answered < n and time.time() - start < BURST_WAIT:
        now = time.monotonic()
        gap, prev = max(gap, now - prev), now
        for key, ev in sel.select(0.05):
            s = key.fileobj
            st = conns[s]
            if ev & selectors.EVENT_WRITE and st[0]:
                try:
                    k = s.send(st[0])
                    st[0] = st[0][k:]
                except (BlockingIOError, OSError):
                    pass
                if not st[0]:
                    sel.modify(s, selectors.EVENT_READ)
            if ev & selectors.EVENT_READ:
                try:
                    d = s.recv(4096)
                except (BlockingIOError, OSError):
                    d = None
                if d:
                    st[1] += d
                    if st[1] == want and st[2] is None:
                        st[2] = time.time() - start
                        answered += 1
                        sel.unregister(s)
                elif d == b"":
                    sel.unregister(s)
    worst = max((st[2] for st in conns.values() if st[2] is not None), default=0.0)
    partial = sum(1 for st in conns.values() if st[2] is None and st[1])
    for s in conns:
        s.close()
    sel.close()
    return answered, worst, partial, gap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", default="build/lockproxy")
    ap.add_argument("--io", default="uring")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--idle", type=float, default=18.0)
    ap.add_argument("--conns", type=int, default=100)
    ap.add_argument("--spin", type=int, default=2)
    ap.add_argument("--max-clients", type=int, default=0)
    ap.add_argument("--extra", default="")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stallhunt.")
    rport, pport = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", tmp],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [redis]
    misses = 0
    try:
        if not wait_port(rport):
            sys.exit("redis did not start")
        cmd = [a.proxy, "--listen", "127.0.0.1:%d" % pport,
               "--upstream", "redis://127.0.0.1:%d" % rport, "--io", a.io,
               "--upstream-timeout", "3000", "--log-level", "info"]
        if a.max_clients:
            cmd += ["--max-clients", str(a.max_clients)]
        cmd += a.extra.split()
        log = open(os.path.join(tmp, "proxy.log"), "w")
        proxy = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proxy)
        if not wait_port(pport):
            sys.exit("proxy did not start")
        print("io=%s proxy log %s" % (a.io, log.name), flush=True)
        for run in range(a.runs):
            time.sleep(a.idle)
            pids = spin(a.spin, BURST_WAIT + 3)
            time.sleep(0.2)
            t0 = time.time()
            answered, worst, partial, gap = burst(pport, a.conns, run)
            for p in pids:
                os.kill(p, signal.SIGKILL)
                os.waitpid(p, 0)
            rtt, kv = info(pport)
            miss = answered < a.conns
            misses += miss
            print("%s run %d io=%s: %d/%d answered (%d partial), slowest %.0f ms, INFO %.0f ms,"
                  " client gap %.0f ms; max_work_us %s slow %s late %s max_late_ms %s%s" %
                  (time.strftime("%H:%M:%S"), run, a.io, answered, a.conns, partial,
                   worst * 1000, rtt * 1000, gap * 1000, kv.get("loop_max_work_us"),
                   kv.get("loop_slow_iterations"), kv.get("loop_late_timers"),
                   kv.get("loop_max_timer_late_ms"), "  MISS" if miss else ""), flush=True)
            if proxy.poll() is not None:
                print("proxy exited %s" % proxy.returncode, flush=True)
                break
    finally:
        for p in reversed(procs):  # the proxy before its Redis
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
    print("misses %d" % misses, flush=True)
    sys.exit(1 if misses else 0)


if __name__ == "__main__":
    main()
