import type { ProcessExit } from './servers.mjs';

export type ServiceRole = 'runs' | 'repohost' | 'review' | 'threads' | 'runner' | 'gateway';
type Env = Record<string, string>;

export declare const root: string;
/** Every service in the order they start; they stop in reverse. */
export declare const SERVICES: readonly ServiceRole[];

export declare function freePort(): Promise<number>;
export declare function serviceScript(role: string): string;

/** One process of a stack: a server or one replica of a service. A restart makes a new one. */
export interface LaunchedProcess {
  kind: 'server' | 'service';
  /** `nats-server`, `ferretdb`, `runs`, or `runner-1`, … for a service started with `replicas`. */
  name: string;
  /** The service (or the server's name). */
  role: string;
  /** 1, 2, … among the replicas of its role. */
  replica: number;
  pid: number;
  /** A service's whole environment (empty for a server). */
  env: Env;
  /** A server's address. */
  url?: string;
  /** The port it serves on: a server's, or a service's PORT. */
  port?: number;
  /** Where a service answers /readyz, when the stack waits for readiness (not the gateway). */
  healthPort?: number;
  /** A service that answered /readyz (the stack waits for it with `health`, or on a port it picked). */
  ready?: boolean;
  /** Stopped or replaced by the stack itself: its exit is not reported. */
  retired: boolean;
  exited: Promise<ProcessExit>;
  alive(): boolean;
  /** The newest part of what it printed. */
  output(): string;
  /** SIGTERM, SIGKILL after the stack's stop timeout (a server's: 5 s); resolves once it is gone. */
  stop(): Promise<void>;
  /** SIGKILL (a crash); resolves once it is gone. */
  kill(): Promise<void>;
  /** SIGSTOP: it holds its connections and answers nothing. */
  pause(): void;
  /** SIGCONT: it goes on where it stopped. */
  resume(): void;
}

/** nats-server or FerretDB: always at an address. */
export interface LaunchedServer extends LaunchedProcess {
  kind: 'server';
  url: string;
  port: number;
}

export interface ServiceSpec {
  /** The service (its build in services/<role>/dist), or any name with `script`. */
  role: string;
  /**
   * How many processes to start. Given (even 1 or 0), they are named `<role>-1`, `<role>-2`, …;
   * left out, one is started, named `<role>`.
   */
  replicas?: number;
  /** Its variables on top of the stack's (per replica when a function). */
  env?: Env | ((replica: number) => Env);
  /** Variables of the stack's it must not be given. */
  withhold?: readonly string[];
  /**
   * PORT of each replica (a missing one or 0: a free port, picked again should another process
   * take it first); left out, PORT comes from the env.
   */
  ports?: readonly number[];
  nodeArgs?: readonly string[] | ((replica: number) => readonly string[]);
  /** A script to run instead of the service's build. */
  script?: string;
  /** The NATS identity it connects as (default: its role). */
  identity?: string;
}

export interface StackOptions {
  /** Servers keep their data under it (nats/, ferretdb/). */
  dir: string;
  /** Start nats-server (with this configuration: its users and grants), or use the one at `url`. */
  nats?: { config?: string; url?: undefined } | { url: string };
  /** Start FerretDB, or use the one at `url`. */
  ferret?: { url?: undefined } | { url: string };
  /** Each identity's NATS key: a process gets its own as NATS_NKEY_SEED. */
  natsKeys?: Record<string, { seed: string }> | null;
  /** Every service's environment; NATS_URL and MONGO_URL are added. */
  env: Env;
  /** In order of starting; replicas of one start one after another. */
  services: readonly ServiceSpec[];
  /** Give each service a health port and start the next only once it answers /readyz. */
  health?: boolean;
  /** Where the ports the stack picks itself come from (default `freePort`). */
  choosePort?: () => Promise<number>;
  /** A service's grace between SIGTERM and SIGKILL (default 15 s). */
  stopTimeoutMs?: number;
  /** How much of each process's output is kept for `output()`: at least half of this (default 256 KiB). */
  outputLimit?: number;
  onLine?: (proc: LaunchedProcess, line: string) => void;
  /** A process started (a service waited for: once ready, or once it failed to start). */
  onStart?: (proc: LaunchedProcess) => void;
  /** A process exited that the stack neither stopped nor replaced (a crash, or a kill by hand). */
  onExit?: (proc: LaunchedProcess, exit: ProcessExit) => void;
  onStopError?: (proc: LaunchedProcess, err: Error) => void;
}

export interface LocalStack {
  /** Every service's environment, with the servers' addresses. */
  readonly env: Env;
  readonly stopping: boolean;
  /** The current process of each one started, in order of starting. */
  readonly processes: LaunchedProcess[];
  process(name: string): LaunchedProcess;
  /** Starts what is described: the servers, then the services in order. */
  start(): Promise<void>;
  /** One more replica of `role` (as described, plus `extraEnv`), named `<role>-<n>`. */
  add(role: string, extraEnv?: Env): Promise<LaunchedProcess>;
  /**
   * Stops a process (`crash`: kill -9) and, `downMs` later, starts it again in its place: a
   * service with the same name and settings (plus `env`, for this start only), a server on the
   * same port and store.
   */
  restart(name: string, opts?: { crash?: boolean; env?: Env; downMs?: number }): Promise<LaunchedProcess>;
  /** Stops every process, newest first. Safe to call twice, and while starting. */
  stop(): Promise<void>;
}

export declare function createStack(options: StackOptions): LocalStack;
