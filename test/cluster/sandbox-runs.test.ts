// A runner with SANDBOX_PROVIDER=kubernetes serving real runs on a real API server: the thread's pod
// made through it and Ready on a kwok node, the repository put into it, Codex started in it and
// spoken to over the pod exec API (client-node through kube-apiserver to kwok's kubelet endpoint),
// its model reached through the bridge over exec and the runner's model gate, the agent's work
// taken out of the pod, committed and pushed by the runner. kwok runs no container: an exec into a
// pod of the sandbox namespace runs on this machine (kwok's ClusterExec), in a folder standing for
// the pod's workspace volume, mounted there by SANDBOX_K8S_WORKSPACE. So this shows what the API
// server and the exec protocol do with everything the runner sends, not what an image does.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CandidateProducedEvent } from '@threadwork/contracts';
import { sandboxName } from '@threadwork/runner/kubernetes';
import { agent, startControlPlane, type ControlPlane } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  chunks,
  domainOf,
  filesUnder,
  MODEL_KEY,
  readLog,
  startAgentStack,
  waitForTerminal,
  type AgentStack,
} from '../../services/runner/test/helpers.js';
import { controlPlaneBinaries, missingGo } from './support/binaries.js';
import { sandboxNamespace } from './support/sandbox-namespace.js';

const SANDBOX_NS = 'threadwork-sandboxes';
const { agentTurn, say, shell, write } = agent;

const scripts = new Map<string, agent.AgentScript>([
  [
    'CREATE',
    agentTurn([
      [shell('echo "in the pod: $(pwd)"; echo "key: ${THREADWORK_MODEL_API_KEY:-none}"')],
      [write('src/new.txt', 'made in the pod\n')],
      [say('Done: created src/new.txt.')],
    ]),
  ],
  ['AGAIN', agentTurn([[shell('cat src/new.txt')], [say('Still there.')]])],
]);

let plane: ControlPlane;
let scratch: string;
let workspace: string;
let stack: AgentStack | undefined;

describe.skipIf(missingGo)('runs in sandbox pods on a real API server', () => {
  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'threadwork-sandbox-runs-'));
    plane = await startControlPlane({ binaries: controlPlaneBinaries() });
    await sandboxNamespace(plane, SANDBOX_NS, 'sandbox-pv-runs');
    // The "pod's" workspace volume, where its commands run.
    workspace = join(scratch, 'workspace');
    mkdirSync(workspace);
    await plane.execLocallyInNamespace(SANDBOX_NS, { workDir: workspace });
    stack = await startAgentStack('codex', scripts, {
      runner: {
        SANDBOX_PROVIDER: 'kubernetes',
        SANDBOX_K8S_KUBECONFIG: plane.kubeconfig,
        SANDBOX_K8S_NAMESPACE: SANDBOX_NS,
        SANDBOX_K8S_IMAGE: 'registry.example.com/threadwork:1',
        SANDBOX_K8S_VOLUME_SIZE: '1Gi',
        SANDBOX_K8S_WORKSPACE: workspace,
      },
    });
  }, 900_000);

  afterAll(async () => {
    await stack?.stop();
    await plane?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('runs Codex in the thread’s pod over exec: its model only through the gate, its work committed and pushed', async () => {
    const admitted = await admitRun(stack!, 'CREATE a file please');
    const run = await waitForTerminal(stack!, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');

    // The pod the API server holds for the thread.
    const pod = await plane.api<{ status?: { phase?: string } }>(
      'GET',
      `/api/v1/namespaces/${SANDBOX_NS}/pods/${sandboxName(admitted.threadId)}`,
    );
    expect(pod.status).toBe(200);
    expect(pod.body.status?.phase).toBe('Running');

    const events = await readLog(stack!.nc, run.id);
    const c = chunks(events);
    expect(c.find((x) => x.type === 'sandbox.ready')).toMatchObject({
      layers: expect.arrayContaining(['kubernetes-pod', 'no-network-but-gates-over-exec', 'model-key-outside']),
    });
    const output = c
      .filter((x) => x.type === 'command.output')
      .map((x) => String(x.delta))
      .join('');
    // The command ran where the pod's workspace is, and found no key there.
    expect(output).toContain(`in the pod: ${workspace}/app`);
    expect(output).toContain('key: none');
    // The key reached the model endpoint, through the gate outside the pod, and nothing else.
    expect(stack!.agent.requests.at(-1)?.key).toBe(MODEL_KEY);
    expect(JSON.stringify(events)).not.toContain(MODEL_KEY);
    for (const file of filesUnder(workspace)) expect(readFileSync(file).includes(MODEL_KEY), file).toBe(false);

    // The agent's file, taken out of the pod, committed and pushed by the runner.
    const candidate = CandidateProducedEvent.parse(domainOf(stack!, 'candidate.produced', run.id)[0]?.data);
    expect(candidate.files.map((f) => f.path)).toEqual(['src/new.txt']);
    expect(candidate.diff).toContain('+made in the pod');
    expect(readFileSync(join(workspace, 'app', 'src', 'new.txt'), 'utf8')).toBe('made in the pod\n');

    // The thread's next run continues in the same pod, the conversation resumed.
    const next = await admitRun(
      stack!,
      'AGAIN, is it there?',
      {
        thread_id: admitted.threadId,
        owner_id: admitted.owner,
        repositories: admitted.request.repositories,
      },
      admitted.bare,
    );
    const again = await waitForTerminal(stack!, next.run.id);
    expect(again.status, JSON.stringify(again.error)).toBe('completed');
    const outputAgain = chunks(await readLog(stack!.nc, again.id))
      .filter((x) => x.type === 'command.output')
      .map((x) => String(x.delta))
      .join('');
    expect(outputAgain).toContain('made in the pod');
    expect(stack!.agent.requests.at(-1)?.userTexts).toContain('CREATE a file please');
  });
});
