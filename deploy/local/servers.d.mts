import type { ChildProcess, SpawnOptions } from 'node:child_process';

/** How a process ended: its exit code, or the signal that ended it. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A server process we started; stopped by its pid, never by name. */
export interface LocalServer {
  url: string;
  pid: number;
  /** The port it listens on, so a restart can come back on the same address. */
  port: number;
  /** Resolves when the process has exited, whatever stopped it. */
  exited: Promise<ProcessExit>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface ServerOptions {
  binary: string;
  /** Data lives here; reuse it to restart on the same store. */
  dir: string;
  port?: number;
  onLine?: (line: string) => void;
}

export interface NatsServerOptions extends ServerOptions {
  /** Text of a configuration file (its `authorization`), written to `dir` with mode 0600. */
  config?: string;
}

export declare function startNatsServer(opts: NatsServerOptions): Promise<LocalServer>;
export declare function startFerretDb(opts: ServerOptions): Promise<LocalServer>;

export declare function spawnGuarded(command: string, args: readonly string[], options: SpawnOptions): ChildProcess;
