// The kubernetes sandbox provider on a real Kubernetes API server (etcd, kube-apiserver with RBAC
// and Pod Security admission, controllers, scheduler, and kwok nodes whose pods turn Ready without
// containers): what only the server decides. That the chart's sandbox namespace, Role, RoleBinding
// and NetworkPolicy are accepted; that the namespace refuses a pod that is not `restricted` and
// accepts the provider's; that the runner's identity, bound by the chart's Role, can do what the
// provider needs in the sandbox namespace and nothing elsewhere, and never read a Secret; and the
// pod lifecycle itself — made idempotently, Ready, its status following the pod, adopted after a
// restart, replaced when another runner takes the thread, deleted after idling (the volume kept)
// and with the thread (the volume too). And exec into the pod as the runner does it, through the
// API server and the exec stream protocol to the node's kubelet endpoint (kwok's): exit codes,
// stdin and stdout streamed, a git branch in and a tree out — refused by RBAC in another
// namespace. No container runs here: kwok runs an exec'd command on this machine, in a directory
// of the test's, so this shows what the API server and the protocol do, not the sandbox image.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable, type Writable } from 'node:stream';
import {
  kubeExec,
  loadKubeConfig,
  receiveTree,
  sandboxName,
  sandboxPod,
  SandboxPods,
  sendBranch,
  type PodExec,
  type PodSettings,
  type PodState,
  type SandboxPod,
} from '@threadwork/runner/kubernetes';
import { createLogger } from '@threadwork/platform';
import { startControlPlane, waitFor, type ControlPlane } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ensureTool } from '../../deploy/local/tools.mjs';
import { controlPlaneBinaries, missingGo } from './support/binaries.js';
import { chartDir, REQUIRED } from '../deploy/support/chart.js';

const RELEASE_NS = 'threadwork';
const SANDBOX_NS = 'threadwork-sandboxes';
/** The runner's ServiceAccount as the chart names it, authenticated here by a static token. */
const RUNNER_USER = `system:serviceaccount:${RELEASE_NS}:threadwork-runner`;
const RUNNER_TOKEN = randomBytes(24).toString('hex');
const WAIT = 300_000;

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}
interface Pod extends Obj {
  spec: {
    automountServiceAccountToken?: boolean;
    serviceAccountName?: string;
    volumes?: { name: string; projected?: unknown }[];
    containers: { volumeMounts?: { name: string; mountPath: string }[] }[];
  };
}

const COLLECTIONS: Record<string, [string, string, boolean]> = {
  Namespace: ['api/v1', 'namespaces', false],
  ServiceAccount: ['api/v1', 'serviceaccounts', true],
  PersistentVolumeClaim: ['api/v1', 'persistentvolumeclaims', true],
  Pod: ['api/v1', 'pods', true],
  Role: ['apis/rbac.authorization.k8s.io/v1', 'roles', true],
  RoleBinding: ['apis/rbac.authorization.k8s.io/v1', 'rolebindings', true],
  NetworkPolicy: ['apis/networking.k8s.io/v1', 'networkpolicies', true],
};

function collection(kind: string, namespace?: string): string {
  const where = COLLECTIONS[kind];
  if (!where) throw new Error(`no collection known for ${kind}`);
  return where[2] ? `/${where[0]}/namespaces/${namespace}/${where[1]}` : `/${where[0]}/${where[1]}`;
}

let plane: ControlPlane;
let scratch: string;
let runnerKubeconfig: string;
let chartObjects: Obj[];
const opened: SandboxPods[] = [];

const settings = (over: Partial<PodSettings> = {}): PodSettings => ({
  namespace: SANDBOX_NS,
  image: 'registry.example.com/threadwork-sandbox:1',
  resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '1Gi' } },
  runtimeClassName: null,
  nodeSelector: {},
  tolerations: [],
  volumeSize: '1Gi',
  storageClassName: null,
  tmpSize: '256Mi',
  ...over,
});

/** A provider as a runner would hold it, as the runner's identity; its status changes recorded. */
function pods(runnerId: string, opts: { idleMs?: number; settings?: PodSettings; readyTimeoutMs?: number } = {}) {
  const seen: { threadId: string; state: PodState }[] = [];
  const p = new SandboxPods({
    kubeConfig: loadKubeConfig(runnerKubeconfig),
    settings: opts.settings ?? settings(),
    runnerId,
    idleMs: opts.idleMs ?? 3_600_000,
    logger: createLogger({ service: 'runner', level: 'silent' }),
    onStatus: (threadId, state) => seen.push({ threadId, state }),
    ...(opts.readyTimeoutMs ? { readyTimeoutMs: opts.readyTimeoutMs } : {}),
  });
  opened.push(p);
  return {
    p,
    seen,
    statuses: (threadId: string) => seen.filter((s) => s.threadId === threadId).map((s) => s.state.status),
  };
}

const asRunner = { token: RUNNER_TOKEN };

async function get<T = Obj>(kind: string, name: string, namespace = SANDBOX_NS) {
  return plane.api<T>('GET', `${collection(kind, namespace)}/${name}`);
}

/**
 * Exec into `pod` runs on this machine in a fresh directory of its own (kwok's Exec for it); resolves
 * once kwok has taken that up, with the directory.
 */
async function execHere(pod: { namespace: string; name: string }, exec: PodExec): Promise<string> {
  const workDir = mkdtempSync(join(scratch, `${pod.name}-`));
  await plane.execLocally(pod, { workDir, env: { HOME: workDir } });
  let last = '';
  await waitFor(
    `exec into ${pod.namespace}/${pod.name} to run`,
    async () => {
      const res = await exec.run(['true']);
      last = res.stderr;
      return res.code === 0;
    },
    WAIT,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last: ${last}`);
  });
  return workDir;
}

/** What a command sends on stdout, collected. */
function collect(): { sink: Writable; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (c: Buffer) => chunks.push(c));
  return { sink, bytes: () => Buffer.concat(chunks) };
}

const git = (cwd: string, args: string[]) =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: cwd,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@t',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@t',
    },
  }).trim();

/** Whether the runner's identity may do `verb` on `resource` in `namespace`, as the API server's authorizer says. */
async function may(verb: string, resource: string, namespace: string, subresource?: string): Promise<boolean> {
  const res = await plane.api<{ status: { allowed: boolean } }>(
    'POST',
    '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { verb, resource, namespace, ...(subresource ? { subresource } : {}) } },
    },
    asRunner,
  );
  expect(res.status).toBe(201);
  return res.body.status.allowed;
}

describe.skipIf(missingGo)('the kubernetes sandbox provider on a real API server', () => {
  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'threadwork-sandbox-pods-'));
    plane = await startControlPlane({
      binaries: controlPlaneBinaries(),
      users: {
        [RUNNER_USER]: {
          token: RUNNER_TOKEN,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${RELEASE_NS}`],
        },
      },
    });
    runnerKubeconfig = join(scratch, 'runner.kubeconfig');
    writeFileSync(
      runnerKubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'local',
            cluster: { server: plane.server, 'certificate-authority-data': Buffer.from(plane.ca).toString('base64') },
          },
        ],
        users: [{ name: 'runner', user: { token: RUNNER_TOKEN } }],
        contexts: [{ name: 'local', context: { cluster: 'local', user: 'runner' } }],
        'current-context': 'local',
      }),
      { mode: 0o600 },
    );
    // No provisioner: each workspace claim binds a volume made beforehand.
    for (let i = 0; i < 12; i++) {
      const res = await plane.api('POST', '/api/v1/persistentvolumes', {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `sandbox-pv-${i}` },
        spec: {
          capacity: { storage: '10Gi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          storageClassName: '',
          hostPath: { path: `/var/lib/sandbox-pv-${i}` },
        },
      });
      expect(res.status).toBe(201);
    }
    for (const name of [RELEASE_NS, 'other']) {
      const res = await plane.api('POST', '/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name },
      });
      expect(res.status).toBe(201);
    }
    // The chart's objects for the kubernetes provider, as helm renders them.
    const values = join(scratch, 'values.yaml');
    writeFileSync(
      values,
      JSON.stringify({
        runner: {
          sandbox: {
            provider: 'kubernetes',
            kubernetes: {
              image: 'registry.example.com/threadwork-sandbox:1',
              apiServerEgress: { to: [{ ipBlock: { cidr: '127.0.0.1/32' } }], ports: [{ port: 443 }] },
            },
          },
        },
      }),
    );
    const out = spawnSync(
      ensureTool('helm'),
      [
        'template',
        'threadwork',
        chartDir,
        '--namespace',
        RELEASE_NS,
        '--kube-version',
        '1.37.2',
        ...REQUIRED,
        '-f',
        values,
      ],
      { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 },
    );
    if (out.status !== 0) throw new Error(`helm template failed:\n${out.stderr}`);
    chartObjects = parseAllDocuments(out.stdout)
      .map((d) => d.toJS() as Obj | null)
      .filter((o): o is Obj => o !== null && typeof o === 'object' && 'kind' in o);
  });

  afterAll(async () => {
    for (const p of opened) await p.close();
    await plane?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('accepts the chart’s sandbox namespace, runner ServiceAccount, Role, RoleBinding and deny-all NetworkPolicy', async () => {
    const wanted = chartObjects.filter(
      (o) =>
        o.metadata.namespace === SANDBOX_NS ||
        (o.kind === 'Namespace' && o.metadata.name === SANDBOX_NS) ||
        (o.kind === 'ServiceAccount' && o.metadata.name === 'threadwork-runner'),
    );
    expect(wanted.map((o) => o.kind).sort()).toEqual([
      'Namespace',
      'NetworkPolicy',
      'Role',
      'RoleBinding',
      'ServiceAccount',
    ]);
    // The namespace first: the others live in it.
    wanted.sort((a, b) => (a.kind === 'Namespace' ? -1 : b.kind === 'Namespace' ? 1 : 0));
    for (const o of wanted) {
      const namespace = o.kind === 'ServiceAccount' ? RELEASE_NS : o.metadata.namespace;
      const res = await plane.api('POST', collection(o.kind, namespace), o);
      expect(res.status, `${o.kind} ${o.metadata.name}: ${JSON.stringify(res.body)}`).toBe(201);
    }
    // Pods there are admitted once the controllers gave the namespace its default ServiceAccount.
    await waitFor(
      'the sandbox namespace’s default ServiceAccount',
      async () => (await get('ServiceAccount', 'default')).status === 200,
      WAIT,
    );
  });

  it('refuses a pod that is not restricted in the sandbox namespace, and accepts the provider’s', async () => {
    const ours = sandboxPod('thr_admission', settings()) as unknown as Pod;
    const accepted = await plane.api('POST', `${collection('Pod', SANDBOX_NS)}?dryRun=All`, ours);
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(201);

    const loosened = structuredClone(ours) as unknown as {
      spec: { containers: { securityContext: Record<string, unknown> }[] };
    };
    const c = loosened.spec.containers[0]!;
    delete c.securityContext.allowPrivilegeEscalation;
    c.securityContext.capabilities = { add: ['NET_RAW'] };
    const refused = await plane.api<{ message: string }>(
      'POST',
      `${collection('Pod', SANDBOX_NS)}?dryRun=All`,
      loosened,
    );
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/violates PodSecurity "restricted/);
  });

  it('lets the runner do what the provider needs in the sandbox namespace and nothing elsewhere, no Secret ever', async () => {
    for (const verb of ['get', 'list', 'watch', 'create', 'delete']) {
      expect(await may(verb, 'pods', SANDBOX_NS), `pods ${verb}`).toBe(true);
      expect(await may(verb, 'persistentvolumeclaims', SANDBOX_NS), `claims ${verb}`).toBe(true);
    }
    // A WebSocket exec or attach is a GET authorized as `get` and as `create` both.
    for (const verb of ['get', 'create']) {
      expect(await may(verb, 'pods', SANDBOX_NS, 'exec'), `exec ${verb}`).toBe(true);
      expect(await may(verb, 'pods', SANDBOX_NS, 'attach'), `attach ${verb}`).toBe(true);
    }
    // Not a pod changed in place, not its logs, not port-forwarding.
    for (const verb of ['update', 'patch']) expect(await may(verb, 'pods', SANDBOX_NS), `pods ${verb}`).toBe(false);
    expect(await may('create', 'pods', SANDBOX_NS, 'portforward')).toBe(false);
    expect(await may('get', 'pods', SANDBOX_NS, 'log')).toBe(false);
    for (const resource of ['secrets', 'configmaps', 'serviceaccounts']) {
      for (const verb of ['get', 'list', 'create']) {
        expect(await may(verb, resource, SANDBOX_NS), `${resource} ${verb}`).toBe(false);
      }
    }
    expect(await may('create', 'serviceaccounts', SANDBOX_NS, 'token')).toBe(false);
    for (const namespace of [RELEASE_NS, 'other', 'default', 'kube-system']) {
      for (const verb of ['get', 'list', 'create', 'delete']) {
        expect(await may(verb, 'pods', namespace), `pods ${verb} in ${namespace}`).toBe(false);
      }
      expect(await may('create', 'pods', namespace, 'exec'), `exec in ${namespace}`).toBe(false);
      expect(await may('get', 'secrets', namespace), `secrets in ${namespace}`).toBe(false);
    }
    // And the server refuses the requests themselves.
    expect((await plane.api('GET', collection('Pod', SANDBOX_NS), undefined, asRunner)).status).toBe(200);
    expect((await plane.api('GET', `/api/v1/namespaces/${SANDBOX_NS}/secrets`, undefined, asRunner)).status).toBe(403);
    expect((await plane.api('GET', '/api/v1/pods', undefined, asRunner)).status).toBe(403);
    expect((await plane.api('GET', collection('Pod', RELEASE_NS), undefined, asRunner)).status).toBe(403);
    const elsewhere = await plane.api(
      'POST',
      collection('Pod', 'other'),
      sandboxPod('thr_elsewhere', settings({ namespace: 'other' })),
      asRunner,
    );
    expect(elsewhere.status).toBe(403);
  });

  it('makes the thread’s pod and volume once, waits until Ready, and the status follows the pod', async () => {
    const { p, statuses } = pods('runner-a');
    expect(await p.start()).toEqual([]);
    const threadId = 'thr_lifecycle';
    const [first, second] = await Promise.all([p.ensure(threadId), p.ensure(threadId)]);
    expect(first).toEqual({ threadId, namespace: SANDBOX_NS, name: sandboxName(threadId), container: 'sandbox' });
    expect(second).toEqual(first);
    expect(p.status(threadId)).toBe('ready');
    expect(statuses(threadId)).toContain('ready');
    expect(statuses(threadId)[0]).toBe('initializing');

    const pod = await get<Pod>('Pod', first.name);
    expect(pod.status).toBe(200);
    // The server added no token: no ServiceAccount volume, no mount of one.
    expect(pod.body.spec.automountServiceAccountToken).toBe(false);
    expect(pod.body.spec.volumes?.map((v) => v.name).sort()).toEqual(['tmp', 'workspace']);
    expect(pod.body.spec.containers[0]!.volumeMounts?.map((m) => m.mountPath).sort()).toEqual(['/tmp', '/workspace']);
    const claim = await get<Obj & { status: { phase: string } }>('PersistentVolumeClaim', first.name);
    expect(claim.status).toBe(200);
    expect(claim.body.status.phase).toBe('Bound');
    const uid = pod.body.metadata.uid;
    // Made once: a third ensure finds the same pod.
    await p.ensure(threadId);
    expect((await get<Pod>('Pod', first.name)).body.metadata.uid).toBe(uid);

    // A restarted runner (the same RUNNER_ID) adopts it, Ready, without making another.
    const restarted = pods('runner-a');
    expect(await restarted.p.start()).toEqual([threadId]);
    expect(restarted.p.status(threadId)).toBe('ready');
    await restarted.p.ensure(threadId);
    expect((await get<Pod>('Pod', first.name)).body.metadata.uid).toBe(uid);
    // A runner of another id does not adopt it.
    const other = pods('runner-other');
    expect(await other.p.start()).toEqual([]);
    expect(other.p.status(threadId)).toBeNull();
  });

  it('replaces the pod when another runner takes the thread, keeping the volume', async () => {
    const a = pods('runner-b1');
    const b = pods('runner-b2');
    await a.p.start();
    await b.p.start();
    const threadId = 'thr_takeover';
    const mine = await a.p.ensure(threadId);
    const before = await get<Pod>('Pod', mine.name);
    const claimBefore = await get('PersistentVolumeClaim', mine.name);
    await b.p.ensure(threadId);
    const after = await get<Pod>('Pod', mine.name);
    expect(after.body.metadata.uid).not.toBe(before.body.metadata.uid);
    expect(after.body.metadata.labels?.['threadwork.dev/runner-key']).not.toBe(
      before.body.metadata.labels?.['threadwork.dev/runner-key'],
    );
    expect((await get('PersistentVolumeClaim', mine.name)).body.metadata.uid).toBe(claimBefore.body.metadata.uid);
    expect(b.p.status(threadId)).toBe('ready');
    // The first runner's watch saw its pod go.
    await waitFor('the first runner to see its pod stopped', () => a.p.status(threadId) === 'stopped', WAIT);
  });

  it('deletes an idle pod and keeps its volume; the next run gets a new pod on it', async () => {
    const { p, statuses } = pods('runner-c', { idleMs: 500 });
    await p.start();
    const threadId = 'thr_idle';
    const sandbox = await p.ensure(threadId);
    const claim = await get('PersistentVolumeClaim', sandbox.name);
    const uid = (await get<Pod>('Pod', sandbox.name)).body.metadata.uid;
    p.release(threadId);
    await waitFor('the idle pod to be deleted', async () => (await get('Pod', sandbox.name)).status === 404, WAIT);
    await waitFor('the status to show it stopped', () => p.status(threadId) === 'stopped', WAIT);
    expect(statuses(threadId).slice(-1)).toEqual(['stopped']);
    expect((await get('PersistentVolumeClaim', sandbox.name)).body.metadata.uid).toBe(claim.body.metadata.uid);

    await p.ensure(threadId);
    const again = await get<Pod>('Pod', sandbox.name);
    expect(again.body.metadata.uid).not.toBe(uid);
    expect(p.status(threadId)).toBe('ready');
    // Released by its next run, it idles and goes again.
    p.release(threadId);
    await waitFor(
      'the idle pod to be deleted again',
      async () => (await get('Pod', sandbox.name)).status === 404,
      WAIT,
    );
  });

  it('deletes the pod and its volume with the thread', async () => {
    const { p } = pods('runner-d');
    await p.start();
    const threadId = 'thr_deleted';
    const sandbox = await p.ensure(threadId);
    await p.remove(threadId);
    await waitFor('the pod to be gone', async () => (await get('Pod', sandbox.name)).status === 404, WAIT);
    // The claim goes once no pod uses it (the server's protection finalizer holds it until then).
    await waitFor(
      'the volume claim to be gone',
      async () => (await get('PersistentVolumeClaim', sandbox.name)).status === 404,
      WAIT,
    );
    await waitFor('the status to show it stopped', () => p.status(threadId) === 'stopped', WAIT);
    // Removing what is gone is not an error.
    await p.remove(threadId);
  });

  it('says why a pod cannot start, and gives up waiting for it', async () => {
    const { p, seen } = pods('runner-e', {
      settings: settings({ nodeSelector: { 'threadwork.dev/no-such-pool': 'true' } }),
      readyTimeoutMs: 20_000,
    });
    await p.start();
    const threadId = 'thr_unschedulable';
    const ensured = p.ensure(threadId);
    const refused = expect(ensured).rejects.toThrow(/not Ready after 20000 ms/);
    await waitFor(
      'the status to say the pod cannot be scheduled',
      () =>
        seen.some(
          (s) => s.threadId === threadId && s.state.status === 'initializing' && /node/.test(s.state.reason ?? ''),
        ),
      WAIT,
    );
    await refused;
    expect(p.status(threadId)).toBe('initializing');
    await p.remove(threadId);
  });
  it('execs into the thread’s pod through the API server: exit codes, stdin streamed to stdout, a branch in and a tree out', async () => {
    const { p } = pods('runner-f');
    await p.start();
    const threadId = 'thr_exec';
    const sandbox: SandboxPod = await p.ensure(threadId);
    // As the runner execs: its own identity, the chart's Role.
    const exec = kubeExec(loadKubeConfig(runnerKubeconfig), sandbox);
    const workDir = await execHere(sandbox, exec);

    const out = collect();
    const ok = await exec.run(['sh', '-c', 'pwd; printf "%s" "$1"', 'sh', 'argv kept whole'], { stdout: out.sink });
    expect(ok).toEqual({ code: 0, stderr: '' });
    expect(out.bytes().toString()).toBe(`${workDir}\nargv kept whole`);
    const failed = await exec.run(['sh', '-c', 'echo refused >&2; exit 3']);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toBe('refused');
    const fromNode = await exec.run(['node', '-e', 'process.exit(42)']);
    expect(fromNode.code).toBe(42);

    // 1 MiB through stdin → cat → stdout, intact: the command sees stdin end when the client's does.
    const data = randomBytes(1024 * 1024);
    const echoed = collect();
    const chunks = Array.from({ length: 64 }, (_, i) => data.subarray(i * 16_384, (i + 1) * 16_384));
    const cat = await exec.run(['cat'], { stdin: Readable.from(chunks), stdout: echoed.sink });
    expect(cat.code).toBe(0);
    expect(echoed.bytes().length).toBe(data.length);
    expect(echoed.bytes().equals(data)).toBe(true);

    // The runner's repository: the thread branch with one commit.
    const runnerDir = mkdtempSync(join(scratch, 'runner-repo-'));
    const seed = join(runnerDir, 'seed');
    mkdirSync(seed);
    git(seed, ['init', '-q', '-b', 'main']);
    writeFileSync(join(seed, 'README.md'), 'hello\n');
    git(seed, ['add', '-A']);
    git(seed, ['commit', '-q', '-m', 'base']);
    const gitDir = join(runnerDir, 'runner.git');
    git(runnerDir, ['clone', '-q', '--bare', seed, gitDir]);
    git(runnerDir, ['--git-dir', gitDir, 'branch', 'threadwork/thr_exec', 'main']);
    const base = git(runnerDir, ['--git-dir', gitDir, 'rev-parse', 'refs/heads/threadwork/thr_exec']);
    const repo = { gitDir, workTree: null };

    const podRepo = join(workDir, 'repo');
    await sendBranch(exec, { repo, branch: 'threadwork/thr_exec', podRepo });
    const head = collect();
    expect((await exec.run(['git', '-C', 'repo', 'rev-parse', 'HEAD'], { stdout: head.sink })).code).toBe(0);
    expect(head.bytes().toString().trim()).toBe(base);
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('hello\n');

    // The agent's work in the pod, taken out as a tree on the branch's commit.
    const edit = await exec.run(['sh', '-c', 'echo changed > repo/README.md && echo new > repo/added.txt']);
    expect(edit.code).toBe(0);
    const tree = await receiveTree(exec, {
      repo,
      podRepo,
      base,
      into: 'refs/threadwork/snapshots/thr_exec',
      maxBytes: 1024 * 1024,
    });
    expect(git(runnerDir, ['--git-dir', gitDir, 'rev-parse', 'refs/threadwork/snapshots/thr_exec^{tree}'])).toBe(tree);
    expect(git(runnerDir, ['--git-dir', gitDir, 'show', `${tree}:README.md`])).toBe('changed');
    expect(git(runnerDir, ['--git-dir', gitDir, 'show', `${tree}:added.txt`])).toBe('new');
    await p.remove(threadId);
  });

  it('refuses the runner exec into a pod of another namespace, which the admin may exec into', async () => {
    await waitFor(
      'the default ServiceAccount in other',
      async () => (await plane.api('GET', '/api/v1/namespaces/other/serviceaccounts/default')).status === 200,
      WAIT,
    );
    const name = 'not-a-sandbox';
    const made = await plane.api('POST', collection('Pod', 'other'), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'other' },
      spec: { automountServiceAccountToken: false, containers: [{ name: 'main', image: 'registry.example.com/x:1' }] },
    });
    expect(made.status).toBe(201);
    await waitFor(
      'the pod in other to run',
      async () =>
        (await get<Obj & { status?: { phase?: string } }>('Pod', name, 'other')).body.status?.phase === 'Running',
      WAIT,
    );
    const pod = { threadId: 'thr_none', namespace: 'other', name, container: 'main' };
    // Exec there works for the admin, so what refuses the runner is its authorization.
    await execHere(pod, kubeExec(loadKubeConfig(plane.kubeconfig), pod));
    const refused = await kubeExec(loadKubeConfig(runnerKubeconfig), pod)
      .run(['true'])
      .then(
        (res) => res,
        (err: unknown) => err,
      );
    expect(String((refused as { message?: unknown }).message)).toMatch(/\b403\b/);
  });
});
