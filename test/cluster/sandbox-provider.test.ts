// The kubernetes sandbox provider on a real API server: the thread's pod and volume made through it
// and Ready (kwok's nodes run no container), the sandbox prepared in it, its status following the
// pod, and the pod deleted when the sandbox stops, its volume kept. kwok's pods run nothing, so the
// commands the provider sends into the pod run locally (localExec) in a folder that stands for the
// pod's workspace volume.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunJob, SandboxStatus } from '@threadwork/contracts';
import { createLogger } from '@threadwork/platform';
import {
  KubernetesSandboxProvider,
  loadKubeConfig,
  localExec,
  RUNNER_KEY_LABEL,
  sandboxName,
  SandboxPods,
  textKey,
  type PodSettings,
} from '@threadwork/runner/kubernetes';
import { startControlPlane, waitFor, type ControlPlane } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlaneBinaries, missingGo } from './support/binaries.js';
import { sandboxNamespace } from './support/sandbox-namespace.js';

const SANDBOX_NS = 'threadwork-sandboxes';
const WAIT = 300_000;

let plane: ControlPlane;
let scratch: string;
let pods: SandboxPods | undefined;

const settings: PodSettings = {
  namespace: SANDBOX_NS,
  image: 'registry.example.com/threadwork-sandbox:1',
  resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '1Gi' } },
  runtimeClassName: null,
  nodeSelector: {},
  tolerations: [],
  volumeSize: '1Gi',
  storageClassName: null,
  tmpSize: '256Mi',
};

const git = (cwd: string, args: string[]) =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: scratch,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 'a',
      GIT_AUTHOR_EMAIL: 'a@a',
      GIT_COMMITTER_NAME: 'a',
      GIT_COMMITTER_EMAIL: 'a@a',
    },
  }).trim();

describe.skipIf(missingGo)('the kubernetes sandbox provider with its pods on a real API server', () => {
  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'threadwork-sandbox-provider-'));
    plane = await startControlPlane({ binaries: controlPlaneBinaries() });
    await sandboxNamespace(plane, SANDBOX_NS, 'sandbox-pv-provider');
  });

  afterAll(async () => {
    await pods?.close();
    await plane?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('prepares the sandbox in a pod it makes, takes the agent’s work out, and leaves the pod alone once another runner took the thread', async () => {
    const seed = join(scratch, 'seed');
    mkdirSync(seed);
    git(seed, ['init', '-q', '-b', 'main']);
    writeFileSync(join(seed, 'README.md'), '# App\n');
    git(seed, ['add', '-A']);
    git(seed, ['commit', '-q', '-m', 'initial commit']);
    const remote = join(scratch, 'app.git');
    git(scratch, ['clone', '-q', '--bare', seed, remote]);
    const workspace = join(scratch, 'pod', 'workspace');
    mkdirSync(workspace, { recursive: true });

    const logger = createLogger({ service: 'runner', level: 'silent' });
    pods = new SandboxPods({
      kubeConfig: loadKubeConfig(plane.kubeconfig),
      settings,
      runnerId: 'runner-provider',
      idleMs: 3_600_000,
      logger,
    });
    await pods.start();
    const published: SandboxStatus[] = [];
    const provider = new KubernetesSandboxProvider({
      pods,
      exec: () => localExec(),
      root: join(scratch, 'runner'),
      workspace,
      logger,
      publish: (_thread, _sandbox, status) => {
        published.push(status);
        return Promise.resolve(true);
      },
    });
    const threadId = `thr_${randomBytes(6).toString('hex')}`;
    const job: RunJob = {
      run_id: `run_${randomBytes(6).toString('hex')}`,
      thread_id: threadId,
      project_id: 'prj_1',
      owner_id: 'usr_1',
      message_id: 'msg_1',
      prompt: 'add a file',
      harness: 'codex',
      model: 'test-model',
      reasoning_effort: 'medium',
      collaboration_mode: 'default',
      repositories: [
        {
          project_repository_id: 'prp_1',
          repository_id: 7,
          full_name: 'acme/app',
          branch: 'main',
          clone_url: `file://${remote}`,
        },
      ],
    };
    const sandbox = await provider.prepare(job, {
      run_id: job.run_id,
      attempt: 1,
      runner_id: 'runner-provider',
      claim_id: `clm_${randomBytes(6).toString('hex')}`,
      holds: () => Promise.resolve(true),
    });
    expect(published).toEqual(['initializing', 'ready']);
    const name = sandboxName(threadId);
    const pod = await plane.api<{ status: { phase: string } }>('GET', `/api/v1/namespaces/${SANDBOX_NS}/pods/${name}`);
    expect(pod.status).toBe(200);
    expect(pod.body.status.phase).toBe('Running');
    expect(provider.status(threadId)).toBe('ready');

    const podRepo = join(workspace, 'app');
    expect(git(podRepo, ['symbolic-ref', 'HEAD'])).toBe(`refs/heads/threadwork/${threadId}`);
    expect(git(podRepo, ['rev-parse', 'HEAD'])).toBe(git(scratch, ['--git-dir', remote, 'rev-parse', 'main']));
    writeFileSync(join(podRepo, 'new.txt'), 'from the agent\n');
    const repo = sandbox.repos[0]!;
    await sandbox.collect!(repo);
    expect(readFileSync(join(repo.dir, 'new.txt'), 'utf8')).toBe('from the agent\n');

    // Another runner takes the thread over: its pod replaces this one's, and this runner sends nothing
    // more into it, nor deletes it when its sandbox stops.
    const other = new SandboxPods({
      kubeConfig: loadKubeConfig(plane.kubeconfig),
      settings,
      runnerId: 'runner-other',
      idleMs: 3_600_000,
      logger,
    });
    try {
      await other.start();
      await other.ensure(threadId);
      await waitFor('the first runner to see its pod replaced', () => !pods!.isOwn(threadId), WAIT);
      await expect(sandbox.publish!(repo)).rejects.toThrow(/no longer this runner's/);
      await provider.stop(threadId);
      expect(published.at(-1)).toBe('stopped');
      expect(provider.status(threadId)).toBe('stopped');
      const replaced = await plane.api<{ metadata: { labels: Record<string, string> } }>(
        'GET',
        `/api/v1/namespaces/${SANDBOX_NS}/pods/${name}`,
      );
      expect(replaced.status).toBe(200);
      expect(replaced.body.metadata.labels[RUNNER_KEY_LABEL]).toBe(textKey('runner-other'));
      expect(other.isOwn(threadId)).toBe(true);
      await other.stopPod(threadId);
    } finally {
      await other.close();
    }
    await waitFor(
      'the pod to be gone',
      async () => (await plane.api('GET', `/api/v1/namespaces/${SANDBOX_NS}/pods/${name}`)).status === 404,
      WAIT,
    );
    const claim = await plane.api('GET', `/api/v1/namespaces/${SANDBOX_NS}/persistentvolumeclaims/${name}`);
    expect(claim.status).toBe(200);
  });
});
