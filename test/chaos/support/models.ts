import {
  agent,
  scriptsByPrompt,
  startFakeModel,
  uniqueId,
  type FakeModelServer,
  type FakeScript,
} from '@threadwork/testing';

// The fake model endpoints a cluster's runners talk to: Codex's own scripts (the Responses API
// alone), or one agent script played by the fake model of every harness the cluster serves, so a
// fault test runs the same case through each harness's real binary.

export interface ModelOptions {
  /** Fake model scripts by prompt prefix; the newest user text with a known prefix picks one. Codex only. */
  scripts?: Map<string, FakeScript>;
  /** Agent scripts by prompt prefix, played by a fake model of each harness in `harnesses`. */
  agentScripts?: Map<string, agent.AgentScript>;
  /** The harnesses every service is told are served, the first the default (Codex alone when not given). */
  harnesses?: readonly agent.HarnessName[];
}

export interface Models {
  /** The Responses API fake that plays `scripts`. */
  fake: FakeModelServer | undefined;
  /** The fake model of each harness served, playing `agentScripts`. */
  agents: ReadonlyMap<agent.HarnessName, agent.AgentFake>;
  /** Variables for every service: the harness catalog, where it is given. */
  env: Record<string, string>;
  /** Variables for a runner: every fake's endpoint, each with a model key of the runner's own. */
  runnerEnv(): Record<string, string>;
  close(): Promise<void>;
}

export async function startModels(options: ModelOptions): Promise<Models> {
  if (options.scripts && options.agentScripts) {
    throw new Error('a cluster plays either Codex scripts or agent scripts, not both');
  }
  const harnesses = options.harnesses ?? ['codex'];
  const fake = options.scripts ? await startFakeModel(scriptsByPrompt(options.scripts)) : undefined;
  const agents = new Map<agent.HarnessName, agent.AgentFake>();
  if (options.agentScripts) {
    const script = agent.agentScriptsByPrompt(options.agentScripts);
    for (const harness of harnesses) agents.set(harness, await agent.startAgentFake(harness, script));
  }
  const env: Record<string, string> = options.harnesses
    ? { HARNESSES: harnesses.join(','), DEFAULT_HARNESS: harnesses[0] as string }
    : {};
  return {
    fake,
    agents,
    env,
    runnerEnv: () => ({
      ...(fake ? { MODEL_BASE_URL: fake.baseUrl, MODEL_API_KEY: `sk-chaos-${uniqueId()}` } : {}),
      ...Object.assign({}, ...[...agents.values()].map((a) => a.runnerEnv(`sk-chaos-${uniqueId()}`))),
    }),
    close: async () => {
      await fake?.close();
      for (const a of agents.values()) await a.close();
    },
  };
}
