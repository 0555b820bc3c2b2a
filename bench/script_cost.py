#!/usr/bin/python3
"""Redis's user-space instructions per lock+unlock pair, by script: what a
lock costs Redis behind twemproxy (Redisson's scripts, as lockproxy-bench's
twemproxy and direct targets send them) against lockproxy's scripts sent
alone (--script-batch 1) and through its batch runner at several batch
sizes (pool/batch.c). Deterministic (callgrind counts instructions), so the
busy 2-core machine does not move it, unlike Redis CPU time.

Starts its own redis-server under valgrind on a free loopback port, runs N
pairs per variant on fresh names (every acquire takes a free lock, every
unlock releases it and publishes), pipelined 100 commands a write as a
proxy's pool connection would, and divides Redis's instruction count over
the pairs (callgrind_control -z before, -d after: start-up excluded).

usage: bench/script_cost.py [--build DIR] [--base-build DIR] [--pairs N]
                            [--batches 1,5,10,20,30]
--build: a build with lockproxy-print-script (default build-rel, then build);
--base-build: another build whose scripts run as "base" (e.g. before a change).
"""
import argparse
import glob
import os
import socket
import subprocess
import sys
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWNER = "7c7c8f0a-3f0e-4a4c-9d52-2f1d0b7a9e11:%d"  # Redisson's uuid:threadId shape
PIPELINE = 100

# Redisson's RLock acquire and unlock, as bench/loadgen/lg_run.c sends them.
REDISSON_ACQUIRE = (
    "if ((redis.call('exists', KEYS[1]) == 0) or "
    "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "return redis.call('pttl', KEYS[1]);")
REDISSON_UNLOCK = (
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;")


def script_text(build, name):
    return subprocess.run([os.path.join(build, "lockproxy-print-script"), name], check=True,
                          capture_output=True, text=True).stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def channel(name):
    return "redisson_lock__channel:{%s}" % name


class Redis:
    """redis-server under callgrind; counts instructions between marks."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/cg.out" % tmp,
             "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(port=self.port)
        deadline = time.time() + 60
        while True:
            try:
                self.r.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline:
                    sys.exit("script_cost.py: redis-server under valgrind did not start")
                time.sleep(0.2)

    def control(self, opt):
        subprocess.run(["callgrind_control", opt, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def count(self, work):
        """Instructions Redis ran during work()."""
        self.control("-z")
        before = set(glob.glob(self.tmp + "/cg.out*"))
        work()
        self.control("-d")
        new = sorted(set(glob.glob(self.tmp + "/cg.out*")) - before, key=os.path.getmtime)[-1]
        for line in open(new):
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
        sys.exit("script_cost.py: no totals in " + new)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def run_alone(r, acquire, unlock, redisson, pairs):
    """Each acquire and unlock its own EVALSHA."""
    sa, su = r.script_load(acquire), r.script_load(unlock)
    for i in range(0, pairs, PIPELINE):
        names = ["sc:%d" % j for j in range(i, min(i + PIPELINE, pairs))]
        p = r.pipeline(transaction=False)
        for j, n in enumerate(names):
            p.evalsha(sa, 1, n, 30000, OWNER % (i + j))
        p.execute()
        p = r.pipeline(transaction=False)
        for j, n in enumerate(names):
            if redisson:
                p.evalsha(su, 2, n, channel(n), 0, 30000, OWNER % (i + j))
            else:
                p.evalsha(su, 2, n, channel(n), 30000, OWNER % (i + j), "publish")
        for rep in p.execute():
            assert rep == 1, rep


def run_batched(r, runner, pairs, k):
    """k acquires per runner call, then k unlocks per call."""
    sr = r.script_load(runner)
    for i in range(0, pairs, PIPELINE):
        names = ["sc:%d" % j for j in range(i, min(i + PIPELINE, pairs))]
        for phase in ("acquire", "unlock"):
            p = r.pipeline(transaction=False)
            for b in range(0, len(names), k):
                keys, args = [], []
                for j in range(b, min(b + k, len(names))):
                    n, owner = names[j], OWNER % (i + j)
                    if phase == "acquire":
                        keys += [n]
                        args += ["1", 30000, owner]
                    else:
                        keys += [n, channel(n)]
                        args += ["2", 30000, owner, "publish"]
                p.evalsha(sr, len(keys), *keys, *args)
            for rep in p.execute():
                if phase == "unlock":
                    assert all(x == 1 for x in rep), rep


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--base-build", default=None)
    ap.add_argument("--pairs", type=int, default=4000)
    ap.add_argument("--batches", default="1,5,10,20,30")
    a = ap.parse_args()
    build = a.build or next((os.path.join(ROOT, d) for d in ("build-rel", "build")
                             if os.path.exists(os.path.join(ROOT, d, "lockproxy-print-script"))),
                            None)
    if not build:
        sys.exit("script_cost.py: no lockproxy-print-script (cmake --build build "
                 "--target lockproxy-print-script)")
    variants = [("redisson (twemproxy, direct)",
                 lambda r: run_alone(r, REDISSON_ACQUIRE, REDISSON_UNLOCK, True, a.pairs))]
    if a.base_build:
        ba, bu = script_text(a.base_build, "lock_acquire"), script_text(a.base_build, "lock_unlock")
        variants.append(("base, alone", lambda r: run_alone(r, ba, bu, False, a.pairs)))
    acq, unl = script_text(build, "lock_acquire"), script_text(build, "lock_unlock")
    variants.append(("lockproxy, alone", lambda r: run_alone(r, acq, unl, False, a.pairs)))
    runner = script_text(build, "lock_batch")
    for k in (int(x) for x in a.batches.split(",")):
        variants.append(("lockproxy, batch %d" % k,
                         lambda r, k=k: run_batched(r, runner, a.pairs, k)))
    with tempfile.TemporaryDirectory() as tmp:
        srv = Redis(tmp)
        try:
            ref = None
            print("%-30s %12s %9s" % ("scripts", "instr/pair", "/redisson"))
            for name, work in variants:
                per = srv.count(lambda: work(srv.r)) / a.pairs
                assert srv.r.dbsize() == 0
                ref = ref or per
                print("%-30s %12.0f %9.2f" % (name, per, per / ref), flush=True)
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
