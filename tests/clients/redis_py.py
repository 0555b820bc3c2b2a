"""redis-py against lockproxy with its defaults (Debian's python3-redis,
4.3.4 on Debian 12: RESP2). Run by run.sh, which starts the proxies and
sets LP_*. Exits non-zero on the first failure."""
import os
import sys
import threading
import time

import redis

ENV = os.environ
PORT = int(ENV["LP_PORT"])


def client(**kw):
    # One connection per Redis object: locks belong to connections, and
    # redis-py's default pool may hand a command any pooled connection.
    kw.setdefault("host", "127.0.0.1")
    kw.setdefault("port", PORT)
    return redis.Redis(single_connection_client=True, socket_timeout=15, **kw)


def basics():
    r = client()
    assert r.ping() is True
    assert r.execute_command("LOCK", "py:a") == b"OK"
    info = r.execute_command("LOCK.INFO", "py:a")
    fields = dict(zip(info[::2], info[1::2]))
    assert fields[b"locked"] == 1 and fields[b"hold_count"] == 1, fields
    assert r.execute_command("UNLOCK", "py:a") == 1
    other = client()
    assert other.execute_command("LOCK", "py:held") == b"OK"
    assert r.execute_command("TRYLOCK", "py:held") is None
    try:
        r.execute_command("UNLOCK", "py:held")
        raise AssertionError("UNLOCK of another's lock succeeded")
    except redis.ResponseError as e:
        assert str(e).startswith("NOTOWNER"), e
    # The default pooled client works too, for commands that do not hold.
    assert redis.Redis(host="127.0.0.1", port=PORT).execute_command("TRYLOCK", "py:held") is None
    print("ok: connect with defaults, LOCK/UNLOCK, LOCK.INFO, nil, errors")


def pipelines():
    r = client()
    p = r.pipeline(transaction=False)
    for i in range(50):
        p.execute_command("TRYLOCK", f"py:p{i}")
    for i in range(50):
        p.execute_command("UNLOCK", f"py:p{i}")
    assert p.execute() == [b"OK"] * 50 + [1] * 50
    # pipeline() by default is MULTI ... EXEC.
    p = r.pipeline()
    p.execute_command("TRYLOCK", "py:m1")
    p.execute_command("LOCK.INFO", "py:m1")
    p.execute_command("UNLOCK", "py:m1")
    got = p.execute()
    assert got[0] == b"OK" and got[1][3] == 1 and got[2] == 1, got
    p = r.pipeline()
    p.execute_command("TRYLOCK", "py:m2")
    p.execute_command("NOSUCH")
    try:
        p.execute()
        raise AssertionError("EXEC ran a transaction with an unknown command")
    except redis.ResponseError as e:
        assert "EXECABORT" in str(e) or "NOSUCH" in str(e), e
    assert r.execute_command("TRYLOCK", "py:m2") == b"OK"  # the aborted one never ran
    print("ok: pipeline(transaction=False), pipeline() as MULTI/EXEC, EXECABORT")


def auth():
    port = int(ENV["LP_AUTH_PORT"])
    r = client(port=port, password=ENV["LP_PASSWORD"])
    assert r.execute_command("LOCK", "py:auth") == b"OK"
    assert r.execute_command("UNLOCK", "py:auth") == 1
    try:
        client(port=port, password="wrong").ping()
        raise AssertionError("a wrong password was accepted")
    except (redis.ResponseError, redis.AuthenticationError) as e:
        assert str(e).startswith("WRONGPASS"), e
    try:
        client(port=port).execute_command("LOCK", "py:auth")
        raise AssertionError("LOCK ran without AUTH")
    except (redis.ResponseError, redis.AuthenticationError) as e:
        assert "Authentication required" in str(e), e
    print("ok: AUTH, WRONGPASS, NOAUTH")


def blocking_wake():
    a, b = client(), client()
    assert a.execute_command("LOCK", "py:block") == b"OK"
    result = []
    t = threading.Thread(
        target=lambda: result.append(b.execute_command("LOCK", "py:block", "WAIT", 30000)))
    t.start()
    time.sleep(0.3)
    assert not result, "the second LOCK returned while the lock was held"
    assert a.execute_command("UNLOCK", "py:block") == 1
    t.join(10)
    assert result == [b"OK"], result
    assert b.execute_command("UNLOCK", "py:block") == 1
    print("ok: a blocking LOCK woken by another client")


def tls():
    r = client(port=int(ENV["LP_TLS_PORT"]), ssl=True, ssl_ca_certs=ENV["LP_CA"])
    assert r.execute_command("LOCK", "py:tls") == b"OK"
    assert r.execute_command("UNLOCK", "py:tls") == 1
    print("ok: TLS")


def main():
    print(f"redis-py {redis.__version__} on Python {sys.version.split()[0]}")
    timer = threading.Timer(90, lambda: (print("FAIL: still running after 90 s"), os._exit(1)))
    timer.daemon = True
    timer.start()
    basics()
    pipelines()
    auth()
    blocking_wake()
    tls()


if __name__ == "__main__":
    main()
