// Runs inside a sandbox pod, which has no network: listens on 127.0.0.1 at each port given and
// carries every connection accepted there to the runner as a channel over this process's stdin and
// stdout (the exec stream), where the runner relays it to its model proxy or egress proxy. The
// runner passes this file's text to `node -e`, so the image needs node and nothing of ours.
// Usage: node --input-type=module -e <this file> -- <max payload> <window> <max channels> <port>...
//
// Frames, both ways: kind (1 byte), channel (4 bytes), payload length (4 bytes), payload.
//   READY  (pod → runner) every port listens; payload: `<pid> <start time>`, this process's identity
//          in the pod (empty when /proc cannot tell), so that a sweep of the pod spares it
//   OPEN   (pod → runner) a connection was accepted; payload: its port (2 bytes)
//   DATA   bytes of the connection, at most <max payload> a frame and never more unacknowledged
//          than <window> a channel: a slow connection holds its own bytes up, not the others'
//   END    the sender's side of the connection ended (a half-close)
//   CLOSE  the sender is done with the channel; each side sends it once, the id is free after both
//   CREDIT payload: 4 bytes, how many of the channel's bytes the receiver has passed on
// The runner checks every frame it gets from here; this side trusts the runner's.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

// The agent shares the pod with this process: SIGUSR1 would open Node's inspector on the pod's
// loopback, and with it the model traffic. Taking the signal keeps the inspector shut.
process.on('SIGUSR1', () => {});

const [maxPayload, window, maxChannels, ...ports] = process.argv.slice(1).map(Number);
const [READY, OPEN, DATA, END, CLOSE, CREDIT] = [0, 1, 2, 3, 4, 5];
const HEADER = 9;

function fail(reason) {
  process.stderr.write(`pod bridge: ${reason}\n`);
  process.exit(1);
}

function send(kind, id, payload) {
  const frame = Buffer.alloc(HEADER + (payload?.length ?? 0));
  frame.writeUInt8(kind, 0);
  frame.writeUInt32BE(id, 1);
  frame.writeUInt32BE(payload?.length ?? 0, 5);
  payload?.copy(frame, HEADER);
  process.stdout.write(frame);
}

const u32 = (n) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

const channels = new Map();
let lastId = 0;

/** Sends what the connection gave, as far as the runner's window allows, then its end and close. */
function pump(ch) {
  if (ch.closeSent) return;
  while (ch.queue.length > 0 && ch.credit > 0) {
    const head = ch.queue[0];
    const n = Math.min(head.length, ch.credit, maxPayload);
    send(DATA, ch.id, head.subarray(0, n));
    ch.credit -= n;
    if (n === head.length) ch.queue.shift();
    else ch.queue[0] = head.subarray(n);
  }
  if (ch.queue.length > 0) return ch.socket.pause();
  ch.socket.resume();
  if (ch.ended && !ch.endSent) {
    ch.endSent = true;
    send(END, ch.id);
  }
  if (ch.closed) {
    ch.closeSent = true;
    send(CLOSE, ch.id);
    if (ch.closeReceived) channels.delete(ch.id);
  }
}

function accept(port, socket) {
  if (channels.size >= maxChannels) return socket.destroy();
  const id = ++lastId;
  const ch = { id, socket, credit: window, queue: [], ended: false, endSent: false, closed: false };
  ch.closeSent = ch.closeReceived = false;
  channels.set(id, ch);
  const at = Buffer.alloc(2);
  at.writeUInt16BE(port);
  send(OPEN, id, at);
  socket.on('data', (chunk) => {
    if (ch.closeReceived) return;
    ch.queue.push(chunk);
    pump(ch);
  });
  socket.on('end', () => {
    ch.ended = true;
    pump(ch);
  });
  // A connection that broke is given up: what it still had to send goes nowhere.
  socket.on('error', () => {
    ch.queue = [];
    ch.ended = false;
  });
  socket.on('close', () => {
    ch.closed = true;
    pump(ch);
  });
}

/** Writes the runner's frame out; the runner's bytes for a connection already closed here are dropped. */
function receive(kind, id, payload) {
  const ch = channels.get(id);
  if (!ch) fail(`frame of kind ${kind} for channel ${id}, which is not open`);
  const { socket } = ch;
  if (kind === DATA) {
    if (ch.closeSent || socket.destroyed) return;
    socket.write(payload, (err) => {
      if (!err && !ch.closeSent) send(CREDIT, id, u32(payload.length));
    });
  } else if (kind === END) {
    if (!socket.destroyed) socket.end();
  } else if (kind === CLOSE) {
    ch.closeReceived = true;
    ch.queue = [];
    if (socket.writableFinished || socket.destroyed) socket.destroy();
    else socket.end().once('finish', () => socket.destroy());
    if (ch.closeSent) channels.delete(id);
  } else if (kind === CREDIT) {
    ch.credit += payload.readUInt32BE(0);
    pump(ch);
  } else {
    fail(`frame of unknown kind ${kind}`);
  }
}

let pending = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  pending = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
  while (pending.length >= HEADER) {
    const length = pending.readUInt32BE(5);
    if (length > maxPayload) fail(`frame of ${length} bytes`);
    if (pending.length < HEADER + length) break;
    receive(pending.readUInt8(0), pending.readUInt32BE(1), pending.subarray(HEADER, HEADER + length));
    pending = pending.subarray(HEADER + length);
  }
});
// The runner closed the bridge, or the exec stream is gone: so is every connection.
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));

/** `<pid> <start time>` from /proc/self/stat (the fields after the name's last `) `), or nothing. */
function identity() {
  try {
    const stat = readFileSync('/proc/self/stat', 'latin1');
    const start = stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[19];
    return /^\d+$/.test(start ?? '') ? Buffer.from(`${process.pid} ${start}`, 'latin1') : undefined;
  } catch {
    return undefined;
  }
}

let listening = 0;
for (const port of ports) {
  const server = createServer({ allowHalfOpen: true }, (socket) => accept(port, socket));
  server.on('error', (err) => fail(`cannot listen on 127.0.0.1:${port}: ${err.code ?? err.message}`));
  server.listen(port, '127.0.0.1', () => {
    if (++listening === ports.length) send(READY, 0, identity());
  });
}
