'use strict';
const { createClient } = require('redis');
const suite = require('./common');

const { version } = require('redis/package.json');
console.log(`lockproxy-client ${require('..').VERSION}, node-redis ${version}, Node.js ${process.version}`);
suite('node-redis', async ({ tls, unix } = {}) => {
  let socket = tls
    ? { host: '127.0.0.1', port: tls.port, tls: true, ca: tls.ca, cert: tls.cert, key: tls.key }
    : { host: '127.0.0.1', port: Number(process.env.LP_PORT) };
  if (unix) socket = { path: unix };
  const r = createClient({ socket });
  r.on('error', (err) => console.error('node-redis:', err.message));
  return r.connect();
}, async (r) => { if (r.isOpen) r.destroy(); });
