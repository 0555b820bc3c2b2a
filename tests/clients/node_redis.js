// node-redis (the official Node.js client) against lockproxy with its
// defaults: RESP3 (HELLO 3), auto-pipelining, multi() as MULTI/EXEC. Run
// by run.sh, which starts the proxies and sets LP_*. Exits non-zero on the
// first failure.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { createClient } = require('redis');

const env = process.env;
const port = Number(env.LP_PORT);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const clients = [];

async function connect(options) {
  const c = createClient(options);
  c.on('error', (err) => console.error('client error:', err.message));
  clients.push(c);
  await c.connect();
  return c;
}

// A field of a LOCK.INFO reply: a map under RESP3 (an object, or a Map
// with a type mapping), a flat array under RESP2.
function field(info, name) {
  if (Array.isArray(info)) return info[info.indexOf(name) + 1];
  if (info instanceof Map) return info.get(name);
  return info[name];
}

// Resolves with what p resolves to, or rejects after ms.
function within(p, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

async function basics() {
  const c = await connect({ url: `redis://127.0.0.1:${port}` }); // defaults: RESP3 (node-redis 6)
  assert.equal(await c.ping(), 'PONG');
  assert.equal(await c.sendCommand(['LOCK', 'nr:a']), 'OK');
  const info = await c.sendCommand(['LOCK.INFO', 'nr:a']);
  assert.equal(field(info, 'locked'), 1);
  assert.equal(field(info, 'hold_count'), 1);
  assert.equal(await c.sendCommand(['UNLOCK', 'nr:a']), 1);
  const other = await connect({ url: `redis://127.0.0.1:${port}` });
  assert.equal(await other.sendCommand(['LOCK', 'nr:held']), 'OK');
  assert.equal(await c.sendCommand(['TRYLOCK', 'nr:held']), null);
  // Explicitly RESP3: LOCK.INFO is a map, nil the RESP3 null.
  const c3 = await connect({ url: `redis://127.0.0.1:${port}`, RESP: 3 });
  const info3 = await c3.sendCommand(['LOCK.INFO', 'nr:held']);
  assert.ok(!Array.isArray(info3) && field(info3, 'locked') === 1, JSON.stringify(info3));
  assert.equal(await c3.sendCommand(['TRYLOCK', 'nr:held']), null);
  // And RESP2.
  const c2 = await connect({ url: `redis://127.0.0.1:${port}`, RESP: 2 });
  assert.equal(await c2.sendCommand(['TRYLOCK', 'nr:held']), null);
  assert.deepEqual((await c2.sendCommand(['LOCK.INFO', 'nr:held'])).slice(0, 2), ['locked', 1]);
  console.log('ok: connect with defaults, LOCK/UNLOCK, LOCK.INFO (a RESP3 map), nulls, RESP2');
}

async function pipelines() {
  const c = await connect({ url: `redis://127.0.0.1:${port}` });
  // Auto-pipelining: commands issued together go in one write.
  const replies = await Promise.all([
    c.sendCommand(['TRYLOCK', 'nr:p1']),
    c.sendCommand(['TRYLOCK', 'nr:p2']),
    c.sendCommand(['UNLOCK', 'nr:p1']),
    c.sendCommand(['UNLOCK', 'nr:p2']),
  ]);
  assert.deepEqual(replies, ['OK', 'OK', 1, 1]);
  const piped = await c.multi().addCommand(['TRYLOCK', 'nr:p3']).addCommand(['UNLOCK', 'nr:p3'])
    .execAsPipeline();
  assert.deepEqual(piped, ['OK', 1]);
  // multi(): MULTI ... EXEC.
  const tx = await c.multi().addCommand(['TRYLOCK', 'nr:m1']).addCommand(['LOCK.INFO', 'nr:m1'])
    .addCommand(['UNLOCK', 'nr:m1']).exec();
  assert.equal(tx[0], 'OK');
  assert.equal(field(tx[1], 'hold_count'), 1);
  assert.equal(tx[2], 1);
  // node-redis rejects with the queueing error (Redis answers EXECABORT).
  await assert.rejects(c.multi().addCommand(['TRYLOCK', 'nr:m2']).addCommand(['NOSUCH']).exec(),
    /NOSUCH|EXECABORT/);
  assert.equal(await c.sendCommand(['TRYLOCK', 'nr:m2']), 'OK'); // the aborted one never ran
  console.log('ok: auto-pipelining, execAsPipeline, multi/exec, EXECABORT');
}

async function auth() {
  const url = `redis://127.0.0.1:${env.LP_AUTH_PORT}`;
  const c = await connect({ url, password: env.LP_PASSWORD }); // HELLO 3 AUTH default ...
  assert.equal(await c.sendCommand(['LOCK', 'nr:auth']), 'OK');
  assert.equal(await c.sendCommand(['UNLOCK', 'nr:auth']), 1);
  const bad = createClient({ url, password: 'wrong', socket: { reconnectStrategy: false } });
  bad.on('error', () => {});
  await assert.rejects(within(bad.connect(), 5000, 'connect with a wrong password'),
    /WRONGPASS/);
  if (bad.isOpen) bad.destroy();
  console.log('ok: AUTH (HELLO 3 AUTH), WRONGPASS');
}

async function blockingWake() {
  const a = await connect({ url: `redis://127.0.0.1:${port}` });
  const b = await connect({ url: `redis://127.0.0.1:${port}` });
  assert.equal(await a.sendCommand(['LOCK', 'nr:block']), 'OK');
  let done = false;
  const waiting = b.sendCommand(['LOCK', 'nr:block', 'WAIT', '30000']).then((r) => {
    done = true;
    return r;
  });
  await sleep(300);
  assert.equal(done, false, 'the second LOCK returned while the lock was held');
  assert.equal(await a.sendCommand(['UNLOCK', 'nr:block']), 1);
  assert.equal(await within(waiting, 10000, 'the woken LOCK'), 'OK');
  assert.equal(await b.sendCommand(['UNLOCK', 'nr:block']), 1);
  console.log('ok: a blocking LOCK woken by another client');
}

async function leaseLostPush() {
  const c = await connect({ url: `redis://127.0.0.1:${port}`, RESP: 3 });
  const messages = [];
  let wake;
  const arrived = new Promise((r) => { wake = r; });
  await c.subscribe('lockproxy:lease-lost', (message, channel) => {
    messages.push([channel, message]);
    wake();
  });
  // The subscribed RESP3 connection still sends commands.
  assert.equal(await c.sendCommand(['LOCK', 'nr:lost name']), 'OK');
  const direct = await connect({ url: `redis://127.0.0.1:${env.LP_REDIS_PORT}`, RESP: 2 });
  assert.equal(await direct.del('nr:lost name'), 1); // gone behind the proxy's back
  await within(arrived, 10000, 'the lease-lost push');
  assert.deepEqual(messages, [['lockproxy:lease-lost', 'LOCK nr:lost name']]);
  await assert.rejects(c.sendCommand(['UNLOCK', 'nr:lost name']), /LOCKLOST/);
  await c.unsubscribe('lockproxy:lease-lost');
  assert.equal(await c.ping(), 'PONG');
  console.log('ok: RESP3 push of a lost lease to a subscription listener');
}

async function tls() {
  const c = await connect({
    socket: { host: '127.0.0.1', port: Number(env.LP_TLS_PORT), tls: true,
      ca: fs.readFileSync(env.LP_CA) },
  });
  assert.equal(await c.sendCommand(['LOCK', 'nr:tls']), 'OK');
  assert.equal(await c.sendCommand(['UNLOCK', 'nr:tls']), 1);
  console.log('ok: TLS');
}

async function main() {
  const guard = setTimeout(() => {
    console.error('FAIL: node-redis test still running after 90 s');
    process.exit(1);
  }, 90000);
  const { version } = require('redis/package.json');
  console.log(`node-redis ${version} on Node.js ${process.version}`);
  await basics();
  await pipelines();
  await auth();
  await blockingWake();
  await leaseLostPush();
  await tls();
  for (const c of clients) {
    if (c.isOpen) await c.close();
  }
  clearTimeout(guard);
}

main().catch((err) => {
  console.error('FAIL:', err);
  process.exit(1);
});
