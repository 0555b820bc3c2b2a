'use strict';
const Redis = require('ioredis');
const suite = require('./common');

const { version } = require('ioredis/package.json');
console.log(`lockproxy-client ${require('..').VERSION}, ioredis ${version}, Node.js ${process.version}`);
suite('ioredis', async ({ tls, unix } = {}) => {
  const opts = unix ? { path: unix, lazyConnect: true }
    : { host: '127.0.0.1', port: Number(process.env.LP_PORT), lazyConnect: true };
  if (tls) Object.assign(opts, { port: tls.port, tls: { ca: tls.ca, cert: tls.cert, key: tls.key } });
  const r = new Redis(opts);
  r.on('error', (err) => console.error('ioredis:', err.message));
  await r.connect();
  return r;
}, async (r) => r.disconnect());
