// lockproxy client for Node.js, over ioredis or node-redis.
//
// Design: a hold pins one connection. lockproxy binds a lock to the
// connection that took it (owner, watchdog renewal, release when the
// connection closes, the lease-lost push), and a blocking LOCK is a
// barrier on its connection. A single ioredis/node-redis client is one
// connection that every async task shares: two tasks locking one name on
// it would both be "the owner" (re-entry), and one task's wait would hold
// up every other task's commands. So a LockClient keeps a small pool of
// dedicated connections, made with the client's duplicate() (same host,
// TLS and auth options), and every acquire takes one of them for the life
// of the hold: the acquire, the release and nothing else go out on it.
// Share one LockClient among all tasks.
//
// Each dedicated connection subscribes to lockproxy:lease-lost when it
// speaks RESP3 (ioredis 6, node-redis 6, or RESP: 3), so a lost lease is
// delivered at once as a 'lost' event on the hold and on the LockClient.
// A dedicated connection never reconnects on its own: a dropped one is a
// lost hold ('lost' as well), since the proxy released its locks.
//
// A wait can be abandoned with an AbortSignal: the waiting connection is
// closed, which makes the proxy drop the pending acquire (or release it,
// if it was granted at that moment).
'use strict';
const { EventEmitter } = require('node:events');

const VERSION = '0.1.0';
const CHANNEL = 'lockproxy:lease-lost';

class LockProxyError extends Error {
  constructor(message, code) {
    super(message);
    this.name = this.constructor.name;
    this.code = code;
  }
}
/** LOCKLOST: the lease was lost before the release (expired or taken over). */
class LockLostError extends LockProxyError {}
/** NOTOWNER: released by a connection that does not hold it. */
class NotOwnerError extends LockProxyError {}
/** NOTINIT: the semaphore was never set. */
class NotInitError extends LockProxyError {}
/** UPSTREAM: Redis is down or slow; nothing was granted. */
class UpstreamError extends LockProxyError {}
/** The wait ran out (lock() with waitMs, tryLock()). */
class LockTimeoutError extends LockProxyError {}

const ERRORS = {
  LOCKLOST: LockLostError, NOTOWNER: NotOwnerError, NOTINIT: NotInitError,
  UPSTREAM: UpstreamError,
};

function mapError(err) {
  const msg = String(err && err.message);
  const code = msg.split(' ', 1)[0];
  const Cls = ERRORS[code];
  if (!Cls) return err;
  const e = new Cls(msg, code);
  e.cause = err;
  return e;
}

function abortError(signal) {
  if (signal.reason instanceof Error) return signal.reason;
  const e = new Error('the wait was aborted');
  e.name = 'AbortError';
  e.code = 'ABORT_ERR';
  return e;
}

// ---------------------------------------------------------------------
// One dedicated connection, over either library.
class Conn {
  static async open(base, onPush) {
    const c = new Conn();
    c.closed = false;
    c.push = false;
    c.onPush = onPush;
    c.onEnd = () => {};
    if (typeof base.call === 'function' && typeof base.sendCommand === 'function' &&
        'status' in base) {
      await c.#openIoredis(base);
    } else {
      await c.#openNodeRedis(base);
    }
    return c;
  }

  async #openIoredis(base) {
    const r = base.duplicate({
      lazyConnect: true, retryStrategy: () => null, autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false, maxRetriesPerRequest: 0,
    });
    this.raw = r;
    r.on('error', () => {}); // reported through the failing command or 'end'
    r.on('end', () => this.#ended());
    await r.connect();
    this.send = (args) => r.call(...args);
    this.destroy = () => r.disconnect();
    if (r.options.protocol === 3) {
      r.on('message', (channel, msg) => { if (channel === CHANNEL) this.onPush(String(msg)); });
      await r.subscribe(CHANNEL);
      this.push = true;
    }
  }

  async #openNodeRedis(base) {
    const socket = { ...(base.options && base.options.socket), reconnectStrategy: false };
    const r = base.duplicate({ socket });
    this.raw = r;
    // Without reconnecting, a socket the server closed is an 'error' and
    // the client is no longer open ('end' is for close()/destroy()).
    r.on('error', () => setImmediate(() => { if (!r.isOpen) this.#ended(); }));
    r.on('end', () => this.#ended());
    await r.connect();
    this.send = (args) => r.sendCommand(args.map(String));
    this.destroy = () => (r.destroy ? r.destroy() : r.disconnect());
    let resp = base.options && base.options.RESP;
    if (resp === undefined) {
      try {
        resp = require('@redis/client/dist/lib/RESP/types').DEFAULT_RESP;
      } catch {
        resp = 2;
      }
    }
    if (resp === 3) {
      await r.subscribe(CHANNEL, (msg) => this.onPush(String(msg)));
      this.push = true;
    }
  }

  #ended() {
    if (this.closed) return;
    this.closed = true;
    this.onEnd();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    try { this.destroy(); } catch { /* already gone */ }
  }
}

// ---------------------------------------------------------------------
/** One granted hold on one pinned connection. Events: 'lost' (reason). */
class Hold extends EventEmitter {
  constructor(client, conn, kind, name, releaseArgs, token) {
    super();
    this.client = client;
    this.conn = conn;
    this.kind = kind;
    this.name = name;
    this.releaseArgs = releaseArgs;
    this.token = token;
    this.lost = false;
    conn.onPush = (msg) => {
      const space = msg.indexOf(' ');
      if (msg.slice(space + 1) === name) this.#lose(`lease lost (${msg})`);
    };
    conn.onEnd = () => this.#lose('the connection closed');
  }

  #lose(reason) {
    if (this.lost || !this.conn) return;
    this.lost = true;
    this.emit('lost', reason);
    this.client.emit('lost', this, reason);
  }

  get held() {
    return this.conn !== null;
  }

  /** Releases the hold. Rejects with LockLostError when the lease was lost. */
  async unlock() {
    const conn = this.conn;
    if (!conn) throw new Error(`${this.kind} ${this.name} is not held by this object`);
    this.conn = null;
    conn.onPush = () => {};
    conn.onEnd = () => {};
    if (conn.closed) {
      this.client._giveBack(conn);
      throw new LockLostError(`LOCKLOST ${this.kind} ${this.name}: its connection closed, ` +
        'and the proxy released it', 'LOCKLOST');
    }
    try {
      return await conn.send(this.releaseArgs);
    } catch (err) {
      throw mapError(err);
    } finally {
      this.client._giveBack(conn);
    }
  }

  /** LOCK.INFO for this hold's connection, as an object. */
  async info() {
    if (!this.conn) throw new Error(`${this.name} is not held by this object`);
    const r = await this.conn.send(['LOCK.INFO', this.name]);
    if (Array.isArray(r)) {
      const o = {};
      for (let i = 0; i + 1 < r.length; i += 2) o[String(r[i])] = r[i + 1];
      return o;
    }
    return r instanceof Map ? Object.fromEntries(r) : r;
  }
}
if (Symbol.asyncDispose) {
  // `await using lk = await locks.lock(...)` (Node 24+, or TypeScript 5.2+).
  Hold.prototype[Symbol.asyncDispose] = function dispose() {
    return this.conn ? this.unlock() : Promise.resolve();
  };
}

// ---------------------------------------------------------------------
/**
 * Takes holds through dedicated connections duplicated from `base` (an
 * ioredis Redis or a connected node-redis client). Events: 'lost' (hold,
 * reason). Options: maxIdle (idle connections kept, default 8).
 */
class LockClient extends EventEmitter {
  constructor(base, { maxIdle = 8 } = {}) {
    super();
    this.base = base;
    this.maxIdle = maxIdle;
    this.idle = [];
    this.open = new Set();
    this.closed = false;
  }

  async #take() {
    while (this.idle.length) {
      const c = this.idle.pop();
      if (!c.closed) return c;
    }
    const c = await Conn.open(this.base, () => {});
    this.open.add(c);
    return c;
  }

  _giveBack(conn) {
    conn.onPush = () => {};
    conn.onEnd = () => {};
    if (conn.closed || this.closed || this.idle.length >= this.maxIdle) {
      conn.close();
      this.open.delete(conn);
      return;
    }
    this.idle.push(conn);
  }

  async #acquire(kind, acquireArgs, releaseArgs, name, { signal } = {}) {
    if (this.closed) throw new Error('LockClient is closed');
    if (signal && signal.aborted) throw abortError(signal);
    const conn = await this.#take();
    if (signal && signal.aborted) {
      this._giveBack(conn);
      throw abortError(signal);
    }
    let onAbort;
    const aborted = signal && new Promise((_, reject) => {
      onAbort = () => {
        reject(abortError(signal));
        conn.close(); // the proxy drops the wait (or releases a grant)
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
    const sent = conn.send(acquireArgs);
    let reply;
    try {
      reply = await (aborted ? Promise.race([sent, aborted]) : sent);
    } catch (err) {
      sent.catch(() => {});
      this._giveBack(conn);
      throw signal && signal.aborted ? abortError(signal) : mapError(err);
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
    }
    if (reply === null || reply === undefined) {
      this._giveBack(conn);
      throw new LockTimeoutError(`${acquireArgs[0]} ${name}: the wait ran out`, 'TIMEOUT');
    }
    const token = typeof reply === 'number' || typeof reply === 'bigint' ? reply : undefined;
    return new Hold(this, conn, kind, name, releaseArgs, token);
  }

  static #opts(args, { leaseMs, waitMs, fenced } = {}) {
    if (leaseMs !== undefined) args.push('LEASE', String(leaseMs));
    if (waitMs !== undefined) args.push('WAIT', String(waitMs));
    if (fenced) args.push('FENCED');
    return args;
  }

  /**
   * LOCK: waits until granted, waitMs runs out (LockTimeoutError) or
   * signal aborts. Options: leaseMs, waitMs, fenced (hold.token), signal.
   */
  lock(name, opts = {}) {
    return this.#acquire('lock', LockClient.#opts(['LOCK', name], opts), ['UNLOCK', name], name, opts);
  }

  /** One attempt (WAIT 0); LockTimeoutError when taken. */
  tryLock(name, opts = {}) {
    return this.lock(name, { ...opts, waitMs: 0 });
  }

  fairLock(name, opts = {}) {
    return this.#acquire('fair lock', LockClient.#opts(['FAIRLOCK', name], { ...opts, fenced: false }),
      ['FAIRUNLOCK', name], name, opts);
  }

  readLock(name, opts = {}) {
    return this.#acquire('read lock', LockClient.#opts(['RLOCK', name], { ...opts, fenced: false }),
      ['RUNLOCK', name], name, opts);
  }

  writeLock(name, opts = {}) {
    return this.#acquire('write lock', LockClient.#opts(['WLOCK', name], { ...opts, fenced: false }),
      ['WUNLOCK', name], name, opts);
  }

  /** SEM.ACQUIRE n permits; hold.unlock() gives them back. */
  acquirePermits(name, n = 1, { waitMs, signal } = {}) {
    const args = ['SEM.ACQUIRE', name, String(n)];
    if (waitMs !== undefined) args.push('WAIT', String(waitMs));
    return this.#acquire('permits', args, ['SEM.RELEASE', name, String(n)], name, { signal });
  }

  /** SEM.TRYSETPERMITS: true if this call set the semaphore. */
  async trySetPermits(name, n) {
    const conn = await this.#take();
    try {
      return Number(await conn.send(['SEM.TRYSETPERMITS', name, String(n)])) === 1;
    } catch (err) {
      throw mapError(err);
    } finally {
      this._giveBack(conn);
    }
  }

  /** Runs fn(hold) under the lock and releases it, even when fn throws. */
  async withLock(name, opts, fn) {
    const hold = await this.lock(name, opts);
    try {
      return await fn(hold);
    } finally {
      await hold.unlock();
    }
  }

  /** Closes every dedicated connection (held ones too: their locks go). */
  async close() {
    this.closed = true;
    for (const c of this.open) c.close();
    this.open.clear();
    this.idle = [];
  }
}

module.exports = {
  VERSION, LockClient, Hold, LockProxyError, LockLostError, NotOwnerError, NotInitError,
  UpstreamError, LockTimeoutError,
};
