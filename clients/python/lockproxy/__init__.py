"""Locks, read-write locks, fair locks, fenced locks and semaphores through
lockproxy, on redis-py.

Design: a hold pins one connection. lockproxy binds a lock to the
connection that took it (its owner, the watchdog that renews it, the
release when that connection closes, the lease-lost push). redis-py's
``Redis`` object is a pool: two commands of one thread may go out on two
connections. So every acquire here takes one connection out of the
``Redis`` object's pool, sends the acquire on it, keeps it for the life of
the hold (no other thread can use it meanwhile), sends the release on it,
and only then gives it back. One ``Redis`` object can thus be shared by any
number of threads; each concurrent hold costs one pooled connection.

``OWNER`` tokens were the other choice, and were not taken: with a token,
the lock and the unlock may go out on different connections, but renewal
and release-on-disconnect stay with the connection that sent the acquire,
which goes back to the pool and may be closed or reused by another
thread's blocking wait; a crash of the process would leave the lock to
its lease instead of releasing it at once.

A hold object (``Lock``, ``FairLock``, ``ReadWriteLock.read_lock()``, a
``Semaphore``, ...) belongs to the thread that uses it: create one per
``with`` block; share the ``Redis`` object, not the hold.
"""
import threading

import redis

__version__ = "0.1.0"

__all__ = [
    "Lock", "FencedLock", "FairLock", "ReadWriteLock", "Semaphore",
    "LockProxyError", "LockLostError", "NotOwnerError", "LockTimeoutError",
    "NotInitError", "UpstreamError", "__version__",
]


class LockProxyError(redis.ResponseError):
    """An error reply of lockproxy (a redis.ResponseError)."""


class LockLostError(LockProxyError):
    """LOCKLOST: the lease was lost (it expired, or the lock was taken
    over) before the release: the work done under the lock was not
    protected."""


class NotOwnerError(LockProxyError):
    """NOTOWNER: the release came from a connection that does not hold it."""


class NotInitError(LockProxyError):
    """NOTINIT: the semaphore was never set (Semaphore.try_set_permits)."""


class UpstreamError(LockProxyError):
    """UPSTREAM: Redis is down or slow; nothing was granted."""


class LockTimeoutError(LockProxyError):
    """The wait ran out before the lock was granted (``with`` form only;
    ``acquire()`` returns False instead)."""


_ERRORS = {
    "LOCKLOST": LockLostError,
    "NOTOWNER": NotOwnerError,
    "NOTINIT": NotInitError,
    "UPSTREAM": UpstreamError,
}

# Extra seconds, over WAIT, that a waiting read may take before it is
# treated as a dead connection (the proxy answers nil when WAIT ends).
_WAIT_SLACK_S = 10.0
_KEEP = object()


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _fields(reply):
    """LOCK.INFO's reply (pairs, or a map) as a dict of str keys."""
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    return {_text(k): _text(v) for k, v in zip(reply[::2], reply[1::2])}


def _mapped(err):
    """A redis.ResponseError as the lockproxy exception for its code."""
    msg = str(err)
    cls = _ERRORS.get(msg.split(" ", 1)[0], LockProxyError)
    return cls(msg)


class _Pinned:
    """One connection taken out of a Redis object's pool for one hold."""

    def __init__(self, r):
        self._pool = r.connection_pool
        self._conn = self._pool.get_connection("LOCK")
        # The holder's thread and a lease watcher (Lock on_lost) share it.
        self._mutex = threading.Lock()

    def call(self, *args, timeout=_KEEP):
        """Sends one command and reads its reply on the pinned connection.
        timeout: the read timeout in seconds for this reply (None: none),
        or the connection's own. Error replies raise LockProxyError
        subclasses; the connection stays usable. Anything else (a timeout,
        a broken connection, KeyboardInterrupt) disconnects it, which makes
        the proxy drop the pending request and release what it holds."""
        with self._mutex:
            conn = self._conn
            if conn is None:
                raise RuntimeError("the hold was released")
            conn.send_command(*args)
            if timeout is not _KEEP and conn._sock is not None:
                conn._sock.settimeout(timeout)
            try:
                return conn.read_response()
            except redis.ResponseError as e:
                raise _mapped(e) from None
            finally:
                if timeout is not _KEEP and conn._sock is not None:
                    conn._sock.settimeout(conn.socket_timeout)

    def give_back(self, broken=False):
        with self._mutex:
            if self._conn is None:
                return
            if broken:
                self._conn.disconnect()
            self._pool.release(self._conn)
            self._conn = None


class _Hold:
    """One hold of one name on a pinned connection (see the module doc)."""

    _ACQUIRE = _RELEASE = None

    def __init__(self, r, name, *, lease_ms=None, wait_ms=None):
        self._r = r
        self.name = name
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self._pin = None

    # -- what the subclasses change -------------------------------------
    def _acquire_args(self, wait_ms):
        args = [self._ACQUIRE, self.name]
        if self.lease_ms is not None:
            args += ["LEASE", int(self.lease_ms)]
        if wait_ms is not None:
            args += ["WAIT", int(wait_ms)]
        return args

    def _granted(self, reply):
        return reply is not None

    def _release_args(self):
        return [self._RELEASE, self.name]

    # -- the common part --------------------------------------------------
    @property
    def held(self):
        """True between a successful acquire and the release (as far as
        this object knows; see check() for what Redis says)."""
        return self._pin is not None

    def acquire(self, blocking=True, wait_ms=_KEEP):
        """Takes the lock. blocking=False: one attempt. Otherwise waits up
        to wait_ms (default: the constructor's; None: until granted).
        Returns True when granted, False when the wait ran out."""
        if self._pin is not None:
            raise RuntimeError(f"{type(self).__name__} {self.name!r} is already held by this "
                               "object; make one object per hold")
        if wait_ms is _KEEP:
            wait_ms = self.wait_ms
        if not blocking:
            wait_ms = 0
        timeout = None if wait_ms is None else wait_ms / 1000 + _WAIT_SLACK_S
        pin = _Pinned(self._r)
        try:
            reply = pin.call(*self._acquire_args(wait_ms), timeout=timeout)
        except LockProxyError:
            pin.give_back()
            raise
        except BaseException:
            pin.give_back(broken=True)
            raise
        if not self._granted(reply):
            pin.give_back()
            return False
        self._pin = pin
        self._on_granted(reply)
        return True

    def _on_granted(self, reply):
        pass

    def _hold_ended(self):
        pass

    def release(self):
        """Releases the hold and gives the connection back to the pool.
        Raises LockLostError when the lease was lost before this release
        (the connection is given back all the same)."""
        pin = self._pin
        if pin is None:
            raise RuntimeError(f"{type(self).__name__} {self.name!r} is not held by this object")
        self._pin = None
        self._hold_ended()
        try:
            return pin.call(*self._release_args())
        except LockProxyError:
            raise
        except (redis.ConnectionError, redis.TimeoutError) as e:
            # The connection is gone, and with it the hold (the proxy
            # releases what a closed connection held): maybe before the
            # work ended, so it counts as lost.
            pin.give_back(broken=True)
            raise LockLostError(f"LOCKLOST {self.name}: the hold's connection failed ({e}); "
                                "the proxy released the lock when it closed") from e
        except BaseException:
            pin.give_back(broken=True)
            raise
        finally:
            pin.give_back()

    def __enter__(self):
        if not self.acquire():
            raise LockTimeoutError(f"{self._ACQUIRE} {self.name}: WAIT {self.wait_ms} ms ran out")
        return self

    def __exit__(self, *exc):
        self.release()
        return False


class Lock(_Hold):
    """A reentrant lock (LOCK/UNLOCK; Redisson's RLock).

    ``with Lock(r, "orders", lease_ms=..., wait_ms=...) as lk:``
    Without lease_ms the proxy's watchdog renews the lock for as long as
    the hold lasts. fenced=True takes a fencing token (``lk.token``).
    on_lost: called once, as on_lost(lock) from a watcher thread, when the
    hold is found lost (polled every check_ms on the hold's connection;
    ``lk.lost`` is then True)."""

    _ACQUIRE, _RELEASE = "LOCK", "UNLOCK"

    def __init__(self, r, name, *, lease_ms=None, wait_ms=None, fenced=False, on_lost=None,
                 check_ms=1000):
        super().__init__(r, name, lease_ms=lease_ms, wait_ms=wait_ms)
        self.fenced = fenced
        self.token = None
        self.lost = False
        self._on_lost = on_lost
        self.check_ms = check_ms
        self._stop = None

    def _acquire_args(self, wait_ms):
        args = super()._acquire_args(wait_ms)
        return args + ["FENCED"] if self.fenced else args

    def _on_granted(self, reply):
        self.token = reply if isinstance(reply, int) else None
        self.lost = False
        if self._on_lost is not None:
            self._stop = threading.Event()
            threading.Thread(target=self._watch, args=(self._pin, self._stop),
                             name=f"lockproxy-watch {self.name}", daemon=True).start()

    def _hold_ended(self):
        if self._stop is not None:
            self._stop.set()
            self._stop = None

    def _watch(self, pin, stop):
        """The on_lost watcher: polls LOCK.INFO on the hold's connection
        every check_ms, and calls on_lost(self) once when Redis no longer
        records the hold or the connection failed (the proxy then released
        it). redis-py 4 speaks RESP2, so the proxy's push cannot be used."""
        while not stop.wait(self.check_ms / 1000):
            try:
                lost = _fields(pin.call("LOCK.INFO", self.name)).get("hold_count", 0) == 0
            except (LockProxyError, RuntimeError):
                return  # released meanwhile, or not a lock we can ask about
            except Exception:  # noqa: BLE001 - the connection failed
                lost = True
            if stop.is_set():
                return
            if lost:
                self.lost = True
                self._on_lost(self)
                return

    def info(self):
        """LOCK.INFO for this hold's connection, as a dict of str keys."""
        if self._pin is None:
            raise RuntimeError(f"{self.name!r} is not held by this object")
        return _fields(self._pin.call("LOCK.INFO", self.name))

    def check(self):
        """Raises LockLostError if Redis no longer records this hold (its
        lease ran out, or it was force-unlocked). redis-py 4 speaks RESP2
        only, so the proxy's lease-lost push cannot reach it; this is the
        way to ask, e.g. before committing work done under the lock."""
        if self.info().get("hold_count", 0) == 0:
            raise LockLostError(f"LOCKLOST {self.name}: no longer held")


class FencedLock(Lock):
    """Lock(..., fenced=True): ``lk.token`` is the fencing token."""

    def __init__(self, r, name, **kw):
        super().__init__(r, name, fenced=True, **kw)


class FairLock(Lock):
    """A fair lock (FAIRLOCK/FAIRUNLOCK; RFairLock): waiters are granted
    in arrival order."""

    _ACQUIRE, _RELEASE = "FAIRLOCK", "FAIRUNLOCK"

    def __init__(self, r, name, *, lease_ms=None, wait_ms=None, on_lost=None, check_ms=1000):
        super().__init__(r, name, lease_ms=lease_ms, wait_ms=wait_ms, on_lost=on_lost,
                         check_ms=check_ms)


class _ReadLock(Lock):
    _ACQUIRE, _RELEASE = "RLOCK", "RUNLOCK"

    def __init__(self, r, name, *, lease_ms=None, wait_ms=None, on_lost=None, check_ms=1000):
        super().__init__(r, name, lease_ms=lease_ms, wait_ms=wait_ms, on_lost=on_lost,
                         check_ms=check_ms)


class _WriteLock(Lock):
    _ACQUIRE, _RELEASE = "WLOCK", "WUNLOCK"

    def __init__(self, r, name, *, lease_ms=None, wait_ms=None, on_lost=None, check_ms=1000):
        super().__init__(r, name, lease_ms=lease_ms, wait_ms=wait_ms, on_lost=on_lost,
                         check_ms=check_ms)


class ReadWriteLock:
    """A read-write lock (RReadWriteLock): ``rw.read_lock()`` and
    ``rw.write_lock()`` each make one hold object."""

    def __init__(self, r, name):
        self._r = r
        self.name = name

    def read_lock(self, **kw):
        """A read hold; takes Lock's keywords (lease_ms, wait_ms, on_lost, check_ms)."""
        return _ReadLock(self._r, self.name, **kw)

    def write_lock(self, **kw):
        """A write hold; takes Lock's keywords (lease_ms, wait_ms, on_lost, check_ms)."""
        return _WriteLock(self._r, self.name, **kw)


class Semaphore(_Hold):
    """Takes ``permits`` permits of a semaphore (SEM.ACQUIRE/SEM.RELEASE;
    RSemaphore). The permits go back when the hold's connection closes,
    so a crashed holder does not leak them."""

    _ACQUIRE, _RELEASE = "SEM.ACQUIRE", "SEM.RELEASE"

    def __init__(self, r, name, permits=1, *, wait_ms=None):
        super().__init__(r, name, wait_ms=wait_ms)
        self.permits = int(permits)

    def _acquire_args(self, wait_ms):
        args = [self._ACQUIRE, self.name, self.permits]
        return args + ["WAIT", int(wait_ms)] if wait_ms is not None else args

    def _release_args(self):
        return [self._RELEASE, self.name, self.permits]

    @staticmethod
    def try_set_permits(r, name, permits):
        """Creates the semaphore with ``permits`` permits if it is not set.
        True if this call set it."""
        return r.execute_command("SEM.TRYSETPERMITS", name, int(permits)) == 1

    @staticmethod
    def available(r, name):
        return int(r.execute_command("SEM.AVAILABLE", name))
