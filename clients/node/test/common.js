// The lockproxy Node.js client's tests, over one client library
// (ioredis.test.js, redis.test.js give `connect(options)`). Run by
// tests/clients/run.sh lib-node-ioredis|lib-node-redis, which starts a
// proxy (--lock-watchdog-timeout 900) and Redis and sets LP_*.
'use strict';
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const lp = require('..');

const env = process.env;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function within(p, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

// connect({ tls, unix }) -> Promise of a connected base client; close(c).
// unix: the proxy's Unix socket path (LP_UNIX).
module.exports = function suite(lib, connect, close) {
  const bases = [];
  const lockClients = [];
  async function locks(opts) {
    const base = await connect(opts);
    bases.push(base);
    const l = new lp.LockClient(base);
    lockClients.push(l);
    return { base, l };
  }
  after(async () => {
    for (const l of lockClients) await l.close();
    for (const b of bases) await close(b);
  });

  // tasks async tasks share one LockClient (one base client) and lock
  // names; a per-name flag must be free inside the critical section.
  async function hammer(l, names, tasks, rounds) {
    const inside = new Set();
    const errors = [];
    let count = 0;
    await Promise.all(Array.from({ length: tasks }, async (_, t) => {
      for (let i = 0; i < rounds; i++) {
        const name = names[(t + i) % names.length];
        try {
          await l.withLock(name, { waitMs: 20000 }, async () => {
            if (inside.has(name)) errors.push(`two holders of ${name}`);
            inside.add(name);
            await sleep(1);
            count++;
            inside.delete(name);
          });
        } catch (err) {
          errors.push(err.message);
        }
      }
    }));
    assert.deepEqual(errors, []);
    assert.equal(count, tasks * rounds);
  }

  test(`${lib}: async tasks share one client`, async () => {
    const { base, l } = await locks();
    await hammer(l, [`${lib}:shared:a`, `${lib}:shared:b`, `${lib}:shared:c`], 20, 20);
    // Nothing left held, and the base client was never used for a hold.
    assert.ok(l.idle.length <= 8);
    for (const n of ['a', 'b', 'c']) {
      const h = await l.tryLock(`${lib}:shared:${n}`);
      await h.unlock();
    }
    assert.ok(base);
  });

  test(`${lib}: try/finally, and Symbol.asyncDispose for await using`, async () => {
    const { l } = await locks();
    const h = await l.lock(`${lib}:plain`, { waitMs: 5000 });
    try {
      assert.equal((await h.info()).hold_count, 1);
      await assert.rejects(l.tryLock(`${lib}:plain`), lp.LockTimeoutError);
    } finally {
      assert.equal(await h.unlock(), 1);
    }
    if (Symbol.asyncDispose) {
      const d = await l.lock(`${lib}:plain`);
      await d[Symbol.asyncDispose]();
      assert.equal(d.held, false);
    }
  });

  test(`${lib}: a wait woken by another client's unlock`, async () => {
    const a = (await locks()).l;
    const b = (await locks()).l;
    const h = await a.lock(`${lib}:wake`);
    let at = 0;
    const waiting = b.lock(`${lib}:wake`, { waitMs: 30000 }).then((w) => { at = Date.now(); return w; });
    await sleep(300);
    assert.equal(at, 0, 'the waiter got the lock while it was held');
    const released = Date.now();
    await h.unlock();
    const w = await within(waiting, 5000, 'the woken wait');
    assert.ok(at - released < 1000, `woken ${at - released} ms after the release`);
    await w.unlock();
  });

  test(`${lib}: an AbortSignal abandons the wait`, async () => {
    const { l } = await locks();
    const h = await l.lock(`${lib}:abort`);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const start = Date.now();
    await assert.rejects(l.lock(`${lib}:abort`, { signal: ac.signal }), { name: 'AbortError' });
    assert.ok(Date.now() - start < 2000);
    await sleep(100);
    // The proxy dropped the wait: only the holder is listed.
    const probe = await l.tryLock(`${lib}:probe`);
    const list = await probe.conn.send(['LOCK.LIST', `${lib}:abort`]);
    await probe.unlock();
    assert.equal(list.length, 1, JSON.stringify(list));
    await h.unlock();
    const again = await l.tryLock(`${lib}:abort`); // the abandoned wait took nothing
    await again.unlock();
    // Aborted before it starts.
    await assert.rejects(l.lock(`${lib}:abort`, { signal: AbortSignal.abort() }), { name: 'AbortError' });
  });

  test(`${lib}: a lost lease: the 'lost' event and LockLostError`, async () => {
    const { l } = await locks();
    const h = await l.lock(`${lib}:lease`, { leaseMs: 200 });
    const pushes = h.conn.push;
    const lost = new Promise((resolve) => h.once('lost', resolve));
    const seenByClient = new Promise((resolve) => l.once('lost', (hold) => resolve(hold)));
    await sleep(500);
    if (pushes) {
      assert.match(await within(lost, 5000, 'the lost event'), /lease lost \(LOCK /);
      assert.equal(await seenByClient, h);
      assert.equal(h.lost, true);
    }
    await assert.rejects(h.unlock(), lp.LockLostError);

    const f = await l.lock(`${lib}:forced`);
    const other = (await locks()).l;
    const p = await other.tryLock(`${lib}:other`);
    assert.equal(await p.conn.send(['FORCEUNLOCK', `${lib}:forced`]), 1);
    await p.unlock();
    await assert.rejects(f.unlock(), lp.LockLostError);
  });

  test(`${lib}: a dropped connection is a lost hold`, async () => {
    const { l } = await locks();
    const h = await l.lock(`${lib}:dropped`);
    const id = await h.conn.send(['CLIENT', 'ID']);
    const lost = new Promise((resolve) => h.once('lost', resolve));
    const k = await l.tryLock(`${lib}:killer`);
    await k.conn.send(['CLIENT', 'KILL', 'ID', String(id)]);
    await k.unlock();
    assert.equal(await within(lost, 5000, 'the lost event'), 'the connection closed');
    await assert.rejects(h.unlock(), lp.LockLostError);
    const again = await l.tryLock(`${lib}:dropped`); // the proxy released it
    await again.unlock();
  });

  test(`${lib}: the lease-lost push is delivered (RESP3)`, async (t) => {
    const { l } = await locks();
    const h = await l.lock(`${lib}:pushed`, { leaseMs: 150 });
    if (!h.conn.push) {
      await h.unlock().catch(() => {});
      t.skip('this client library speaks RESP2 here: no push');
      return;
    }
    const reason = await within(new Promise((r) => h.once('lost', r)), 5000, 'the lost event');
    assert.equal(reason, `lease lost (LOCK ${lib}:pushed)`);
    await assert.rejects(h.unlock(), lp.LockLostError);
  });

  test(`${lib}: read-write, fair, fenced, semaphore`, async () => {
    const { l } = await locks();
    const a = await l.lock(`${lib}:fenced`, { fenced: true });
    await a.unlock();
    const b = await l.lock(`${lib}:fenced`, { fenced: true });
    await b.unlock();
    assert.ok(Number(b.token) > Number(a.token), `${b.token} after ${a.token}`);

    const r1 = await l.readLock(`${lib}:rw`);
    const r2 = await l.readLock(`${lib}:rw`);
    await assert.rejects(l.writeLock(`${lib}:rw`, { waitMs: 0 }), lp.LockTimeoutError);
    await r1.unlock();
    await r2.unlock();
    await (await l.writeLock(`${lib}:rw`, { waitMs: 0 })).unlock();

    const f = await l.fairLock(`${lib}:fair`);
    const order = [];
    const waiters = [];
    for (let i = 0; i < 3; i++) {
      waiters.push(l.fairLock(`${lib}:fair`, { waitMs: 20000 }).then(async (w) => {
        order.push(i);
        await w.unlock();
      }));
      await sleep(150);
    }
    await f.unlock();
    await Promise.all(waiters);
    assert.deepEqual(order, [0, 1, 2]);

    const sem = `${lib}:sem:${Date.now()}`;
    assert.equal(await l.trySetPermits(sem, 2), true);
    const p1 = await l.acquirePermits(sem);
    const p2 = await l.acquirePermits(sem);
    await assert.rejects(l.acquirePermits(sem, 1, { waitMs: 0 }), lp.LockTimeoutError);
    await p1.unlock();
    await p2.unlock();
    await assert.rejects(l.acquirePermits(`${lib}:unset`), lp.NotInitError);
  });

  test(`${lib}: TLS with a client certificate`, async () => {
    const tls = {
      port: Number(env.LP_TLS_PORT), ca: fs.readFileSync(env.LP_CA),
      cert: fs.readFileSync(env.LP_CLIENT_CERT), key: fs.readFileSync(env.LP_CLIENT_KEY),
    };
    const { l } = await locks({ tls });
    await hammer(l, [`${lib}:tls:a`, `${lib}:tls:b`], 5, 10);
  });

  // A sidecar's clients on lockproxy --listen unix:///PATH: the base
  // client's own Unix socket option; the hold connections it duplicates
  // take the same path.
  test(`${lib}: a Unix socket`, async () => {
    const { l } = await locks({ unix: env.LP_UNIX });
    await hammer(l, [`${lib}:unix:a`, `${lib}:unix:b`], 5, 10);
    const h = await l.lock(`${lib}:unix:held`);
    assert.equal((await h.info()).hold_count, 1);
    await assert.rejects(l.tryLock(`${lib}:unix:held`), lp.LockTimeoutError);
    assert.equal(await h.unlock(), 1);
  });
};
