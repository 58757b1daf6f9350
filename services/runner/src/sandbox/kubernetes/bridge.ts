import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import type { Logger } from '@threadwork/platform';
import type { ProcessIdentity } from '../../harness/processes.js';
import type { ExecResult, PodExec } from './exec.js';
import {
  CHANNEL_WINDOW,
  frame,
  FrameError,
  FrameKind,
  FrameReader,
  MAX_CHANNELS,
  MAX_FRAME_PAYLOAD,
  u32,
} from './frames.js';

// A sandbox pod's only ways out, as the jail's bridge is a jail's: a sandbox pod has no network
// at all (a deny-all NetworkPolicy), so the harness's loopback ports inside (the model proxy's, the
// egress proxy's) are served by a script run over exec (jail/pod-bridge.mjs), which carries each
// connection to the runner as a channel multiplexed on the exec's stdout and stdin. The runner
// connects each channel to the unix socket of the route's proxy, where the key is added and the
// egress policy enforced, as for a jail.
//
// Everything that comes out of the pod is the agent's: the script can be killed and its stdout
// written by another process of the pod's. Every frame is checked (kind, channel, port, size,
// window, number of channels) and the first that breaks the protocol stops the bridge.
//
// Backpressure: each channel has a window of CHANNEL_WINDOW bytes each way, sent but not yet
// acknowledged. The receiver acknowledges (CREDIT) only bytes its socket has taken, and the sender
// pauses the socket it reads from while the window is used up. A slow connection thus holds up its
// own bytes and no one else's, and what is buffered on either side stays under MAX_CHANNELS ×
// CHANNEL_WINDOW a direction however the exec stream itself buffers; the pod sending past a window
// is a breach like any other.

export interface PodRoute {
  /** The loopback port in the pod. */
  port: number;
  /** The runner's unix socket its connections are relayed to. */
  socketPath: string;
}

export interface PodBridgeOptions {
  /** Called once, with why, when what came out of the pod broke the protocol; the bridge is stopped by then. */
  refused(reason: string): void;
  logger?: Logger;
  /** How long the script may take to listen on every port (default 30 s); past it the bridge is stopped. */
  readyTimeoutMs?: number;
}

export interface PodBridgeExit extends ExecResult {
  /** Why the bridge was stopped for a breach of the protocol, if it was. */
  refused: string | null;
}

export interface PodBridge {
  /** The script's process in the pod, as it said when ready (null when it could not tell): a sweep spares it. */
  readonly identity: ProcessIdentity | null;
  /** Ends every channel and the script, and resolves once the exec has ended. */
  close(): Promise<void>;
  /** Resolves (never rejects) when the exec has ended, whoever ended it; every channel is closed by then. */
  readonly exited: Promise<PodBridgeExit>;
}

const SCRIPT = join(import.meta.dirname, '..', '..', '..', 'jail', 'pod-bridge.mjs');
const READY_TIMEOUT_MS = 30_000;
/** What a ready frame carries: `<pid> <start time>` of the script in the pod. */
const IDENTITY = /^([1-9]\d{0,9}) (\d{1,20})$/;
/** How long the script has to exit once its stdin ends, before the exec is cut. */
const CLOSE_GRACE_MS = 5_000;

let script: string | null = null;

/**
 * The command that starts the bridge in a pod: the script's text on node's command line, so the
 * image needs node and no file of ours. It carries the limits and the ports, nothing secret.
 */
export function podBridgeArgv(ports: readonly number[]): string[] {
  script ??= readFileSync(SCRIPT, 'utf8');
  const limits = [MAX_FRAME_PAYLOAD, CHANNEL_WINDOW, MAX_CHANNELS];
  return ['node', '--input-type=module', '-e', script, '--', ...[...limits, ...ports].map(String)];
}

interface Channel {
  id: number;
  socket: Socket;
  /** Bytes this side may still send on the channel before the pod acknowledges some. */
  credit: number;
  /** Bytes the pod sent on the channel that are not acknowledged yet. */
  unacked: number;
  /** Read from the socket, waiting for credit; the socket is paused while there is any. */
  queue: Buffer[];
  ended: boolean;
  endSent: boolean;
  closed: boolean;
  closeSent: boolean;
  peerEnded: boolean;
  closeReceived: boolean;
}

/**
 * Starts the bridge in the pod and resolves once it listens on every route's port. Throws if the
 * script ends, breaks the protocol or takes too long before that.
 */
export async function openPodBridge(
  exec: PodExec,
  routes: readonly PodRoute[],
  opts: PodBridgeOptions,
): Promise<PodBridge> {
  const socketPaths = new Map<number, string>();
  for (const { port, socketPath } of routes) {
    if (!Number.isInteger(port) || port < 1 || port > 65535 || socketPaths.has(port)) {
      throw new Error(`the pod bridge cannot listen on port ${port}`);
    }
    socketPaths.set(port, socketPath);
  }
  if (socketPaths.size === 0) throw new Error('a pod bridge needs at least one route');

  const stdin = new PassThrough();
  const abort = new AbortController();
  const channels = new Map<number, Channel>();
  let lastId = 0;
  let stopped = false;
  let refusal: string | null = null;
  let ready = false;
  let identity: ProcessIdentity | null = null;
  let notReady = 'ended';
  let settleReady: (err?: Error) => void = () => undefined;
  const listening = new Promise<void>((resolve, reject) => {
    settleReady = (err) => (err ? reject(err) : resolve());
  });
  listening.catch(() => undefined);

  // Writes to the exec's stdin are not held back on its backpressure: the windows bound them.
  const send = (kind: FrameKind, id: number, payload?: Buffer) => {
    if (!stopped) stdin.write(frame(kind, id, payload));
  };

  function stop(reason: string | null): void {
    if (stopped) return;
    stopped = true;
    for (const ch of channels.values()) ch.socket.destroy();
    channels.clear();
    stdin.end();
    if (reason === null) return;
    refusal = reason;
    abort.abort();
    settleReady(new Error(`the pod bridge was refused: ${reason}`));
    try {
      opts.refused(reason);
    } catch (err) {
      opts.logger?.error({ err }, 'pod bridge: reporting a refusal failed');
    }
  }

  const forget = (ch: Channel) => {
    if (ch.closeSent && ch.closeReceived) channels.delete(ch.id);
  };

  /** Sends what the socket gave, as far as the window allows, then its end and its close. */
  function pump(ch: Channel): void {
    if (stopped || ch.closeSent) return;
    while (ch.queue.length > 0 && ch.credit > 0) {
      const head = ch.queue[0]!;
      const n = Math.min(head.length, ch.credit, MAX_FRAME_PAYLOAD);
      send(FrameKind.data, ch.id, head.subarray(0, n));
      ch.credit -= n;
      if (n === head.length) ch.queue.shift();
      else ch.queue[0] = head.subarray(n);
    }
    if (ch.queue.length > 0) {
      ch.socket.pause();
      return;
    }
    ch.socket.resume();
    if (ch.ended && !ch.endSent) {
      ch.endSent = true;
      send(FrameKind.end, ch.id);
    }
    if (ch.closed) {
      ch.closeSent = true;
      send(FrameKind.close, ch.id);
      forget(ch);
    }
  }

  function open(id: number, payload: Buffer): void {
    if (id <= lastId) throw new FrameError(`channel ${id} opened out of order (the last was ${lastId})`);
    if (payload.length !== 2) throw new FrameError(`an open frame of ${payload.length} bytes`);
    const port = payload.readUInt16BE(0);
    const socketPath = socketPaths.get(port);
    if (socketPath === undefined) throw new FrameError(`a channel to port ${port}, which is not bridged`);
    if (channels.size >= MAX_CHANNELS) throw new FrameError(`more than ${MAX_CHANNELS} channels at once`);
    lastId = id;
    const socket = connect({ path: socketPath, allowHalfOpen: true });
    const ch: Channel = {
      id,
      socket,
      credit: CHANNEL_WINDOW,
      unacked: 0,
      queue: [],
      ended: false,
      endSent: false,
      closed: false,
      closeSent: false,
      peerEnded: false,
      closeReceived: false,
    };
    channels.set(id, ch);
    let connected = false;
    socket.on('connect', () => (connected = true));
    socket.on('data', (chunk: Buffer) => {
      if (ch.closeReceived) return;
      ch.queue.push(chunk);
      pump(ch);
    });
    socket.on('end', () => {
      ch.ended = true;
      pump(ch);
    });
    // A connection that broke is given up: what it still had to send goes nowhere.
    socket.on('error', (err) => {
      ch.queue = [];
      ch.ended = false;
      if (!connected) opts.logger?.warn({ err, port }, 'pod bridge: the route’s socket does not answer');
    });
    socket.on('close', () => {
      ch.closed = true;
      pump(ch);
    });
  }

  function data(ch: Channel, payload: Buffer): void {
    if (ch.peerEnded) throw new FrameError(`data on channel ${ch.id} after its end`);
    if (payload.length === 0) throw new FrameError(`an empty data frame on channel ${ch.id}`);
    ch.unacked += payload.length;
    if (ch.unacked > CHANNEL_WINDOW) throw new FrameError(`channel ${ch.id} sent past its window`);
    // Sent before the pod saw this side's close: dropped, and never acknowledged.
    if (ch.closeSent || ch.socket.destroyed) return;
    const n = payload.length;
    ch.socket.write(payload, (err) => {
      if (err || ch.closeSent) return;
      ch.unacked -= n;
      send(FrameKind.credit, ch.id, u32(n));
    });
  }

  function credit(ch: Channel, payload: Buffer): void {
    if (payload.length !== 4) throw new FrameError(`a credit frame of ${payload.length} bytes`);
    const n = payload.readUInt32BE(0);
    if (n === 0 || ch.credit + n > CHANNEL_WINDOW) {
      throw new FrameError(`channel ${ch.id} acknowledged ${n} bytes it was not sent`);
    }
    ch.credit += n;
    pump(ch);
  }

  /** The pod is done with the channel: what it sent is written out, then the socket is closed. */
  function closed(ch: Channel): void {
    ch.closeReceived = true;
    ch.queue = [];
    const { socket } = ch;
    if (socket.destroyed || socket.writableFinished) socket.destroy();
    else socket.end().once('finish', () => socket.destroy());
    forget(ch);
  }

  function onFrame(kind: number, id: number, payload: Buffer): void {
    if (!ready) {
      if (kind !== FrameKind.ready || id !== 0) {
        throw new FrameError(`a frame of kind ${kind} before the ready frame`);
      }
      const said = IDENTITY.exec(payload.toString('latin1'));
      if (payload.length > 0 && !said) throw new FrameError('a ready frame that names no process');
      identity = said ? { pid: Number(said[1]), started: said[2]! } : null;
      ready = true;
      settleReady();
      return;
    }
    if (kind === FrameKind.open) return open(id, payload);
    const ch = channels.get(id);
    if (!ch || ch.closeReceived) throw new FrameError(`a frame of kind ${kind} on channel ${id}, which is not open`);
    switch (kind) {
      case FrameKind.data:
        return data(ch, payload);
      case FrameKind.end:
        if (ch.peerEnded || payload.length !== 0) throw new FrameError(`a second or bad end of channel ${id}`);
        ch.peerEnded = true;
        if (!ch.closeSent) ch.socket.end();
        return;
      case FrameKind.close:
        if (payload.length !== 0) throw new FrameError(`a close frame of ${payload.length} bytes`);
        return closed(ch);
      case FrameKind.credit:
        return credit(ch, payload);
      default:
        throw new FrameError(`an unexpected frame of kind ${kind}`);
    }
  }

  const reader = new FrameReader(onFrame, (err) => stop(err.message));
  const stdout = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!stopped) {
        try {
          reader.push(chunk);
        } catch (err) {
          opts.logger?.error({ err }, 'pod bridge: relaying a frame failed');
          stop(null);
          abort.abort();
        }
      }
      done();
    },
  });

  const argv = podBridgeArgv([...socketPaths.keys()]);
  const exited: Promise<PodBridgeExit> = Promise.resolve()
    .then(() => exec.run(argv, { stdin, stdout, signal: abort.signal }))
    .catch((err: unknown) => ({ code: -1, stderr: err instanceof Error ? err.message : String(err) }))
    .then((result) => {
      if (!ready)
        settleReady(new Error(`the pod bridge ${notReady} before it listened (exit ${result.code}): ${result.stderr}`));
      stop(null);
      return { ...result, refused: refusal };
    });

  const timer = setTimeout(() => {
    notReady = `did not listen within ${opts.readyTimeoutMs ?? READY_TIMEOUT_MS} ms and was cut off`;
    abort.abort();
  }, opts.readyTimeoutMs ?? READY_TIMEOUT_MS);
  try {
    await listening;
  } catch (err) {
    // Nothing of it is left running when this throws.
    await exited;
    throw err;
  } finally {
    clearTimeout(timer);
  }

  return {
    exited,
    identity,
    async close() {
      stop(null);
      const grace = setTimeout(() => abort.abort(), CLOSE_GRACE_MS);
      await exited;
      clearTimeout(grace);
    },
  };
}
