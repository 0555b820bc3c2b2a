"""Tests of the lockproxy Python client against a real lockproxy and Redis.

Run by tests/clients/run.sh lib-python (ctest clients.lib_python), which
starts them and sets LP_PORT, LP_TLS_PORT, LP_UNIX (the proxy's Unix
socket), LP_CA, LP_CLIENT_CERT, LP_CLIENT_KEY; the proxy runs with --lock-watchdog-timeout 900."""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import redis  # noqa: E402

import lockproxy  # noqa: E402

ENV = os.environ
PORT = int(ENV["LP_PORT"])


def pooled(**kw):
    """A default redis.Redis: a connection pool, as users make it."""
    kw.setdefault("host", "127.0.0.1")
    kw.setdefault("port", PORT)
    return redis.Redis(**kw)


def hammer(r, names, threads=8, rounds=60):
    """threads threads share r and lock/unlock names; a counter per name
    is read, yielded on, and written back inside the critical section,
    with an 'inside' mark that must never be seen taken. Returns the
    errors (must be none) and the counters."""
    counters = {n: 0 for n in names}
    inside = {n: False for n in names}
    errors = []

    def work(t):
        try:
            for i in range(rounds):
                name = names[(t + i) % len(names)]
                with lockproxy.Lock(r, name, wait_ms=20000):
                    if inside[name]:
                        errors.append(f"two holders of {name}")
                    inside[name] = True
                    v = counters[name]
                    time.sleep(0.001)  # other threads run and use the pool
                    counters[name] = v + 1
                    inside[name] = False
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return errors, counters


class SharedClient(unittest.TestCase):
    def test_threads_share_one_pooled_client(self):
        r = pooled()
        names = ["py:shared:a", "py:shared:b", "py:shared:c"]
        errors, counters = hammer(r, names)
        self.assertEqual(errors, [])
        self.assertEqual(sum(counters.values()), 8 * 60)
        # Every hold gave its connection back, and nothing is left held.
        self.assertEqual(len(r.connection_pool._in_use_connections), 0)
        self.assertLessEqual(len(r.connection_pool._available_connections), 8)
        for n in names:
            self.assertEqual(r.execute_command("TRYLOCK", n + ":probe"), b"OK")
            self.assertEqual(r.execute_command("LOCK.INFO", n)[1], 0, n)

    def test_hold_outlives_watchdog_timeout(self):
        # Renewal is bound to the acquiring connection: pinning keeps it.
        r = pooled()
        with lockproxy.Lock(r, "py:renewed") as lk:
            time.sleep(2.0)  # over twice the proxy's 900 ms watchdog timeout
            info = lk.info()
            self.assertEqual(info["hold_count"], 1)
            self.assertEqual(info["watchdog"], 1)
            lk.check()

    def test_decoded_client(self):
        r = pooled(decode_responses=True)
        with lockproxy.Lock(r, "py:decoded", fenced=True) as lk:
            self.assertIsInstance(lk.token, int)
            self.assertEqual(lk.info()["locked"], 1)


class Waits(unittest.TestCase):
    def test_blocking_wait_woken_by_another_client(self):
        a, b = pooled(), pooled()
        holder = lockproxy.Lock(a, "py:wake")
        self.assertTrue(holder.acquire())
        got = []
        t = threading.Thread(target=lambda: got.append(
            lockproxy.Lock(b, "py:wake", wait_ms=30000).acquire() and time.monotonic()))
        t.start()
        time.sleep(0.3)
        self.assertEqual(got, [], "the waiter got the lock while it was held")
        released = time.monotonic()
        self.assertEqual(holder.release(), 1)
        t.join(10)
        self.assertEqual(len(got), 1)
        self.assertLess(got[0] - released, 1.0, "the waiter was not woken by the release")

    def test_wait_runs_out(self):
        r = pooled()
        with lockproxy.Lock(r, "py:busy"):
            self.assertFalse(lockproxy.Lock(r, "py:busy").acquire(blocking=False))
            start = time.monotonic()
            with self.assertRaises(lockproxy.LockTimeoutError):
                with lockproxy.Lock(r, "py:busy", wait_ms=200):
                    pass
            self.assertGreaterEqual(time.monotonic() - start, 0.19)

    def test_wait_longer_than_socket_timeout(self):
        # A WAIT longer than the client's socket_timeout is not cut short.
        r = pooled(socket_timeout=0.3)
        holder = lockproxy.Lock(pooled(), "py:slow")
        holder.acquire()
        try:
            start = time.monotonic()
            self.assertFalse(lockproxy.Lock(r, "py:slow").acquire(wait_ms=1000))
            self.assertGreaterEqual(time.monotonic() - start, 0.95)
        finally:
            holder.release()
        self.assertEqual(r.ping(), True)


class Lost(unittest.TestCase):
    def test_lease_runs_out(self):
        r = pooled()
        lk = lockproxy.Lock(r, "py:lease", lease_ms=200)
        self.assertTrue(lk.acquire())
        time.sleep(0.5)
        with self.assertRaises(lockproxy.LockLostError):
            lk.check()
        with self.assertRaises(lockproxy.LockLostError):
            lk.release()
        self.assertFalse(lk.held)
        self.assertEqual(len(r.connection_pool._in_use_connections), 0)

    def test_lease_runs_out_in_with_block(self):
        r = pooled()
        with self.assertRaises(lockproxy.LockLostError):
            with lockproxy.Lock(r, "py:lease2", lease_ms=100):
                time.sleep(0.4)

    def test_on_lost_callback(self):
        r = pooled()
        calls = []
        got = threading.Event()

        def lost(lk):
            calls.append(lk)
            got.set()

        lk = lockproxy.Lock(r, "py:on-lost", lease_ms=200, on_lost=lost, check_ms=50)
        lk.acquire()
        self.assertTrue(got.wait(5), "on_lost was not called")
        time.sleep(0.2)
        self.assertEqual(calls, [lk])  # once
        self.assertTrue(lk.lost)
        with self.assertRaises(lockproxy.LockLostError):
            lk.release()
        # A renewed hold is not reported, and releasing stops the watcher.
        rw = lockproxy.ReadWriteLock(r, "py:on-lost-rw")
        with rw.write_lock(on_lost=lost, check_ms=50) as w:
            time.sleep(1.2)  # over the proxy's 900 ms watchdog timeout
            self.assertFalse(w.lost)
        time.sleep(0.2)
        self.assertEqual(calls, [lk])

    def test_force_unlock_by_another_client(self):
        r = pooled()
        lk = lockproxy.Lock(r, "py:forced")
        lk.acquire()
        self.assertEqual(pooled().execute_command("FORCEUNLOCK", "py:forced"), 1)
        with self.assertRaises(lockproxy.LockLostError):
            lk.release()

    def test_killed_connection(self):
        r = pooled()
        lk = lockproxy.Lock(r, "py:killed")
        lk.acquire()
        cid = lk._pin.call("CLIENT", "ID")
        self.assertEqual(pooled().execute_command("CLIENT", "KILL", "ID", cid), 1)
        with self.assertRaises(lockproxy.LockLostError):
            lk.release()
        self.assertEqual(len(r.connection_pool._in_use_connections), 0)
        with lockproxy.Lock(r, "py:killed", wait_ms=0):  # the proxy released it
            pass

    def test_not_owner_mapped(self):
        pin = lockproxy._Pinned(pooled())
        try:
            with self.assertRaises(lockproxy.NotOwnerError):
                pin.call("UNLOCK", "py:never-held")
            self.assertEqual(pin.call("PING"), b"PONG")  # still usable
        finally:
            pin.give_back()


class Kinds(unittest.TestCase):
    def test_fenced_tokens_grow(self):
        r = pooled()
        with lockproxy.FencedLock(r, "py:fenced") as a:
            first = a.token
        with lockproxy.Lock(r, "py:fenced", fenced=True) as b:
            self.assertGreater(b.token, first)

    def test_read_write(self):
        r = pooled()
        rw = lockproxy.ReadWriteLock(r, "py:rw")
        with rw.read_lock(), rw.read_lock():  # two readers at once
            self.assertFalse(rw.write_lock().acquire(blocking=False))
        with rw.write_lock():
            self.assertFalse(rw.read_lock().acquire(blocking=False))
        with rw.read_lock():
            pass

    def test_fair_order(self):
        r = pooled()
        first = lockproxy.FairLock(r, "py:fair")
        first.acquire()
        order = []

        def wait(tag):
            with lockproxy.FairLock(r, "py:fair", wait_ms=20000):
                order.append(tag)

        ts = []
        for tag in range(3):
            ts.append(threading.Thread(target=wait, args=(tag,)))
            ts[-1].start()
            time.sleep(0.2)  # queue in this order
        first.release()
        for t in ts:
            t.join(20)
        self.assertEqual(order, [0, 1, 2])

    def test_semaphore(self):
        r = pooled()
        self.assertTrue(lockproxy.Semaphore.try_set_permits(r, "py:sem", 2))
        with lockproxy.Semaphore(r, "py:sem"), lockproxy.Semaphore(r, "py:sem"):
            self.assertEqual(lockproxy.Semaphore.available(r, "py:sem"), 0)
            self.assertFalse(lockproxy.Semaphore(r, "py:sem").acquire(blocking=False))
        self.assertEqual(lockproxy.Semaphore.available(r, "py:sem"), 2)
        with self.assertRaises(lockproxy.NotInitError):
            lockproxy.Semaphore(r, "py:sem-unset").acquire()


class Tls(unittest.TestCase):
    def test_threads_share_one_tls_client(self):
        r = pooled(port=int(ENV["LP_TLS_PORT"]), ssl=True, ssl_ca_certs=ENV["LP_CA"],
                   ssl_certfile=ENV["LP_CLIENT_CERT"], ssl_keyfile=ENV["LP_CLIENT_KEY"])
        errors, counters = hammer(r, ["py:tls:a", "py:tls:b"], threads=4, rounds=25)
        self.assertEqual(errors, [])
        self.assertEqual(sum(counters.values()), 100)


class Unix(unittest.TestCase):
    """A sidecar's clients on lockproxy --listen unix:///PATH: redis-py's
    unix_socket_path, the rest unchanged."""

    def unix(self, **kw):
        return redis.Redis(unix_socket_path=ENV["LP_UNIX"], **kw)

    def test_threads_share_one_unix_client(self):
        r = self.unix()
        errors, counters = hammer(r, ["py:unix:a", "py:unix:b"], threads=4, rounds=25)
        self.assertEqual(errors, [])
        self.assertEqual(sum(counters.values()), 100)
        self.assertEqual(len(r.connection_pool._in_use_connections), 0)

    def test_wait_and_release_over_unix(self):
        # The wait's own read timeout (settimeout on the pinned socket)
        # works on a Unix socket as on TCP; a TCP client sees the hold.
        r = self.unix(socket_timeout=0.3)
        with lockproxy.Lock(r, "py:unix:wait") as lk:
            self.assertEqual(lk.info()["locked"], 1)
            start = time.monotonic()
            self.assertFalse(lockproxy.Lock(r, "py:unix:wait").acquire(wait_ms=600))
            self.assertGreaterEqual(time.monotonic() - start, 0.55)
            self.assertEqual(pooled().execute_command("LOCK.INFO", "py:unix:wait")[1], 1)
        self.assertEqual(pooled().execute_command("LOCK.INFO", "py:unix:wait")[1], 0)
        self.assertEqual(r.ping(), True)


if __name__ == "__main__":
    print(f"lockproxy {lockproxy.__version__}, redis-py {redis.__version__}, "
          f"Python {sys.version.split()[0]}")
    guard = threading.Timer(55, lambda: (print("FAIL: still running after 55 s"), os._exit(1)))
    guard.daemon = True
    guard.start()
    unittest.main(verbosity=2)
