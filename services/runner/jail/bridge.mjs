// Runs inside a sandbox's jail, which has no network but its own loopback: relays connections to
// 127.0.0.1:<port> to the runner's model proxy on a unix socket bound into the jail, then writes
// <ready file> so the harness starts only once the bridge listens.
// Usage: node bridge.mjs <socket path> <port> <ready file>
import { writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const [socketPath, port, readyFile] = process.argv.slice(2);
const server = createServer((client) => {
  const upstream = connect(socketPath);
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
});
server.listen(Number(port), '127.0.0.1', () => writeFileSync(readyFile, 'ready\n'));
