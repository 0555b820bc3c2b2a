// ioredis against lockproxy with its defaults (RESP2, a ready check by
// INFO, auto-reconnect). Run by run.sh, which starts the proxies and sets
// LP_*. Exits non-zero on the first failure.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const Redis = require('ioredis');

const env = process.env;
const port = Number(env.LP_PORT);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const clients = [];

function connect(options) {
  const c = new Redis({ host: '127.0.0.1', port, ...options });
  c.on('error', (err) => console.error('client error:', err.message));
  clients.push(c);
  return c;
}

function within(p, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

async function basics() {
  const c = connect();
  assert.equal(await c.ping(), 'PONG');
  assert.equal(await c.call('LOCK', 'io:a'), 'OK');
  const info = await c.call('LOCK.INFO', 'io:a');
  assert.deepEqual(info.slice(0, 4), ['locked', 1, 'hold_count', 1]);
  assert.equal(await c.call('UNLOCK', 'io:a'), 1);
  const other = connect();
  assert.equal(await other.call('LOCK', 'io:held'), 'OK');
  assert.equal(await c.call('TRYLOCK', 'io:held'), null);
  await assert.rejects(c.call('UNLOCK', 'io:held'), /NOTOWNER/);
  console.log('ok: connect with defaults, LOCK/UNLOCK, LOCK.INFO, nil, errors');
}

async function pipelines() {
  const c = connect();
  const p = c.pipeline();
  for (let i = 0; i < 50; i++) p.call('TRYLOCK', `io:p${i}`);
  for (let i = 0; i < 50; i++) p.call('UNLOCK', `io:p${i}`);
  const got = await p.exec();
  assert.deepEqual(got.map(([err, v]) => (err ? err.message : v)),
    Array(50).fill('OK').concat(Array(50).fill(1)));
  // multi(): MULTI ... EXEC.
  const tx = await c.multi().call('TRYLOCK', 'io:m1').call('LOCK.INFO', 'io:m1')
    .call('UNLOCK', 'io:m1').exec();
  assert.equal(tx[0][1], 'OK');
  assert.equal(tx[1][1][3], 1);
  assert.equal(tx[2][1], 1);
  await assert.rejects(c.multi().call('TRYLOCK', 'io:m2').call('NOSUCH').exec(), /EXECABORT/);
  assert.equal(await c.call('TRYLOCK', 'io:m2'), 'OK'); // the aborted one never ran
  console.log('ok: pipeline, multi/exec, EXECABORT');
}

async function auth() {
  const c = connect({ port: Number(env.LP_AUTH_PORT), password: env.LP_PASSWORD });
  assert.equal(await c.call('LOCK', 'io:auth'), 'OK');
  assert.equal(await c.call('UNLOCK', 'io:auth'), 1);
  const bad = new Redis({ host: '127.0.0.1', port: Number(env.LP_AUTH_PORT), password: 'wrong',
    lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  const errors = [];
  bad.on('error', (err) => errors.push(err.message));
  await assert.rejects(within(bad.connect(), 5000, 'connect with a wrong password'));
  assert.ok(errors.some((m) => m.startsWith('WRONGPASS')), errors.join('; '));
  bad.disconnect();
  console.log('ok: AUTH, WRONGPASS');
}

async function blockingWake() {
  const a = connect();
  const b = connect();
  assert.equal(await a.call('LOCK', 'io:block'), 'OK');
  let done = false;
  const waiting = b.call('LOCK', 'io:block', 'WAIT', '30000').then((r) => {
    done = true;
    return r;
  });
  await sleep(300);
  assert.equal(done, false, 'the second LOCK returned while the lock was held');
  assert.equal(await a.call('UNLOCK', 'io:block'), 1);
  assert.equal(await within(waiting, 10000, 'the woken LOCK'), 'OK');
  assert.equal(await b.call('UNLOCK', 'io:block'), 1);
  console.log('ok: a blocking LOCK woken by another client');
}

async function tls() {
  const c = connect({ port: Number(env.LP_TLS_PORT), tls: { ca: fs.readFileSync(env.LP_CA) } });
  assert.equal(await c.call('LOCK', 'io:tls'), 'OK');
  assert.equal(await c.call('UNLOCK', 'io:tls'), 1);
  console.log('ok: TLS');
}

async function main() {
  const guard = setTimeout(() => {
    console.error('FAIL: ioredis test still running after 90 s');
    process.exit(1);
  }, 90000);
  const { version } = require('ioredis/package.json');
  console.log(`ioredis ${version} on Node.js ${process.version}`);
  await basics();
  await pipelines();
  await auth();
  await blockingWake();
  await tls();
  for (const c of clients) c.disconnect();
  clearTimeout(guard);
}

main().catch((err) => {
  console.error('FAIL:', err);
  process.exit(1);
});
