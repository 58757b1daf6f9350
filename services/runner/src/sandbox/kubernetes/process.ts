import { PassThrough, Writable } from 'node:stream';
import { checkSuffix, FIRST_LINE_MAX_BYTES, FOUND_MAX, wholeFirstLine, type HarnessHome } from '../../harness/home.js';
import type { HarnessHost, HostedProcess, ProcessExit, StartSpec } from '../../harness/host.js';
import type { Command, Launch, LaunchSpec } from '../../harness/launch.js';
import type { ProcessIdentity, Sweep } from '../../harness/processes.js';
import type { GateOptions } from '../gates.js';
import type { ModelPin } from '../model-api/dialect.js';
import { SCRIPT_TIMEOUT_MS } from './deadline.js';
import type { PodExec } from './exec.js';

// A harness process in a sandbox's pod: started through the exec API, its stdio the exec's streams,
// signalled and swept by small scripts run in the pod through further execs. The runner sees none
// of the pod's processes itself, so the harness reports its own pid and start time (its identity in
// the pod's pid namespace) on the first line of its stdout, before the program takes over. What
// comes out of the pod is the agent's to forge: every line is bounded and checked, and a pid read
// there is only ever handed back to the pod. No key goes into the pod: the model gate outside it
// adds the key to what the bridge carries out.

/** The pod's ways out for one harness process, reached over a bridge of execs. */
export interface PodGates {
  /** The model endpoint as the harness in the pod names it: the bridge's loopback port there. */
  readonly modelBaseUrl: string;
  /** What the harness's environment gains to reach the egress gate (its proxy variables). */
  readonly env: Record<string, string>;
  /** Processes of the pod that carry the bridge: a sweep spares them. */
  readonly processes?: readonly ProcessIdentity[];
  /** Bills the harness's model requests from now on as the turn about to run. */
  pinModel(pin: ModelPin): void;
  close(): Promise<void>;
}

/** Opens the gates for one harness process of the pod: the key stays with the runner. */
export type OpenPodGates = (options: Omit<GateOptions, 'owner'>) => Promise<PodGates>;

export interface PodHostOptions {
  openGates: OpenPodGates;
  /** The harness program as the pod's image has it; by default the runner's own path. */
  program?: (program: Command) => Command;
  /**
   * What a sweep may kill: every process of the pod's pid namespace (`pod`), or only those below
   * the harness (`harness`), for a stand-in pod whose commands run on a machine shared with others.
   */
  sweepScope?: 'pod' | 'harness';
  /** How long tending the harness's home may take in the pod (HOME_TIMEOUT_MS by default). */
  homeTimeoutMs?: number;
  /** How long the harness's exec may stay open once it was killed (CLOSE_WAIT_MS by default). */
  closeWaitMs?: number;
  /** How long a listing, a signal, a sweep or a kill of all may take in the pod (SCRIPT_TIMEOUT_MS by default). */
  scriptTimeoutMs?: number;
  /**
   * Called when the agent's processes in the pod could not be made sure to be gone (a sweep that
   * did not settle, then a kill of everything that left something or could not run): the pod is
   * no longer fit to run anything, and the caller deletes it.
   */
  compromised?: (reason: string) => void | Promise<void>;
}

/** How long the harness has to exit on SIGTERM before it is killed. */
const STOP_GRACE_MS = 2_000;
/**
 * How long the harness's exec may stay open once the harness was killed: a process of the agent's
 * that left it (to pid 1) with its output still open keeps the exec's stream open with it. Past
 * this the runner cuts the stream off itself; the sweep that follows kills what held it.
 */
const CLOSE_WAIT_MS = 10_000;
/** The first line, `<pid> <start>`, is at most this long. */
const HEAD_MAX_BYTES = 64;
/** What the harness wrote on stderr that is kept: the end of it, for an error message. */
const STDERR_KEPT_BYTES = 8 * 1024;
/** What a listing or a sweep may write before it is cut off (the pod's processes are the agent's to multiply). */
const SCRIPT_OUTPUT_MAX_BYTES = 256 * 1024;
/** Command lines a sweep reports, and how much of each. */
const SWEEP_LINES_MAX = 100;
const SWEEP_LINE_MAX_CHARS = 300;

const IDENTITY_LINE = /^([1-9]\d{0,9}) (\d{1,20})$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `stat <pid>` sets `st` (the state), `pp` (the parent), `sid` (the session) and `start` (the start
 * time, with the pid an identity a reused pid cannot fake) from `/proc/<pid>/stat`; fails when the
 * process is gone. The whole file is read: the name before the fields may hold newlines and `) `,
 * so the fields are what follows the last `) `. Builtins only: nothing is forked.
 */
const STAT_FN = `stat() {
  s=
  { while IFS= read -r l || [ -n "$l" ]; do s="$s$l "; done; } 2>/dev/null <"/proc/$1/stat" || return 1
  case $s in *") "*) ;; *) return 1;; esac
  set -- \${s##*") "}
  st=$1 pp=$2 sid=$4 start=\${20}
  [ -n "$start" ]
}
same() {
  stat "\${1%%:*}" || return 1
  case $st in Z|X) return 1;; esac
  [ "$start" = "\${1#*:}" ]
}`;

/**
 * Prints the pid and start time of this shell, moves to the working directory and becomes the
 * program with exactly the environment given: `env -i NAME=VALUE... program args...` (`exec` keeps
 * the pid, so the identity printed is the harness's).
 */
const START_SCRIPT = `${STAT_FN}
stat $$ || exit 125
echo "$$ $start"
cd "$1" || exit 125
shift
exec env -i "$@"`;

/** `<signal> <group: 1|0> <pid:start>...`: signals each process still the one named (and its group). */
const SIGNAL_SCRIPT = `${STAT_FN}
sig=$1 group=$2
shift 2
for id in "$@"; do
  same "$id" || continue
  p=\${id%%:*}
  [ "$group" = 1 ] && kill -s "$sig" -- "-$p" 2>/dev/null
  kill -s "$sig" "$p" 2>/dev/null
done
exit 0`;

/** Every process of the pod: `<pid> <parent> <start>` a line (zombies left out). */
const LIST_SCRIPT = `${STAT_FN}
for d in /proc/[0-9]*; do
  p=\${d#/proc/}
  stat "$p" || continue
  case $st in Z|X) continue;; esac
  echo "$p $pp $start"
done`;

/**
 * Shell: `below <pid>` succeeds when the process is below `$root` (at most 64 levels up, never
 * through pid 1), leaving its parent chain walked with `stat` (STAT_FN).
 */
const BELOW_FN = `below() {
  q=$1 n=0
  while [ "$q" != "$root" ]; do
    n=$((n + 1))
    [ "$q" -gt 1 ] && [ $n -le 64 ] && stat "$q" || return 1
    q=$pp
  done
}`;

/**
 * `<root> <pid:start>...`: stops every process of the pod but pid 1 and its session (the pod's idle
 * loop and what it starts: an exec's process is a session of its own, which none of its children
 * can leave for pid 1's), the sweep itself and what it forks, and the kept ones; with a root other
 * than 0, only what is below it (and then sessions spare nothing). As the local sweep
 * does (processes.ts, stopAllBut), each process found is frozen (SIGSTOP) before the next look, so
 * one that forks and exits cannot stay ahead of the looks; once a look finds nothing new and every
 * frozen one has stopped, all are killed, and several looks must then find nothing left.
 *
 * What it cannot do that the local sweep does: freeze the init of the pid namespace. The pod's
 * pid 1 is the container's and reaps the orphans it is given, so a chain of processes that each
 * fork and exit at once can slip past a look (a look lists /proc, then reads each process); the
 * rounds and the quiet looks make that unlikely, not impossible. It runs as the sandbox's user, in
 * reach of the agent's processes, which may kill it: it then ends without its last line, and the
 * sweep counts as unsettled. It spares no process of another exec that is not named in the kept
 * ones: nothing else of the runner's may run in the pod meanwhile.
 *
 * Prints `killed <command line>` for each process killed, then `settled` or `unsettled`.
 */
const SWEEP_SCRIPT = `${STAT_FN}
${BELOW_FN}
root=$1
shift
kept=" $* " me=$$ frozen=" " found=" " before= quiet=0 round=0
look() {
  found=" " busy=0
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    if [ "$p" = 1 ] || [ "$p" = "$me" ]; then continue; fi
    if [ "$root" != 0 ]; then below "$p" || continue; fi
    stat "$p" || continue
    case $st in Z|X) continue;; esac
    [ "$pp" = "$me" ] && continue
    [ "$root" = 0 ] && [ "$sid" = 1 ] && continue
    case $kept in *" $p:$start "*) continue;; esac
    found="$found$p:$start "
    case $frozen in *" $p:$start "*) case $st in T|t) ;; *) busy=1;; esac;; esac
  done
}
while [ $round -lt 200 ]; do
  round=$((round + 1))
  look
  new=0
  for id in $found; do
    case $frozen in *" $id "*) continue;; esac
    same "$id" && kill -s STOP "\${id%%:*}" 2>/dev/null && frozen="$frozen$id " && new=1
  done
  if [ $new = 0 ] && [ $busy = 0 ] && [ "$found" = "$before" ]; then quiet=1; break; fi
  before=$found
done
n=0
for id in $frozen; do
  same "$id" || continue
  n=$((n + 1))
  [ $n -le ${SWEEP_LINES_MAX} ] && printf 'killed %s\\n' "$(tr '\\000\\n' '  ' <"/proc/\${id%%:*}/cmdline" 2>/dev/null | cut -c1-${SWEEP_LINE_MAX_CHARS})"
  kill -s KILL "\${id%%:*}" 2>/dev/null
done
if [ $quiet = 0 ]; then echo unsettled; exit 0; fi
tries=0
for id in $frozen; do
  while same "$id"; do
    tries=$((tries + 1))
    if [ $tries -gt 1000 ]; then echo unsettled; exit 0; fi
    [ $tries -gt 995 ] && sleep 1
  done
done
for l in 1 2 3 4 5; do
  look
  if [ "$found" != " " ]; then echo unsettled; exit 0; fi
done
echo settled`;

/**
 * `<root>`: what a sweep that did not settle falls back to. With root 0, SIGKILL to every process
 * the pod's user may signal (`kill -1`: all but pid 1 and the shell sending it), at once, so that
 * nothing of the agent's can fork, continue a frozen sibling or kill the sweep in between; the
 * harness and the bridge go too. With a root other than 0 (a stand-in pod on a shared machine), only
 * what is below that root, each in turn. Then several looks, a moment apart, must find nothing
 * left but pid 1 and its session (the pod's idle loop and its sleep), this shell and what it forks:
 * prints `clean`, else `dirty`.
 */
const KILL_ALL_SCRIPT = `${STAT_FN}
${BELOW_FN}
root=$1 me=$$
left() {
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    if [ "$p" = 1 ] || [ "$p" = "$me" ]; then continue; fi
    if [ "$root" != 0 ]; then below "$p" || continue; fi
    stat "$p" || continue
    case $st in Z|X) continue;; esac
    [ "$pp" = "$me" ] && continue
    [ "$root" = 0 ] && [ "$sid" = 1 ] && continue
    echo "$p"
  done
}
if [ "$root" = 0 ]; then
  kill -s KILL -- -1 2>/dev/null
else
  for p in $(left); do kill -s KILL "$p" 2>/dev/null; done
fi
quiet=0
for l in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  if [ -z "$(left)" ]; then
    quiet=$((quiet + 1))
    [ $quiet -ge 3 ] && { echo clean; exit 0; }
  else
    quiet=0
    [ "$root" = 0 ] && kill -s KILL -- -1 2>/dev/null
    [ "$root" != 0 ] && for p in $(left); do kill -s KILL "$p" 2>/dev/null; done
  fi
  sleep 1
done
echo dirty`;

/** `<path>`: removes it whatever it is (`rm` removes a link, and does not follow one). */
const REMOVE_SCRIPT = `rm -rf -- "$1"`;

/** `<dir>`: a directory there, whatever else was at that path (a link the agent left) gone first. */
const DIRECTORY_SCRIPT = `if [ -L "$1" ] || { [ -e "$1" ] && [ ! -d "$1" ]; }; then rm -rf -- "$1" || exit 1; fi
mkdir -p -- "$1"`;

/** `<dir> <kept name>...`: empties the directory but for the names kept (a link `dir` is left alone). */
const CLEAR_BUT_SCRIPT = `dir=$1
shift
{ [ -d "$dir" ] && [ ! -L "$dir" ]; } || exit 0
for f in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
  { [ -e "$f" ] || [ -L "$f" ]; } || continue
  name=\${f##*/} keep=0
  for k in "$@"; do [ "$name" = "$k" ] && keep=1; done
  [ $keep = 1 ] || rm -rf -- "$f" || exit 1
done`;

/** `<dir> <suffix>`: the regular files below the directory (no link followed) named `*<suffix>`, NUL-ended. */
const FIND_SCRIPT = `{ [ -d "$1" ] && [ ! -L "$1" ]; } || exit 0
find -P "$1" -type f -name "*$2" -print0 2>/dev/null
exit 0`;

/** `<file>`: the beginning of a regular file (not a link, not a FIFO). */
const HEAD_SCRIPT = `{ [ -f "$1" ] && [ ! -L "$1" ]; } || exit 0
head -c ${FIRST_LINE_MAX_BYTES} -- "$1"`;

/** How long tending the home may take in the pod before it counts as failed (a FIFO swapped in blocks a read). */
const HOME_TIMEOUT_MS = 30_000;

/**
 * The harness's home in the pod, tended through execs of small scripts with their paths as
 * arguments (never spliced in). Everything there is the agent's: what comes back is bounded and
 * only ever used as a yes or no of whether a session was recorded. The pod has one user, so a
 * directory's owner is the pod's already.
 */
function podHome(exec: PodExec, timeoutMs: number): HarnessHome {
  const run = async (script: string, args: readonly string[]) => {
    const result = await runScript(exec, script, args, timeoutMs);
    // Output past the bound is cut off, and what came before it still counts: a listing's names
    // are each whole or left out, a first line longer than what was kept is none.
    if (result.code !== 0 && !result.cut)
      throw new Error(`tending the harness's home in the pod failed (exit ${result.code})`);
    return result;
  };
  return {
    remove: async (path) => void (await run(REMOVE_SCRIPT, [path])),
    directory: async (dir) => void (await run(DIRECTORY_SCRIPT, [dir])),
    clearBut: async (dir, keep) => void (await run(CLEAR_BUT_SCRIPT, [dir, ...keep])),
    async find(dir, suffix) {
      const { out } = await run(FIND_SCRIPT, [dir, checkSuffix(suffix)]);
      const prefix = dir.endsWith('/') ? dir : `${dir}/`;
      // A name cut off by the bound has no NUL after it, and is left out.
      return out
        .split('\0')
        .slice(0, -1)
        .filter((path) => path.startsWith(prefix) && path.endsWith(suffix))
        .map((path) => path.slice(prefix.length))
        .slice(0, FOUND_MAX);
    },
    async firstLine(file) {
      const { out } = await run(HEAD_SCRIPT, [file]);
      return wholeFirstLine(out);
    },
  };
}

/** The harness in a pod of `exec`'s. */
export function podHost(exec: PodExec, options: PodHostOptions): HarnessHost {
  const scope = options.sweepScope ?? 'pod';
  const timeoutMs = options.scriptTimeoutMs ?? SCRIPT_TIMEOUT_MS;
  const sweep = (root: number, kept: readonly ProcessIdentity[]) => sweepPod(exec, root, kept, timeoutMs);
  /**
   * After a sweep that did not settle: everything of the agent's killed at once (below `root`, or
   * in the whole pod with 0). Answers whether the pod was made sure to be empty; if not, the pod is
   * reported compromised, for the caller to delete it.
   */
  const killAll = async (root: number, logger: { error: (o: object, m: string) => void }): Promise<boolean> => {
    const clean = await killAllInPod(exec, root, timeoutMs).catch((err: unknown) => {
      logger.error({ err }, 'could not kill the agent’s processes in the pod');
      return false;
    });
    if (clean) return true;
    const reason = 'the agent’s processes in the pod could not all be killed';
    logger.error({}, `${reason}; the pod is to be deleted`);
    await Promise.resolve(options.compromised?.(reason)).catch((err: unknown) =>
      logger.error({ err }, 'could not have the compromised pod deleted'),
    );
    return false;
  };
  /** What each launch of this host's was opened with: its gates, and the key none of its argv may hold. */
  const launches = new WeakMap<Launch, { gates: PodGates; key: string | null }>();
  return {
    home: podHome(exec, options.homeTimeoutMs ?? HOME_TIMEOUT_MS),
    async prepare(spec: LaunchSpec): Promise<Launch> {
      const gates = await options.openGates({
        model: { api: spec.api, baseUrl: spec.baseUrl, apiKey: spec.apiKey, pin: { model: spec.session.model } },
        egress: spec.isolation.egress,
        logger: spec.logger,
        refused: spec.refused,
      });
      try {
        const modelBaseUrl = loopbackUrl(gates.modelBaseUrl);
        const env = { ...spec.session.env, ...gates.env };
        const key = spec.apiKey;
        if (key && [modelBaseUrl, ...Object.entries(env).flat()].some((text) => text.includes(key)))
          throw new Error('the model key would go into the pod');
        const launch: Launch = {
          gates,
          modelBaseUrl,
          // The gate outside the pod adds it.
          key: null,
          env,
          command: options.program ? options.program(spec.program) : spec.program,
          release: () => gates.close(),
        };
        launches.set(launch, { gates, key });
        return launch;
      } catch (err) {
        await gates.close();
        throw err;
      }
    },

    start(launch, spec) {
      const opened = launches.get(launch);
      if (!opened) throw new Error('not a launch this pod host prepared');
      const { key } = opened;
      const argv = [launch.command.command, ...launch.command.args, ...spec.args, ...Object.entries(spec.env).flat()];
      if (key && argv.some((arg) => arg.includes(key))) throw new Error('the model key would go into the pod');
      return new PodProcess(exec, launch.command, spec, opened.gates.processes ?? [], timeoutMs);
    },

    async ownProcesses(proc) {
      const pod = podProcess(proc);
      const identity = await pod.identity;
      if (!identity) return { processes: [...pod.bridge], init: null };
      return { processes: [...subtree(await listPod(exec, timeoutMs), identity), ...pod.bridge], init: null };
    },

    async stop(proc, _own, closed, logger) {
      const pod = podProcess(proc);
      const identity = pod.known;
      if (!proc.hasExited && identity) {
        // Found before the harness goes: once it has exited, its orphaned commands have a new
        // parent. By identity: by the end of the grace any of them may have exited and its pid be
        // another process's.
        const below = subtree(await listPod(exec, timeoutMs).catch(() => []), identity).filter(
          (p) => p.pid !== identity.pid,
        );
        await signalPod(exec, 'TERM', true, [identity], timeoutMs).catch((err: unknown) =>
          logger.warn({ err }, 'could not signal the harness in its pod'),
        );
        const graceful = await Promise.race([
          proc.exited.then(() => true),
          new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_GRACE_MS).unref()),
        ]);
        if (!graceful) proc.kill();
        if (below.length > 0) await signalPod(exec, 'KILL', false, below, timeoutMs).catch(() => undefined);
      } else if (!proc.hasExited) {
        proc.kill();
      }
      const inTime = await Promise.race([
        closed.then(() => true),
        new Promise<boolean>((resolve) =>
          setTimeout(() => resolve(false), options.closeWaitMs ?? CLOSE_WAIT_MS).unref(),
        ),
      ]);
      if (!inTime) {
        logger.warn(
          'the harness’s exec stayed open after it was killed (a process of the agent’s holds its output); cutting it off',
        );
        pod.cut();
        await closed;
      }
      // The pod emptied of the agent's processes, as a jail is killed whole here: nothing of the
      // agent's may run on while the runner reads the workspace. (Below a harness that has gone
      // there is nothing left to sweep: its pid may be another's by now.)
      if (scope !== 'pod') return;
      const result = await sweep(0, []).catch((err: unknown) => {
        logger.error({ err }, 'could not sweep the pod');
        return null;
      });
      if (result?.settled) return;
      // Agent processes that killed the sweep, or woke its frozen ones, would run on into the next
      // run: everything of the pod's user goes at once, or the pod is deleted.
      logger.error({ result }, 'the agent’s processes in the pod did not all go; killing all of them');
      await killAll(0, logger);
    },

    async sweepLeftovers(proc, own, turnRunning): Promise<Sweep> {
      const identity = podProcess(proc).known;
      if (!identity || proc.hasExited || turnRunning) return { processes: [], settled: true };
      const root = scope === 'pod' ? 0 : identity.pid;
      const result = await sweep(root, own.processes);
      if (result.settled) return result;
      // The caller stops the session after a sweep that did not settle; what the sweep missed is
      // killed now, the harness and the bridge with it (the session is over either way).
      await killAll(root, UNLOGGED);
      return result;
    },
  };
}

/** sweepLeftovers is given no logger: what it finds the caller logs from the sweep's result. */
const UNLOGGED = { error: () => undefined };

/** The in-pod loopback URL the bridge gave, checked: the harness must reach the model nowhere else. */
function loopbackUrl(text: string): string {
  const url = new URL(text);
  if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname) || !url.port)
    throw new Error(`the pod's model gate is not on a loopback port: ${url.origin}`);
  return text;
}

class PodProcess implements HostedProcess {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly exited: Promise<ProcessExit>;
  /** The harness's identity in the pod, once its first line has been read; null if it never came. */
  readonly identity: Promise<ProcessIdentity | null>;
  known: ProcessIdentity | null = null;
  private exit: ProcessExit | undefined;
  private readonly abort = new AbortController();

  constructor(
    private readonly exec: PodExec,
    command: Command,
    spec: StartSpec,
    /** The bridge's processes in the pod, which sweeps spare. */
    readonly bridge: readonly ProcessIdentity[],
    /** How long a signal sent in the pod may take. */
    private readonly timeoutMs: number,
  ) {
    if (spec.fd3 !== undefined) throw new Error('a harness in a pod is handed no secret');
    const argv = [
      '/bin/sh',
      '-c',
      START_SCRIPT,
      'sh',
      spec.cwd,
      ...envOperands(spec.env),
      ...commandOperands(command, spec.args),
    ];
    let told!: (identity: ProcessIdentity | null) => void;
    this.identity = new Promise((resolve) => {
      told = resolve;
    });
    let head = Buffer.alloc(0);
    let headDone = false;
    const out = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        if (!headDone) {
          head = Buffer.concat([head, chunk]);
          const end = head.indexOf(0x0a);
          if (end < 0 && head.length <= HEAD_MAX_BYTES) return done();
          headDone = true;
          const match =
            end < 0 || end > HEAD_MAX_BYTES ? null : IDENTITY_LINE.exec(head.subarray(0, end).toString('latin1'));
          if (!match) {
            // Not the line the start script prints: whatever runs there is not known, and is cut off.
            told(null);
            this.abort.abort();
            return done();
          }
          this.known = { pid: Number(match[1]), started: match[2]! };
          told(this.known);
          chunk = head.subarray(end + 1);
          if (chunk.length === 0) return done();
        } else if (!this.known) {
          return done();
        }
        if (this.stdout.write(chunk)) done();
        else this.stdout.once('drain', () => done());
      },
    });
    const run = exec.run(argv, { stdin: this.stdin, stdout: out, signal: this.abort.signal }).then(
      (result) => ({
        how: {
          code: result.code,
          signal: null,
          ...(this.known ? {} : { error: 'the harness did not start in the pod' }),
        } as ProcessExit,
        stderr: result.stderr,
      }),
      (err: unknown) => ({
        how: { code: null, signal: null, error: (err as Error).message } as ProcessExit,
        stderr: '',
      }),
    );
    this.exited = run.then(({ how, stderr }) => {
      told(this.known);
      this.exit = how;
      // The exec keeps only the end of stderr: it comes out as the process ends, before its end is told.
      this.stderr.end(stderr.slice(-STDERR_KEPT_BYTES));
      this.stdout.end();
      return new Promise<ProcessExit>((resolve) => setImmediate(() => resolve(how)));
    });
  }

  get pid(): number | undefined {
    return this.known?.pid;
  }

  get hasExited(): boolean {
    return this.exit !== undefined;
  }

  /** Ends the exec's stream from the runner's side, whatever still runs in the pod. */
  cut(): void {
    this.abort.abort();
  }

  kill(): void {
    if (this.exit) return;
    if (!this.known) {
      this.abort.abort();
      return;
    }
    void signalPod(this.exec, 'KILL', true, [this.known], this.timeoutMs).catch(() => this.abort.abort());
  }

  signal(sig: NodeJS.Signals): void {
    if (this.exit || !this.known) return;
    void signalPod(this.exec, sig.replace(/^SIG/, ''), false, [this.known], this.timeoutMs).catch(() => undefined);
  }
}

function podProcess(proc: HostedProcess): PodProcess {
  if (!(proc instanceof PodProcess)) throw new Error('not a process this pod host started');
  return proc;
}

/** `NAME=VALUE` operands of `env`: a name it would take for an option or a command is refused. */
function envOperands(env: Record<string, string>): string[] {
  return Object.entries(env).map(([name, value]) => {
    if (!ENV_NAME.test(name)) throw new Error(`not an environment variable name: ${JSON.stringify(name)}`);
    return `${name}=${value}`;
  });
}

/** The program and its arguments, after the environment: `env` would take a program named `A=B` for a variable. */
function commandOperands(command: Command, args: readonly string[]): string[] {
  if (command.command.includes('=') || command.command.startsWith('-'))
    throw new Error(`the harness program cannot be started by env: ${command.command}`);
  return [command.command, ...command.args, ...args];
}

/**
 * Runs a script in the pod and answers its stdout, cut off past SCRIPT_OUTPUT_MAX_BYTES; past
 * `timeoutMs` the exec is cut off and the script counts as failed (exit -1, no output).
 */
async function runScript(
  exec: PodExec,
  script: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ code: number; out: string; cut: boolean }> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const chunks: Buffer[] = [];
  let size = 0;
  let cut = false;
  const stdout = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!cut) {
        size += chunk.length;
        if (size > SCRIPT_OUTPUT_MAX_BYTES) {
          cut = true;
          abort.abort();
        } else {
          chunks.push(chunk);
        }
      }
      done();
    },
  });
  const result = await exec
    .run(['/bin/sh', '-c', script, 'sh', ...args], { stdout, signal: abort.signal })
    .finally(() => clearTimeout(timer));
  if (abort.signal.aborted && !cut) return { code: -1, out: '', cut };
  return { code: result.code, out: Buffer.concat(chunks).toString('utf8'), cut };
}

interface Listed extends ProcessIdentity {
  parent: number;
}

/** Every process of the pod, as the pod lists them; lines that are not a listing's are left out. */
async function listPod(exec: PodExec, timeoutMs: number): Promise<Listed[]> {
  const { code, out, cut } = await runScript(exec, LIST_SCRIPT, [], timeoutMs);
  if (code !== 0 || cut) throw new Error(`could not list the pod's processes (exit ${code}${cut ? ', cut off' : ''})`);
  return out.split('\n').flatMap((line) => {
    const match = /^(\d{1,10}) (\d{1,10}) (\d{1,20})$/.exec(line);
    return match ? [{ pid: Number(match[1]), parent: Number(match[2]), started: match[3]! }] : [];
  });
}

/** `root` and every process below it in `listed`, by identity. */
function subtree(listed: readonly Listed[], root: ProcessIdentity): ProcessIdentity[] {
  if (!listed.some((p) => p.pid === root.pid && p.started === root.started)) return [];
  const out: ProcessIdentity[] = [root];
  const seen = new Set([root.pid]);
  for (let i = 0; i < out.length; i++) {
    for (const p of listed) {
      if (p.parent !== out[i]!.pid || seen.has(p.pid)) continue;
      seen.add(p.pid);
      out.push({ pid: p.pid, started: p.started });
    }
  }
  return out;
}

const identityArg = (p: ProcessIdentity) => `${p.pid}:${p.started}`;

/** Signals the processes (and, with `group`, their groups) in the pod, each only if it is still the one named. */
async function signalPod(
  exec: PodExec,
  sig: string,
  group: boolean,
  targets: readonly ProcessIdentity[],
  timeoutMs: number,
): Promise<void> {
  if (!/^[A-Z][A-Z0-9]{0,9}$/.test(sig)) throw new Error(`not a signal name: ${sig}`);
  const args = [sig, group ? '1' : '0', ...targets.map(identityArg)];
  const { code } = await runScript(exec, SIGNAL_SCRIPT, args, timeoutMs);
  if (code !== 0) throw new Error(`signalling in the pod failed (exit ${code})`);
}

/** Runs the sweep in the pod (below `root`, or everywhere with 0), sparing `kept`. */
async function sweepPod(
  exec: PodExec,
  root: number,
  kept: readonly ProcessIdentity[],
  timeoutMs: number,
): Promise<Sweep> {
  const { code, out, cut } = await runScript(exec, SWEEP_SCRIPT, [String(root), ...kept.map(identityArg)], timeoutMs);
  const lines = out.split('\n').filter((line) => line !== '');
  const processes = lines
    .filter((line) => line.startsWith('killed '))
    .slice(0, SWEEP_LINES_MAX)
    .map((line) =>
      line
        .slice('killed '.length, 'killed '.length + SWEEP_LINE_MAX_CHARS)
        .replace(/[^\x20-\x7e]/g, '?')
        .trim(),
    );
  return { processes, settled: code === 0 && !cut && lines.at(-1) === 'settled' };
}

/**
 * Kills everything of the agent's in the pod at once (below `root`, or all of the pod's user's
 * with 0) and answers whether the pod was then seen empty of it; false too when the script did not
 * run to its end (killed, cut off, timed out).
 */
export async function killAllInPod(exec: PodExec, root: number, timeoutMs: number): Promise<boolean> {
  if (!Number.isInteger(root) || root < 0) throw new Error(`not a process to kill below: ${root}`);
  const { code, out, cut } = await runScript(exec, KILL_ALL_SCRIPT, [String(root)], timeoutMs);
  return code === 0 && !cut && out === 'clean\n';
}
