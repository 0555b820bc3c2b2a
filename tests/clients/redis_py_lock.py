"""redis-py's own Lock (r.lock(): SET NX PX to acquire, its Lua scripts by
EVALSHA to release and extend) through lockproxy's pass-through, unchanged
(issue 21), plus ordinary commands and a refused one. Run by run.sh
(`run.sh redis-py-lock`), which starts Redis and the proxies and sets LP_*.
Exits non-zero on the first failure."""
import os
import sys
import threading
import time

import redis

ENV = os.environ
PORT = int(ENV["LP_PORT"])


def client(**kw):
    kw.setdefault("host", "127.0.0.1")
    kw.setdefault("port", PORT)
    return redis.Redis(socket_timeout=15, **kw)


def lock_basics():
    r = client()
    direct = redis.Redis(host="127.0.0.1", port=int(ENV["LP_REDIS_PORT"]))
    lock = r.lock("pyl:a", timeout=5, blocking_timeout=2)
    assert lock.acquire(), "acquire"
    assert lock.locked() and lock.owned()
    assert direct.get("pyl:a") == lock.local.token, "the lock is redis-py's own key in Redis"
    other = client().lock("pyl:a", timeout=5, blocking_timeout=0.2)
    assert not other.acquire(), "a second holder"
    assert lock.extend(5)  # EVALSHA of redis-py's extend script
    assert direct.pttl("pyl:a") > 5000
    # Redis forgets every script: redis-py's EVALSHA still works (the
    # proxy retries NOSCRIPT with the text it kept, or redis-py reloads).
    direct.script_flush()
    lock.release()
    assert not lock.locked() and direct.exists("pyl:a") == 0
    assert other.acquire()
    other.release()
    try:
        lock.release()
        raise AssertionError("releasing a lock not held succeeded")
    except redis.exceptions.LockError:
        pass
    print("ok: r.lock() acquire, contention, extend, release after SCRIPT FLUSH, LockError")


def lock_exclusion():
    # Read-modify-write of a counter under r.lock() from 4 threads, each on
    # its own connection pool: any overlap loses an increment.
    n_threads, rounds = 4, 15
    errors = []

    def worker():
        r = client()
        try:
            for _ in range(rounds):
                with r.lock("pyl:mutex", timeout=10, blocking_timeout=20, sleep=0.005):
                    v = int(r.get("pyl:counter") or 0)
                    r.set("pyl:counter", v + 1)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    client().delete("pyl:counter")
    threads = [threading.Thread(target=worker) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    got = int(client().get("pyl:counter"))
    assert got == n_threads * rounds, f"lost updates under r.lock(): {got}"
    print(f"ok: {n_threads} threads x {rounds} critical sections under r.lock(), none overlapped")


def commands():
    r = client()
    assert r.set("pyl:k", "v") and r.get("pyl:k") == b"v"
    assert r.hset("pyl:h", mapping={"a": 1, "b": 2}) == 2
    assert r.hgetall("pyl:h") == {b"a": b"1", b"b": b"2"}
    assert r.incr("pyl:n") == 1
    assert r.mget("{pyl}a", "{pyl}b") == [None, None]
    s = r.register_script("return redis.call('get', KEYS[1])")
    assert s(keys=["pyl:k"]) == b"v"
    try:
        r.blpop("pyl:list", 1)
        raise AssertionError("BLPOP was forwarded")
    except redis.ResponseError as e:
        assert "BLPOP" in str(e), e
    # Lock commands still work next to forwarded ones.
    assert r.execute_command("LOCK", "pyl:native") == b"OK"
    assert r.execute_command("UNLOCK", "pyl:native") == 1
    print("ok: SET/GET/HSET/HGETALL/INCR/MGET, a registered script, BLPOP refused")


def main():
    print(f"redis-py {redis.__version__} on Python {sys.version.split()[0]}")
    timer = threading.Timer(90, lambda: (print("FAIL: still running after 90 s"), os._exit(1)))
    timer.daemon = True
    timer.start()
    lock_basics()
    lock_exclusion()
    commands()


if __name__ == "__main__":
    main()
