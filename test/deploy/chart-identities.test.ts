// The Helm chart's credentials: a NATS identity and a MongoDB user per pod, each from its own Secret.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NATS_IDENTITIES, natsPermissions } from '@threadwork/contracts';
import { newNatsKeys, plaintextNatsProblem } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { ensureTool } from '../../deploy/local/tools.mjs';
import { readRepoFile, serviceNames } from './support/repo.js';
import {
  byKind,
  scratch,
  component,
  DEPLOYMENTS,
  expectValid,
  INSECURE_MONGO,
  MONGO_SECRETS,
  productionValues,
  render,
  REQUIRED,
  secretRefs,
  template,
  useHelm,
  valuesFile,
  workloads,
} from './support/chart.js';
import type { Workload } from './support/chart.js';

useHelm();

describe('charts/threadwork', () => {
  describe('NATS identities', () => {
    const seedOf = (workload: Workload) =>
      workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'NATS_NKEY_SEED');

    it('gives each pod its own key, from the Secret named, and no other', () => {
      const objects = render(REQUIRED);
      expect(workloads(objects).map(component).sort()).toEqual(serviceNames());
      for (const workload of workloads(objects)) {
        const seed = seedOf(workload);
        expect(seed?.valueFrom?.secretKeyRef, component(workload)).toEqual({
          name: 'threadwork-nats',
          key: component(workload),
        });
        const env = workload.spec.template.spec.containers[0]!.env ?? [];
        expect(env.filter((e) => e.name.startsWith('NATS_') && e.name !== 'NATS_NKEY_SEED')).toEqual([]);
      }
    });

    it('refuses to render without the keys, unless told NATS has no authorization (development)', () => {
      const without = template(['--set', 'nats.url=nats://nats:4222', ...MONGO_SECRETS]);
      expect(without.status).not.toBe(0);
      expect(without.stderr).toMatch(/nats\.auth\.existingSecret/);
      const insecure = render([
        '--set',
        'nats.url=nats://nats:4222',
        ...MONGO_SECRETS,
        '--set',
        'nats.auth.insecure=true',
      ]);
      for (const workload of workloads(insecure)) {
        const env = workload.spec.template.spec.containers[0]!.env ?? [];
        expect(env.find((e) => e.name === 'NATS_INSECURE')?.value).toBe('true');
        expect(seedOf(workload)).toBeUndefined();
      }
      expect(byKind(insecure, 'ConfigMap').map((c) => c.metadata.name)).not.toContain('threadwork-nats-authorization');
    });

    it('holds the grants of libs/contracts in files/nats-permissions.json', () => {
      const file = JSON.parse(readRepoFile('charts/threadwork/files/nats-permissions.json')) as unknown;
      const table = Object.fromEntries(NATS_IDENTITIES.map((identity) => [identity, natsPermissions(identity)]));
      // When this fails: npm run admin -- nats permissions > charts/threadwork/files/nats-permissions.json
      expect(file).toEqual(table);
    });

    it('renders the nats-server authorization for the public keys given, which nats-server accepts', () => {
      const keys = newNatsKeys();
      const publicKeys = Object.fromEntries(NATS_IDENTITIES.map((identity) => [identity, keys[identity].publicKey]));
      const objects = render([...REQUIRED, '-f', valuesFile('nats-keys', { nats: { auth: { publicKeys } } })]);
      expectValid(objects);
      const config = byKind(objects, 'ConfigMap').find((c) => c.metadata.name === 'threadwork-nats-authorization');
      const conf = config?.data?.['authorization.conf'];
      expect(conf).toBeDefined();
      const users = (
        JSON.parse(conf!.replace(/^authorization: /, '')) as { users: { nkey: string; permissions: unknown }[] }
      ).users;
      expect(users).toHaveLength(NATS_IDENTITIES.length);
      for (const identity of NATS_IDENTITIES) {
        const user = users.find((u) => u.nkey === keys[identity].publicKey);
        expect(user?.permissions, identity).toEqual(natsPermissions(identity));
      }
      const file = join(scratch, 'authorization.conf');
      writeFileSync(file, conf!);
      const check = spawnSync(ensureTool('nats-server'), ['-t', '-c', file], { encoding: 'utf8' });
      expect(check.status, check.stderr + check.stdout).toBe(0);

      // A key missing for one identity: named, not rendered half.
      const { runner: _runner, ...partial } = publicKeys;
      const missing = template([
        ...REQUIRED,
        '-f',
        valuesFile('nats-partial', { nats: { auth: { publicKeys: partial } } }),
      ]);
      expect(missing.status).not.toBe(0);
      expect(missing.stderr).toMatch(/nats\.auth\.publicKeys\.runner/);
    });

    it('mounts the TLS secret and points every service at it', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'nats.url=tls://nats.nats.svc:4222',
        '--set',
        'nats.tls.existingSecret=nats-client-tls',
        '--set',
        'nats.tls.clientCertificate=true',
      ]);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const [container] = workload.spec.template.spec.containers;
        const env = Object.fromEntries((container!.env ?? []).map((e) => [e.name, e.value]));
        expect(env.NATS_TLS_CA).toBe('/etc/threadwork/nats-tls/ca.crt');
        expect(env.NATS_TLS_CERT).toBe('/etc/threadwork/nats-tls/tls.crt');
        expect(env.NATS_TLS_KEY).toBe('/etc/threadwork/nats-tls/tls.key');
        expect(container!.volumeMounts).toContainEqual({
          name: 'nats-tls',
          mountPath: '/etc/threadwork/nats-tls',
          readOnly: true,
        });
      }
    });
    it('reaches NATS as the services accept in production: over TLS in values-production.yaml, in clear only with nats.allowPlaintext', () => {
      /** What each service's start-up check says of its rendered NATS settings (null: it starts). */
      const problems = (args: string[]) => {
        const objects = render(args);
        const natsUrl = byKind(objects, 'ConfigMap').find((c) => c.data?.NATS_URL)!.data!.NATS_URL!;
        return workloads(objects).map((workload) => {
          const env = Object.fromEntries(
            (workload.spec.template.spec.containers[0]!.env ?? []).map((e) => [e.name, e.value]),
          );
          return plaintextNatsProblem(
            {
              NATS_URL: natsUrl,
              NATS_TLS_CA: env.NATS_TLS_CA,
              NATS_TLS_CERT: env.NATS_TLS_CERT,
              NATS_ALLOW_PLAINTEXT: env.NATS_ALLOW_PLAINTEXT === 'true',
            },
            'production',
          );
        });
      };
      const production = problems(['-f', productionValues, ...MONGO_SECRETS]);
      expect(production.length).toBeGreaterThan(0);
      expect(production.every((problem) => problem === null)).toBe(true);
      expect(problems(REQUIRED).every((problem) => problem !== null)).toBe(true);
      expect(problems([...REQUIRED, '--set', 'nats.allowPlaintext=true']).every((problem) => problem === null)).toBe(
        true,
      );
    });
  });

  describe('MongoDB users', () => {
    it('gives each pod its own connection string, from its own Secret, and the runner none', () => {
      const objects = render([...REQUIRED, '--set', 'mongodb.existingSecretKey=uri']);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const name = component(workload)!;
        const mongo = secretRefs(workload).filter((ref) => ref.env === 'MONGO_URL' || ref.name.startsWith('mongo-'));
        if (name === 'runner') expect(mongo, name).toEqual([]);
        else expect(mongo, name).toEqual([{ env: 'MONGO_URL', name: `mongo-${name}`, key: 'uri' }]);
        // Nor is any Secret of the database mounted as a file.
        const volumes = (workload.spec.template.spec.volumes ?? []) as { secret?: { secretName: string } }[];
        expect(
          volumes.filter((v) => v.secret?.secretName.startsWith('mongo-')),
          name,
        ).toEqual([]);
        expect(
          workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'MONGO_URL')?.value,
        ).toBeUndefined();
      }
      const [config] = byKind(objects, 'ConfigMap');
      expect(config!.data?.MONGO_URL).toBeUndefined();
      expect(config!.data?.MONGO_DB_PREFIX).toBe('threadwork');
    });

    it('refuses to render without a service’s Secret, naming the service and its one role', () => {
      for (const missing of DEPLOYMENTS) {
        const others = DEPLOYMENTS.filter((name) => name !== missing).flatMap((name) => [
          '--set',
          `mongodb.existingSecrets.${name}=mongo-${name}`,
        ]);
        const result = template([...REQUIRED.slice(0, 4), ...others, '--set', 'mongodb.dbPrefix=acme']);
        expect(result.status, missing).not.toBe(0);
        expect(result.stderr).toContain(`mongodb.existingSecrets.${missing}:`);
        expect(result.stderr).toContain(`readWrite on acme_${missing}`);
      }
      // values-production.yaml names every one.
      const production = template(['-f', productionValues]);
      expect(production.status, production.stderr).toBe(0);
    });

    it('gives every service the one URL without credentials only when told the database has no users', () => {
      const objects = render([...REQUIRED.slice(0, 4), ...INSECURE_MONGO]);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const url = workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'MONGO_URL');
        expect(url?.value, component(workload)).toBe(
          component(workload) === 'runner' ? undefined : 'mongodb://mongo:27017/?replicaSet=rs0',
        );
      }
      // A Secret named for a service wins over the shared URL.
      const mixed = render([
        ...REQUIRED.slice(0, 4),
        ...INSECURE_MONGO,
        '--set',
        'mongodb.existingSecrets.gateway=mongo-gateway',
      ]);
      const gateway = workloads(mixed).find((w) => component(w) === 'gateway')!;
      expect(secretRefs(gateway).find((ref) => ref.env === 'MONGO_URL')?.name).toBe('mongo-gateway');
    });
  });
});
