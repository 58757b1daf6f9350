import { spawn } from 'node:child_process';
import { PassThrough, Writable, type Readable } from 'node:stream';
import { Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';
import type { SandboxPod } from './pods.js';

// How the runner runs a command in a sandbox: over the pod's exec API (the API server and the
// kubelet in between), with stdin streamed in and stdout streamed out. The command line is seen by
// whoever can list the pod's processes (the agent included), so it never carries a credential; no
// credential is needed in the pod at all, since the runner does every network operation itself.

export interface ExecResult {
  /** The command's exit code (-1 when the API server reported a failure without one). */
  code: number;
  /** The end of what the command wrote on stderr, for an error message. */
  stderr: string;
}

export interface ExecIo {
  stdin?: Readable;
  stdout?: Writable;
  /** Ends the command (and the stream) early: a pod flooding the runner is cut off. */
  signal?: AbortSignal;
}

export interface PodExec {
  /** Runs `argv` in the sandbox; resolves once it exits and its stdout has been written out. */
  run(argv: string[], io?: ExecIo): Promise<ExecResult>;
}

const STDERR_KEPT = 8 * 1024;

/** Keeps the last bytes written to it. */
function stderrTail(): { sink: Writable; text: () => string } {
  let kept = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      kept = (kept + chunk.toString('utf8')).slice(-STDERR_KEPT);
      done();
    },
  });
  return { sink, text: () => kept.trim() };
}

/** The exit code an exec's closing status carries. */
export function exitCode(status: V1Status): number {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  const code = cause?.message === undefined ? NaN : Number(cause.message);
  return Number.isInteger(code) ? code : -1;
}

/**
 * Bytes sent to the pod's stdin that may wait in the connection to the API server before the
 * runner's side stops reading what it sends (client-node sends every chunk at once, whatever the
 * connection has yet to write): a pod that does not read its stdin cannot make the runner hold more.
 */
const STDIN_BUFFERED_MAX = 1024 * 1024;
const STDIN_POLL_MS = 20;

/** The connection client-node's exec gives (a `ws` WebSocket). */
type ExecSocket = Awaited<ReturnType<Exec['exec']>>;

/** Exec into the sandbox pod through the API server (pods/exec, which the runner's Role grants). */
export function kubeExec(kubeConfig: KubeConfig, pod: SandboxPod): PodExec {
  const exec = new Exec(kubeConfig);
  return {
    run(argv, io = {}) {
      const stderr = stderrTail();
      // Both ways with backpressure, which client-node does not give: what the pod writes is read
      // from the connection only as fast as the caller takes it, and what the caller sends is read
      // from it only as fast as the connection writes it out.
      let socket: ExecSocket | null = null;
      const target = io.stdout ?? new PassThrough().resume();
      const stdout = new Writable({
        write(chunk: Buffer, _enc, done) {
          if (!target.write(chunk) && socket) {
            const paused = socket;
            paused.pause();
            target.once('drain', () => paused.resume());
          }
          done();
        },
        final(done) {
          target.end();
          done();
        },
      });
      const stdin = io.stdin ? new PassThrough() : null;
      return new Promise<ExecResult>((resolve, reject) => {
        let status: V1Status | null = null;
        exec
          .exec(pod.namespace, pod.name, pod.container, argv, stdout, stderr.sink, stdin, false, (s) => {
            status = s;
          })
          .then((ws) => {
            socket = ws;
            if (io.stdin && stdin) pump(io.stdin, stdin, ws);
            io.signal?.addEventListener('abort', () => ws.close(), { once: true });
            if (io.signal?.aborted) ws.close();
            ws.on('error', reject);
            ws.on('close', () => {
              io.stdin?.unpipe?.();
              if (!status && io.signal?.aborted) return resolve({ code: -1, stderr: 'cut off by the runner' });
              if (!status) return reject(new Error(`exec in ${pod.name} ended without a status`));
              resolve({ code: exitCode(status), stderr: stderr.text() || (status.message ?? '') });
            });
          }, reject);
      });
    },
  };
}

/** Moves the caller's stdin to client-node's, pausing it while the connection holds too much unsent. */
function pump(from: Readable, to: PassThrough, ws: ExecSocket): void {
  const wait = () => {
    if (ws.readyState !== ws.OPEN || ws.bufferedAmount <= STDIN_BUFFERED_MAX) return void from.resume();
    setTimeout(wait, STDIN_POLL_MS).unref();
  };
  from.on('data', (chunk: Buffer) => {
    to.write(chunk);
    if (ws.bufferedAmount > STDIN_BUFFERED_MAX) {
      from.pause();
      setTimeout(wait, STDIN_POLL_MS).unref();
    }
  });
  from.once('end', () => to.end());
  from.once('error', () => to.end());
}

/**
 * A stand-in for a pod, for tests where no container can run (kwok's pods have none): the command
 * runs as a local process with nothing of the runner's environment but PATH. It shows what the
 * commands the runner sends do, not what the exec API does with them.
 */
export function localExec(env: Record<string, string> = {}): PodExec {
  return {
    run(argv, io = {}) {
      const stderr = stderrTail();
      return new Promise<ExecResult>((resolve, reject) => {
        const child = spawn(argv[0]!, argv.slice(1), {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        child.on('error', reject);
        // Cut off as an exec's stream is: the command killed, and its output no longer waited for
        // (a process it left behind may hold it open).
        const kill = () => {
          child.kill('SIGKILL');
          child.stdout.destroy();
          child.stderr.destroy();
        };
        io.signal?.addEventListener('abort', kill, { once: true });
        if (io.signal?.aborted) kill();
        child.stderr.pipe(stderr.sink);
        if (io.stdout) child.stdout.pipe(io.stdout, { end: false });
        else child.stdout.resume();
        if (io.stdin) io.stdin.pipe(child.stdin);
        else child.stdin.end();
        // A command that exits without reading all its input is not an error of the stream.
        child.stdin.on('error', () => undefined);
        child.on('close', (code, signal) => resolve({ code: code ?? (signal ? -1 : 0), stderr: stderr.text() }));
      });
    },
  };
}
