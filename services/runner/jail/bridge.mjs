// Runs inside a sandbox's jail, which has no network but its own loopback: relays connections to
// 127.0.0.1:<port> to a unix socket of the runner's bound into the jail (the model proxy, the
// egress proxy), then writes <ready file> so the harness starts only once every relay listens.
// Usage: node bridge.mjs <ready file> <socket path>=<port> [<socket path>=<port> ...]
import { writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

// The bridge outlives each run (it serves the harness kept warm), and the jail's other processes
// share its uid: SIGUSR1 from one of them would open Node's inspector on the jail's loopback, and
// with it every later turn's model traffic. Taking the signal keeps the inspector shut.
process.on('SIGUSR1', () => {});

const [readyFile, ...relays] = process.argv.slice(2);
let waiting = relays.length;
for (const relay of relays) {
  const at = relay.lastIndexOf('=');
  const socketPath = relay.slice(0, at);
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
  server.listen(Number(relay.slice(at + 1)), '127.0.0.1', () => {
    if (--waiting === 0) writeFileSync(readyFile, 'ready\n');
  });
}
