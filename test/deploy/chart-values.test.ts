// The Helm chart's other values, and values.schema.json refusing what the services would not take.
import { GatewayConfig } from '@threadwork/gateway';
import { describe, expect, it } from 'vitest';
import { readRepoFile } from './support/repo.js';
import {
  byKind,
  component,
  expectValid,
  productionValues,
  render,
  REQUIRED,
  template,
  useHelm,
  valuesFile,
  workloads,
} from './support/chart.js';
import type { Workload } from './support/chart.js';

useHelm();

describe('charts/threadwork', () => {
  describe('harnesses', () => {
    it('tells threads, runs and the runner which harnesses the runners serve, from one list', () => {
      for (const [args, harnesses] of [
        [[], 'codex'],
        [['--set', 'harnesses={codex,claude-code}'], 'codex,claude-code'],
      ] as const) {
        const objects = render([...REQUIRED, ...args]);
        expectValid(objects);
        for (const workload of workloads(objects)) {
          const env = workload.spec.template.spec.containers[0]!.env ?? [];
          const name = component(workload)!;
          const values = env.filter((e) => e.name === 'HARNESSES').map((e) => e.value);
          expect(values, name).toEqual(['threads', 'runs', 'runner'].includes(name) ? [harnesses] : []);
        }
      }
    });

    it('takes HARNESSES from nowhere else, and only harnesses the runner has an adapter for', () => {
      for (const service of ['threads', 'runs', 'runner']) {
        const result = template([...REQUIRED, '--set', `${service}.env.HARNESSES=claude-code`]);
        expect(result.status, service).not.toBe(0);
        expect(result.stderr).toMatch(new RegExp(`${service}/env`));
      }
      for (const args of [
        ['--set', 'harnesses={codex,aider}'],
        ['--set', 'defaultHarness=aider'],
      ]) {
        const result = template([...REQUIRED, ...args]);
        expect(result.status, args.join(' ')).not.toBe(0);
        expect(result.stderr).toMatch(/harness/i);
      }
    });

    it("gives threads and runs the same catalog: the default harness, and each harness's settings that are set", () => {
      const catalogEnv = (args: string[]) => {
        const objects = render([...REQUIRED, ...args]);
        expectValid(objects);
        return workloads(objects).map((workload) => {
          const env = workload.spec.template.spec.containers[0]!.env ?? [];
          const catalog = env.filter((e) =>
            /^(DEFAULT_HARNESS|(CODEX|CLAUDE)_(MODELS?|REASONING_EFFORT))$/.test(e.name),
          );
          return [component(workload), Object.fromEntries(catalog.map((e) => [e.name, e.value]))] as const;
        });
      };
      for (const [name, env] of catalogEnv([])) {
        expect(env, String(name)).toEqual(
          ['threads', 'runs'].includes(String(name)) ? { DEFAULT_HARNESS: 'codex' } : {},
        );
      }
      const set = catalogEnv([
        '--set',
        'harnesses={codex,claude-code}',
        '--set',
        'defaultHarness=claude-code',
        '--set',
        'harnessCatalog.claudeCode.models={claude-sonnet-4-5,claude-opus-4-1}',
        '--set',
        'harnessCatalog.claudeCode.reasoningEffort=max',
        '--set',
        'harnessCatalog.codex.model=o3',
      ]);
      for (const name of ['threads', 'runs']) {
        expect(set.find(([n]) => n === name)?.[1], name).toEqual({
          DEFAULT_HARNESS: 'claude-code',
          CODEX_MODEL: 'o3',
          CLAUDE_MODELS: 'claude-sonnet-4-5,claude-opus-4-1',
          CLAUDE_REASONING_EFFORT: 'max',
        });
      }
      const unknown = template([...REQUIRED, '--set', 'harnessCatalog.aider.model=x']);
      expect(unknown.status).not.toBe(0);
      expect(unknown.stderr).toMatch(/harnessCatalog/);
    });
  });

  describe("the runner's model endpoints", () => {
    const runnerEnv = (args: string[]) => {
      const objects = render([...REQUIRED, ...args]);
      expectValid(objects);
      return byKind<Workload>(objects, 'StatefulSet')[0]!.spec.template.spec.containers[0]!.env ?? [];
    };

    it("gives the runner Claude Code's endpoint from values and its key from a Secret only", () => {
      const env = runnerEnv([
        '--set',
        'runner.claudeBaseUrl=https://api.anthropic.com',
        '--set',
        'secrets.claudeModel.existingSecret=anthropic',
        '--set',
        'secrets.claudeModel.key=api-key',
      ]);
      expect(env.filter((e) => e.name === 'CLAUDE_BASE_URL').map((e) => e.value)).toEqual([
        'https://api.anthropic.com',
      ]);
      const keys = env.filter((e) => e.name === 'CLAUDE_API_KEY');
      expect(keys).toHaveLength(1);
      expect(keys[0]!.value).toBeUndefined();
      // Optional, as MODEL_API_KEY is: an endpoint may need no key, and a runner serving codex only none.
      expect(keys[0]!.valueFrom?.secretKeyRef).toEqual({ name: 'anthropic', key: 'api-key', optional: true });
      // Unset, no endpoint: the runner fails claude-code runs with model_not_configured.
      const unset = runnerEnv([]);
      expect(unset.find((e) => e.name === 'CLAUDE_BASE_URL')).toBeUndefined();
      expect(unset.find((e) => e.name === 'CLAUDE_API_KEY')?.valueFrom?.secretKeyRef).toEqual({
        name: 'threadwork',
        key: 'CLAUDE_API_KEY',
        optional: true,
      });
      // Only the runner talks to a model.
      for (const workload of workloads(render(REQUIRED)).filter((w) => component(w) !== 'runner')) {
        const names = (workload.spec.template.spec.containers[0]!.env ?? []).map((e) => e.name);
        expect(names, component(workload)).not.toContain('CLAUDE_API_KEY');
        expect(names, component(workload)).not.toContain('CLAUDE_BASE_URL');
      }
    });

    it('reads a rendered Secret for CLAUDE_API_KEY as for MODEL_API_KEY, and never takes a key as a plain value', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'secrets.create=true',
        '--set',
        'secrets.values.SESSION_SECRET=0123456789abcdef0123456789abcdef',
        '--set',
        'secrets.values.CLAUDE_API_KEY=sk-ant-test',
      ]);
      expectValid(objects);
      const [secret] = byKind(objects, 'Secret');
      const runner = byKind<Workload>(objects, 'StatefulSet')[0]!;
      for (const name of ['MODEL_API_KEY', 'CLAUDE_API_KEY']) {
        const variable = runner.spec.template.spec.containers[0]!.env!.find((e) => e.name === name);
        expect(variable?.value, name).toBeUndefined();
        expect(variable?.valueFrom?.secretKeyRef?.name, name).toBe(secret!.metadata.name);
      }
      for (const name of ['MODEL_API_KEY', 'CLAUDE_API_KEY']) {
        const result = template([...REQUIRED, '--set', `runner.env.${name}=sk-literal`]);
        expect(result.status, name).not.toBe(0);
        expect(result.stderr).toMatch(/runner\/env/);
      }
      const url = template([...REQUIRED, '--set', 'runner.claudeBaseUrl=api.anthropic.com']);
      expect(url.status).not.toBe(0);
      expect(url.stderr).toMatch(/runner\/claudeBaseUrl/);
    });
  });

  describe('per-user limits', () => {
    it('tells threads the limits, 0 included, and refuses a negative one', () => {
      const limitsOf = (args: string[]) => {
        const objects = render([...REQUIRED, ...args]);
        expectValid(objects);
        return workloads(objects).map((workload) => {
          const env = workload.spec.template.spec.containers[0]!.env ?? [];
          const value = (name: string) => env.find((e) => e.name === name)?.value;
          return [component(workload), value('MAX_LIVE_RUNS_PER_USER'), value('THREADS_PER_MINUTE_PER_USER')];
        });
      };
      for (const [name, live, perMinute] of limitsOf([])) {
        expect([live, perMinute], String(name)).toEqual(name === 'threads' ? ['10', '30'] : [undefined, undefined]);
      }
      const off = limitsOf(['--set', 'limits.maxLiveRunsPerUser=0', '--set', 'limits.threadsPerMinutePerUser=5']);
      expect(off.find(([name]) => name === 'threads')?.slice(1)).toEqual(['0', '5']);
      const negative = template([...REQUIRED, '--set', 'limits.maxLiveRunsPerUser=-1']);
      expect(negative.status).not.toBe(0);
      expect(negative.stderr).toMatch(/maxLiveRunsPerUser/);
    });
  });

  describe('the gateway behind a proxy', () => {
    /** Every TRUST_PROXY the gateway container gets. */
    const trustProxy = (args: string[]) =>
      workloads(render([...REQUIRED, ...args]))
        .find((w) => component(w) === 'gateway')!
        .spec.template.spec.containers[0]!.env!.filter((e) => e.name === 'TRUST_PROXY')
        .map((e) => e.value);

    it('sets TRUST_PROXY from gateway.trustProxy, in every form the gateway takes', () => {
      const forms: [string[], string][] = [
        [['--set', 'gateway.trustProxy=1'], '1'],
        [['--set', 'gateway.trustProxy=true'], 'true'],
        [['--set-string', 'gateway.trustProxy=false'], 'false'],
        [
          ['-f', valuesFile('proxies', { gateway: { trustProxy: '10.0.0.0/8, loopback,fd00::/8' } })],
          '10.0.0.0/8, loopback,fd00::/8',
        ],
        [['--set-string', 'gateway.trustProxy=192.168.1.7'], '192.168.1.7'],
      ];
      for (const [args, value] of forms) {
        expect(trustProxy(args), args.join(' ')).toEqual([value]);
        expect(GatewayConfig.shape.TRUST_PROXY.safeParse(value).success, value).toBe(true);
      }
      // Unset, none: the gateway's default believes no proxy.
      expect(trustProxy([])).toEqual([]);
      expect(trustProxy(['--set', 'gateway.trustProxy=false'])).toEqual([]);
    });

    it('has values-production.yaml believe the one proxy in front', () => {
      expect(trustProxy(['-f', productionValues])).toEqual(['1']);
    });
  });

  describe('other values', () => {
    it('renders a Secret from values only when asked to', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'secrets.create=true',
        '--set',
        'secrets.values.SESSION_SECRET=0123456789abcdef0123456789abcdef',
      ]);
      expectValid(objects);
      const [secret] = byKind(objects, 'Secret');
      expect(secret!.stringData?.SESSION_SECRET).toBe('0123456789abcdef0123456789abcdef');
      const gateway = workloads(objects).find((w) => component(w) === 'gateway')!;
      const session = gateway.spec.template.spec.containers[0]!.env!.find((e) => e.name === 'SESSION_SECRET');
      expect(session?.valueFrom?.secretKeyRef?.name).toBe(secret!.metadata.name);
    });

    it('renders valid objects with network policies off and a model endpoint set', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'networkPolicy.enabled=false',
        '--set',
        'runner.modelBaseUrl=https://api.openai.com/v1',
        '--set',
        'image.digest=sha256:' + 'a'.repeat(64),
      ]);
      expectValid(objects);
      expect(byKind(objects, 'NetworkPolicy')).toEqual([]);
      const [runner] = byKind<Workload>(objects, 'StatefulSet');
      const [container] = runner!.spec.template.spec.containers;
      expect(container!.env?.find((e) => e.name === 'MODEL_BASE_URL')?.value).toBe('https://api.openai.com/v1');
      expect(container!.image).toBe(`threadwork@sha256:${'a'.repeat(64)}`);
    });
  });

  describe('values.schema.json', () => {
    const rejects = (args: string[], where: RegExp) => {
      const result = template(args);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain("values don't meet the specifications of the schema");
      expect(result.stderr).toMatch(where);
    };

    it('is JSON Schema draft-07', () => {
      const schema = JSON.parse(readRepoFile('charts/threadwork/values.schema.json')) as { $schema: string };
      expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    });

    it('rejects a replica count that is not a number', () => {
      rejects([...REQUIRED, '--set-string', 'gateway.replicaCount=two'], /gateway\/replicaCount/);
    });

    it('rejects an egress mode or host it does not know', () => {
      rejects([...REQUIRED, '--set', 'runner.egress.mode=everything'], /runner\/egress\/mode/);
      rejects([...REQUIRED, '--set', 'runner.egress.allow={https://evil.example}'], /runner\/egress\/allow/);
    });

    it('requires nats.url', () => {
      rejects(['--set', 'mongodb.url=mongodb://mongo:27017/'], /nats\/url/);
    });

    it('takes mongodb.url only with mongodb.insecure, and a Secret per service of the database only', () => {
      const nats = ['--set', 'nats.url=nats://nats:4222', '--set', 'nats.auth.existingSecret=threadwork-nats'];
      rejects([...nats, '--set', 'mongodb.insecure=true'], /mongodb/);
      rejects([...REQUIRED, '--set', 'mongodb.existingSecrets.runner=mongo-runner'], /existingSecrets/);
      rejects([...REQUIRED, '--set', 'mongodb.existingSecret=mongo-url'], /existingSecret/);
      rejects([...REQUIRED, '--set', 'mongodb.existingSecrets.gateway=Not_A_Name'], /existingSecrets\/gateway/);
    });

    it('rejects a cluster CIDR that is not one', () => {
      rejects([...REQUIRED, '--set', 'networkPolicy.clusterCIDRs={10.0.0.0/8,cluster.local}'], /clusterCIDRs/);
      rejects([...REQUIRED, '--set', 'networkPolicy.clusterCIDRs={10.0.0.0/33}'], /clusterCIDRs/);
    });

    it('takes TRUST_PROXY only as gateway.trustProxy, and only in a form the gateway takes', () => {
      rejects([...REQUIRED, '--set-string', 'gateway.env.TRUST_PROXY=1'], /gateway\/env/);
      rejects([...REQUIRED, '--set-string', 'gateway.trustProxy=proxy.example'], /gateway\/trustProxy/);
      rejects([...REQUIRED, '--set', 'gateway.trustProxy=-1'], /gateway\/trustProxy/);
      rejects([...REQUIRED, '--set-string', 'gateway.trustProxy=10.0.0.0/8;rm'], /gateway\/trustProxy/);
    });

    it('rejects a public key that is not an NKEY user key', () => {
      rejects([...REQUIRED, '--set', 'nats.auth.publicKeys.runner=SUAB'], /publicKeys\/runner/);
      rejects([...REQUIRED, '--set', 'nats.auth.publicKeys.intruder=UAB'], /publicKeys/);
    });

    it('rejects a numeric image tag, a bad quantity, an unknown enum value and a misspelt key', () => {
      rejects([...REQUIRED, '-f', valuesFile('float-tag', 'image:\n  tag: 1.2\n')], /image\/tag/);
      rejects([...REQUIRED, '--set', 'runner.resources.limits.memory=lots'], /runner\/resources\/limits\/memory/);
      rejects([...REQUIRED, '--set', 'logLevel=loud'], /logLevel/);
      rejects([...REQUIRED, '--set', 'gateway.replicas=2'], /replicas/);
      rejects(
        [...REQUIRED, '-f', valuesFile('no-limits', { threads: { resources: { limits: null } } })],
        /threads\/resources/,
      );
    });
  });
});
