import { createInterface } from 'node:readline';
import { boundedLines, MAX_LINE_BYTES } from '../lines.js';
import type {
  ClientNotification,
  ClientRequest,
  InitializeResponse,
  RequestId,
  ServerNotification,
  ServerRequest,
} from '@threadwork/codex-protocol';
import type {
  ThreadResumeResponse,
  ThreadStartResponse,
  TurnInterruptResponse,
  TurnStartResponse,
  TurnSteerResponse,
} from '@threadwork/codex-protocol/v2';
import type { Logger } from '@threadwork/platform';
import type { HostedProcess, ProcessExit } from '../host.js';

// A typed JSON-RPC client for `codex app-server`: newline-delimited JSON over the child's stdio,
// no "jsonrpc" field. Three kinds of traffic: our requests (answered by id), the server's
// notifications, and the server's own requests (e.g. `item/tool/requestUserInput`), which need a
// reply. When the process exits, every pending request fails: nothing else would ever answer it.

/** The generated bindings name each request's params; results are paired here for the methods we call. */
interface ResultOf {
  initialize: InitializeResponse;
  'thread/start': ThreadStartResponse;
  'thread/resume': ThreadResumeResponse;
  'turn/start': TurnStartResponse;
  'turn/steer': TurnSteerResponse;
  'turn/interrupt': TurnInterruptResponse;
}
export type CodexMethod = keyof ResultOf;
export type ParamsOf<M extends CodexMethod> = Extract<ClientRequest, { method: M }>['params'];

/** An error the app-server answered with (e.g. -32600 for a steer of a turn that has ended). */
export class CodexRpcError extends Error {
  override name = 'CodexRpcError';
  constructor(
    readonly method: string,
    readonly code: number,
    message: string,
    readonly data: unknown,
  ) {
    super(`${method}: ${message} (${code})`);
  }
}

/** The app-server exited (or was killed) before it answered. */
export class CodexExitedError extends Error {
  override name = 'CodexExitedError';
  constructor(
    readonly exit: ProcessExit,
    readonly stderrTail: string,
  ) {
    super(`codex app-server exited (${exit.signal ?? `code ${exit.code}`})${stderrTail ? `: ${stderrTail}` : ''}`);
  }
}

export type { ProcessExit } from '../host.js';

interface Pending {
  method: string;
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout | undefined;
}

type ServerRequestHandler = (request: ServerRequest) => Promise<unknown>;

const STDERR_TAIL_BYTES = 4_000;

export class CodexRpc {
  private nextId = 1;
  private readonly pending = new Map<RequestId, Pending>();
  private readonly notificationHandlers = new Set<(n: ServerNotification) => void>();
  private serverRequestHandler: ServerRequestHandler | undefined;
  private stderrTail = '';
  private exit: ProcessExit | undefined;
  /** Resolves when the process has exited, with how. */
  readonly exited: Promise<ProcessExit>;

  constructor(
    /** The app-server process, wherever its host runs it. */
    readonly process: HostedProcess,
    private readonly logger: Logger,
  ) {
    const child = process;
    this.exited = child.exited.then(({ code, signal, error }) => {
      // A process that could not be started says why in its place.
      if (error !== undefined) this.stderrTail += `\n${error}`;
      const exit: ProcessExit = { code, signal };
      this.exit = exit;
      const err = new CodexExitedError(exit, this.stderrTail.trim());
      for (const [id, p] of this.pending) {
        if (p.timer) clearTimeout(p.timer);
        this.pending.delete(id);
        p.reject(err);
      }
      return exit;
    });
    child.stdin.on('error', () => {
      // Writing to a process that just died: the exit handler fails the pending requests.
    });
    child.stderr.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    const lines = boundedLines(child.stdout, () => {
      this.logger.error(
        { max_bytes: MAX_LINE_BYTES },
        'the harness wrote a line longer than any it sends; stopping it',
      );
      this.kill();
    });
    createInterface({ input: lines }).on('line', (line) => this.onLine(line));
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  get hasExited(): boolean {
    return this.exit !== undefined;
  }

  /** Calls a method; rejects with CodexRpcError, CodexExitedError, or a timeout. */
  request<M extends CodexMethod>(method: M, params: ParamsOf<M>, timeoutMs = 30_000): Promise<ResultOf[M]> {
    if (this.exit) return Promise.reject(new CodexExitedError(this.exit, this.stderrTail.trim()));
    const id = this.nextId++;
    return new Promise<ResultOf[M]>((resolve, reject) => {
      const timer =
        timeoutMs > 0
          ? setTimeout(() => {
              this.pending.delete(id);
              reject(new Error(`codex ${method} did not answer within ${timeoutMs} ms`));
            }, timeoutMs)
          : undefined;
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
      this.write({ id, method, params });
    });
  }

  notify(method: ClientNotification['method']): void {
    this.write({ method });
  }

  onNotification(handler: (n: ServerNotification) => void): () => void {
    this.notificationHandlers.add(handler);
    return () => this.notificationHandlers.delete(handler);
  }

  /** One handler answers every server request; its result (or error) is sent back as the reply. */
  onServerRequest(handler: ServerRequestHandler): void {
    this.serverRequestHandler = handler;
  }

  /** SIGKILL to the app-server's process group (it and the commands it started). */
  kill(): void {
    if (this.exit) return;
    this.process.kill();
  }

  private write(message: object): void {
    if (this.exit || !this.process.stdin.writable) return;
    this.process.stdin.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    if (!line.trim()) return;
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.logger.debug({ line: line.slice(0, 500) }, 'codex wrote a line that is not JSON');
      return;
    }
    const id = message.id as RequestId | undefined;
    const method = typeof message.method === 'string' ? message.method : undefined;
    if (id !== undefined && method === undefined) {
      this.onResponse(id, message);
    } else if (id !== undefined && method !== undefined) {
      void this.onServerRequestMessage(message as unknown as ServerRequest);
    } else if (method !== undefined) {
      const notification = message as unknown as ServerNotification;
      for (const handler of this.notificationHandlers) {
        try {
          handler(notification);
        } catch (err) {
          this.logger.error({ err, method }, 'codex notification handler failed');
        }
      }
    }
  }

  private onResponse(id: RequestId, message: Record<string, unknown>): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    if (pending.timer) clearTimeout(pending.timer);
    const error = message.error as { code?: number; message?: string; data?: unknown } | undefined;
    if (error) {
      pending.reject(new CodexRpcError(pending.method, error.code ?? -1, error.message ?? 'error', error.data));
    } else {
      pending.resolve(message.result);
    }
  }

  private async onServerRequestMessage(request: ServerRequest): Promise<void> {
    if (!this.serverRequestHandler) {
      this.write({ id: request.id, error: { code: -32601, message: `${request.method} is not handled` } });
      return;
    }
    try {
      const result = await this.serverRequestHandler(request);
      this.write({ id: request.id, result });
    } catch (err) {
      this.write({
        id: request.id,
        error: { code: -32603, message: err instanceof Error ? err.message : String(err) },
      });
    }
  }
}
