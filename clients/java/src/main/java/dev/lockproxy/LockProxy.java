package dev.lockproxy;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.SafeEncoder;

/**
 * Locks, read-write, fair and fenced locks and semaphore permits through
 * lockproxy, over a Jedis {@link JedisPool} (Jedis 4 or 5).
 *
 * <p>Design: a hold pins one pooled connection. lockproxy binds a lock to
 * the connection that took it (owner, watchdog renewal, release when it
 * closes), while a pool hands each {@code getResource()} any idle
 * connection. So every acquire takes one {@link Jedis} from the pool, sends
 * the acquire on it, keeps it for the life of the hold, sends the release on
 * it, and only then returns it. One {@code LockProxy} (and its pool) may be
 * shared by any number of threads; a {@link Hold} belongs to the thread
 * that took it. Use it with try-with-resources:
 *
 * <pre>{@code
 * LockProxy locks = new LockProxy(new JedisPool("127.0.0.1", 7379));
 * try (LockProxy.Hold h = locks.lock("orders", null, 5000L)) {
 *     // the work the lock protects
 * }
 * }</pre>
 *
 * <p>Jedis speaks RESP2 here, which cannot carry the proxy's lease-lost
 * push: {@link Hold#check()} asks instead. Not tested in this repository:
 * the test machines reach no Maven repository (see README.md).
 */
public final class LockProxy {
    /** Version of this client. */
    public static final String VERSION = "0.1.0";

    /** An error reply of lockproxy; {@link #code()} is its first word. */
    public static class LockProxyException extends RuntimeException {
        private final String code;

        LockProxyException(String message) {
            super(message);
            int sp = message.indexOf(' ');
            this.code = sp < 0 ? message : message.substring(0, sp);
        }

        public String code() {
            return code;
        }
    }

    /** LOCKLOST: the lease was lost before the release. */
    public static final class LockLostException extends LockProxyException {
        LockLostException(String m) {
            super(m);
        }
    }

    /** NOTOWNER: released by a connection that does not hold it. */
    public static final class NotOwnerException extends LockProxyException {
        NotOwnerException(String m) {
            super(m);
        }
    }

    /** The wait ran out (or a try found the lock taken). */
    public static final class NotAcquiredException extends LockProxyException {
        NotAcquiredException(String m) {
            super(m);
        }
    }

    private static final class Cmd implements ProtocolCommand {
        private final byte[] raw;

        Cmd(String name) {
            raw = SafeEncoder.encode(name);
        }

        @Override
        public byte[] getRaw() {
            return raw;
        }
    }

    private static LockProxyException mapped(JedisDataException e) {
        String m = e.getMessage() == null ? "ERR" : e.getMessage();
        if (m.startsWith("LOCKLOST")) {
            return new LockLostException(m);
        }
        if (m.startsWith("NOTOWNER")) {
            return new NotOwnerException(m);
        }
        return new LockProxyException(m);
    }

    private static Object call(Jedis j, String cmd, List<String> args) {
        try {
            return j.sendCommand(new Cmd(cmd), args.toArray(new String[0]));
        } catch (JedisDataException e) {
            throw mapped(e);
        }
    }

    /** One granted hold on one pinned connection. */
    public final class Hold implements AutoCloseable {
        private Jedis jedis;
        private final String release;
        private final List<String> releaseArgs;
        /** The fencing token of a fenced lock, else -1. */
        public final long token;

        private Hold(Jedis jedis, String release, List<String> releaseArgs, long token) {
            this.jedis = jedis;
            this.release = release;
            this.releaseArgs = releaseArgs;
            this.token = token;
        }

        /** Releases the hold (LockLostException if the lease was lost first). */
        public void unlock() {
            Jedis j = jedis;
            if (j == null) {
                throw new IllegalStateException("already released");
            }
            jedis = null;
            try {
                call(j, release, releaseArgs);
            } catch (JedisConnectionException e) {
                // The connection failed, and with it the hold (the proxy
                // releases what a closed connection held).
                throw new LockLostException("LOCKLOST " + releaseArgs.get(0)
                        + ": the hold's connection failed (" + e.getMessage() + ")");
            } finally {
                j.close(); // back to the pool (a broken connection is dropped)
            }
        }

        /** Throws LockLostException if Redis no longer records this hold. */
        public void check() {
            Object info = call(jedis, "LOCK.INFO", List.of(releaseArgs.get(0)));
            List<?> kv = (List<?>) info;
            for (int i = 0; i + 1 < kv.size(); i += 2) {
                Object k = kv.get(i);
                String key = k instanceof byte[] ? new String((byte[]) k, StandardCharsets.UTF_8)
                        : String.valueOf(k);
                if (key.equals("hold_count") && ((Long) kv.get(i + 1)) == 0L) {
                    throw new LockLostException("LOCKLOST " + releaseArgs.get(0) + ": no longer held");
                }
            }
        }

        @Override
        public void close() {
            if (jedis != null) {
                unlock();
            }
        }
    }

    private final JedisPool pool;

    public LockProxy(JedisPool pool) {
        this.pool = pool;
    }

    private Hold acquire(String cmd, String release, List<String> args, List<String> releaseArgs) {
        Jedis j = pool.getResource();
        Object reply;
        try {
            // A wait may outlast the pool's socket timeout (2 s by default):
            // read this reply without one, as Jedis does for BLPOP.
            j.getConnection().setTimeoutInfinite();
            try {
                reply = call(j, cmd, args);
            } finally {
                j.getConnection().rollbackTimeout();
            }
        } catch (RuntimeException e) {
            j.close();
            throw e;
        }
        if (reply == null) {
            j.close();
            throw new NotAcquiredException(cmd + " " + args.get(0) + ": not acquired: the wait ran out");
        }
        long token = reply instanceof Long ? (Long) reply : -1L;
        return new Hold(j, release, releaseArgs, token);
    }

    private static List<String> opts(String name, Long leaseMs, Long waitMs, boolean fenced) {
        List<String> a = new ArrayList<>();
        a.add(name);
        if (leaseMs != null) {
            a.add("LEASE");
            a.add(Long.toString(leaseMs));
        }
        if (waitMs != null) {
            a.add("WAIT");
            a.add(Long.toString(waitMs));
        }
        if (fenced) {
            a.add("FENCED");
        }
        return a;
    }

    /** LOCK name [LEASE leaseMs] [WAIT waitMs]; null: no lease (watchdog) / wait until granted. */
    public Hold lock(String name, Long leaseMs, Long waitMs) {
        return acquire("LOCK", "UNLOCK", opts(name, leaseMs, waitMs, false), List.of(name));
    }

    /** LOCK ... FENCED: {@link Hold#token} is the fencing token. */
    public Hold fencedLock(String name, Long leaseMs, Long waitMs) {
        return acquire("LOCK", "UNLOCK", opts(name, leaseMs, waitMs, true), List.of(name));
    }

    /** One attempt (WAIT 0). */
    public Hold tryLock(String name, Long leaseMs) {
        return lock(name, leaseMs, 0L);
    }

    public Hold fairLock(String name, Long leaseMs, Long waitMs) {
        return acquire("FAIRLOCK", "FAIRUNLOCK", opts(name, leaseMs, waitMs, false), List.of(name));
    }

    public Hold readLock(String name, Long leaseMs, Long waitMs) {
        return acquire("RLOCK", "RUNLOCK", opts(name, leaseMs, waitMs, false), List.of(name));
    }

    public Hold writeLock(String name, Long leaseMs, Long waitMs) {
        return acquire("WLOCK", "WUNLOCK", opts(name, leaseMs, waitMs, false), List.of(name));
    }

    /** SEM.ACQUIRE name permits [WAIT waitMs]; the hold's unlock() releases them. */
    public Hold acquirePermits(String name, int permits, Long waitMs) {
        List<String> a = new ArrayList<>(List.of(name, Integer.toString(permits)));
        if (waitMs != null) {
            a.add("WAIT");
            a.add(Long.toString(waitMs));
        }
        return acquire("SEM.ACQUIRE", "SEM.RELEASE", a, List.of(name, Integer.toString(permits)));
    }

    /** SEM.TRYSETPERMITS: true if this call set the semaphore. */
    public boolean trySetPermits(String name, int permits) {
        try (Jedis j = pool.getResource()) {
            return Long.valueOf(1L).equals(
                    call(j, "SEM.TRYSETPERMITS", List.of(name, Integer.toString(permits))));
        }
    }
}
