import { mkdir } from 'node:fs/promises';
import { DOMAIN_STREAM } from '@threadwork/contracts';
import { bootService, awaitStream, startRuntime, type StartedService } from '@threadwork/platform';
import type { RunnerConfig } from './config.js';
import { startDemoModel } from './demo/server.js';
import { sandboxStatusPublisher } from './clients/domain-events.js';
import { repohostCredentials } from './clients/repohost.js';
import { executeJob } from './flows/run.js';
import type { LiveRun, RunDeps } from './flows/run-state.js';
import { SessionPool } from './flows/sessions.js';
import { WarmPool } from './flows/warm.js';
import { RunSlots, startJobConsumer } from './handlers/jobs.js';
import { serveHarnesses, type DemoEndpoints } from './harness/served.js';
import { LocalSandboxProvider } from './sandbox/local.js';
import { decideIsolation, type Isolation } from './sandbox/isolation.js';
import type { SandboxProvider } from './sandbox/provider.js';
import { SandboxUids } from './sandbox/uids.js';

/** Mirrors are swept this often (or every SANDBOX_MIRROR_IDLE_MS, if shorter). */
const HOUR_MS = 60 * 60_000;

export { RunnerConfig } from './config.js';
export { consumerName } from './handlers/jobs.js';
// The runner's way of appending events, for the append benchmark.
export { EventSink } from './clients/run-events.js';

export interface RunnerService extends StartedService {
  /** Process ids of the live harness processes, by thread id. */
  harnessPids(): Map<string, number>;
  /** The spare sandboxes kept for new threads (null: the provider keeps none). */
  spares(): WarmPool | null;
}

/** The runner owns no collections: run state lives in the runs service, workspaces on disk. */
export async function startRunner(config: RunnerConfig): Promise<RunnerService> {
  const runtime = await startRuntime({ name: 'runner', config, mongo: false });
  const { logger, lifecycle } = runtime;
  let sessions: SessionPool | undefined;
  let warmPool: WarmPool | null = null;

  const service = await bootService(runtime, async () => {
    // Publishing to DOMAIN needs the stream: the runs service creates it (and RUN_JOBS, whose
    // consumer the job consumer below waits for), whichever service starts first.
    await awaitStream(runtime.jsm, DOMAIN_STREAM.name, logger);
    await mkdir(config.SANDBOX_ROOT, { recursive: true });

    let demo: DemoEndpoints | null = null;
    if (config.THREADWORK_DEMO) {
      const model = await startDemoModel();
      lifecycle.add('demo-model', () => model.close());
      demo = { responses: model.baseUrl, messages: model.messagesUrl, onTurn: model.onTurn };
      logger.warn(
        { model_base_url: model.baseUrl, claude_base_url: model.messagesUrl },
        'THREADWORK_DEMO=1: agent replies are SCRIPTED by a built-in demo model; no real model is called ' +
          '(start the runs service with CODEX_MODEL=demo-scripted and CLAUDE_MODEL=demo-scripted so runs show it)',
      );
    }

    const credentials = repohostCredentials(runtime.nc);
    const publish = sandboxStatusPublisher(runtime.nc, runtime.js, logger);
    let sandboxes: SandboxProvider;
    let isolation: Isolation;
    if (config.SANDBOX_PROVIDER === 'kubernetes') {
      // Loaded only here: a runner of local sandboxes never loads the Kubernetes client.
      const { startKubernetesSandboxes } = await import('./sandbox/kubernetes/start.js');
      const pods = await startKubernetesSandboxes({ config, logger, publish, credentials });
      lifecycle.add('sandbox-pods', () => pods.close());
      sandboxes = pods.provider;
      isolation = pods.isolation;
    } else {
      isolation = await decideIsolation(
        {
          jail: config.SANDBOX_JAIL ?? (process.env.NODE_ENV === 'production' ? 'required' : 'auto'),
          codexSandbox: config.CODEX_SANDBOX_MODE,
          egress: { mode: config.SANDBOX_EGRESS, allow: config.SANDBOX_EGRESS_ALLOW },
          root: config.SANDBOX_ROOT,
          pidsMax: config.SANDBOX_PIDS_MAX,
          memoryMaxBytes: config.SANDBOX_MEMORY_MAX_BYTES,
          tmpBytes: config.SANDBOX_TMP_MAX_BYTES,
          uidRange: config.SANDBOX_UID_RANGE,
          harnesses: config.HARNESSES,
        },
        logger,
      );
      sandboxes = new LocalSandboxProvider({
        root: config.SANDBOX_ROOT,
        logger,
        credentials,
        // Each sandbox a uid of its own, where the runner runs as root and can switch to one.
        uids:
          isolation.outside?.kind === 'per-sandbox'
            ? new SandboxUids(config.SANDBOX_ROOT, isolation.outside.range)
            : null,
        publish,
      });
    }
    const served = serveHarnesses(config, isolation, logger, demo);
    const pool = new SessionPool(served.harnesses, sandboxes, config.SANDBOX_IDLE_MS, logger);
    sessions = pool;
    lifecycle.add('harnesses', () => pool.stopAll());
    let warm: WarmPool | null = null;
    if (sandboxes instanceof LocalSandboxProvider) {
      const local = sandboxes;
      const swept = await local.sweepSpares();
      if (swept > 0) logger.info({ swept }, 'removed spare sandboxes of runners that are gone');
      const sweepMirrors = async () => {
        const removed = await local.sweepMirrors(config.SANDBOX_MIRROR_IDLE_MS).catch((err: unknown) => {
          logger.warn({ err }, 'the repository mirrors could not be swept');
          return 0;
        });
        if (removed > 0) logger.info({ removed }, 'removed repository mirrors no sandbox used lately');
      };
      // Beside the jobs: a mirror is moved out of its place at once, and removing it may take long.
      void sweepMirrors();
      const mirrorSweeps = setInterval(() => void sweepMirrors(), Math.min(config.SANDBOX_MIRROR_IDLE_MS, HOUR_MS));
      lifecycle.add('mirror-sweeps', () => clearInterval(mirrorSweeps));
      const spares = new WarmPool({
        provider: local,
        harnesses: served.harnesses,
        size: config.RUNNER_WARM_SANDBOXES,
        idleMs: config.SANDBOX_IDLE_MS,
        logger,
      });
      local.useSpares(spares);
      warm = spares;
      warmPool = spares;
      lifecycle.add('spares', async () => {
        await spares.stopAll();
        await local.idle();
      });
    }

    const deps: RunDeps = {
      nc: runtime.nc,
      js: runtime.js,
      config,
      logger,
      runnerId: config.RUNNER_ID,
      sandboxes,
      sessions: pool,
      warm,
      unconfigured: served.unconfigured,
      credentials,
      isolation,
    };
    const live = new Set<LiveRun>();
    const slots = new RunSlots(config.RUNNER_CONCURRENCY);
    const consumers = await Promise.all(
      [...served.harnesses.keys()].map((harness) =>
        startJobConsumer(runtime.js, runtime.jsm, { harness, slots, logger }, (job) => {
          let mine: LiveRun | null = null;
          return executeJob(deps, job, (run) => {
            if (mine) live.delete(mine);
            mine = run;
            if (run) live.add(run);
          });
        }),
      ),
    );
    // Stopping hands live runs back: their turns are interrupted and their jobs redelivered to a
    // runner that takes them over (resuming the session where the workspace is shared).
    lifecycle.add('jobs', async () => {
      for (const run of live) run.stop('shutdown');
      await Promise.all(consumers.map((consumer) => consumer.stop(config.SHUTDOWN_TIMEOUT_MS)));
    });
  });

  return {
    ...service,
    harnessPids: () => sessions?.pids() ?? new Map(),
    spares: () => warmPool,
  };
}
