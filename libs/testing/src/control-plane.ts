import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { freePort } from '../../../deploy/local/launcher.mjs';
import { spawnGuarded } from '../../../deploy/local/servers.mjs';
import { waitFor } from './wait.js';

// A real Kubernetes control plane on loopback, for what only an API server decides: etcd,
// kube-apiserver (token auth, RBAC and the built-in admission plugins), kube-controller-manager
// (Deployments, StatefulSets, PersistentVolume binding, garbage collection, autoscaling's bounds),
// kube-scheduler, and kwok, which plays the kubelet of simulated nodes: their pods turn Running and
// Ready without a container. No container ever runs, so nothing in an image is exercised here.
//
// Exec into a pod goes the whole way a real one does — client, API server (authentication, RBAC,
// the pods/exec subresource, the stream protocol), then over TLS to the node's kubelet endpoint,
// which kwok serves — but kwok runs the command on this machine, as the user running the tests, in
// the directory an Exec resource names for that pod (`execLocally`): it shows what the API server
// and the exec protocol do with a command and its streams, not what the pod's image would do.

/**
 * What kwok does for the nodes and pods it manages, as its Stage resources: a node turns Ready,
 * saying where its kubelet listens (kwok's own server, which the API server reaches for exec), and
 * keeps sending heartbeats (else the node lifecycle controller would evict its pods); a pod bound to
 * it turns Running with every container ready; a pod being deleted goes at once (no kubelet to
 * wait for).
 */
/** A node's conditions as kwok reports them (all well), stamped now: in a Stage's status template. */
const NODE_CONDITIONS = `      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - { type: {{ .type | Quote }}, status: {{ .status | Quote }}, reason: {{ .reason | Quote }}, message: {{ .message | Quote }}, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }} }
      {{ end }}`;

const KWOK_STAGES = `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef: { apiGroup: v1, kind: Node }
  selector:
    matchExpressions:
      - { key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True'] }
  next:
    statusTemplate: |
${NODE_CONDITIONS}
      addresses:
      - { type: InternalIP, address: {{ NodeIP | Quote }} }
      - { type: Hostname, address: {{ NodeName | Quote }} }
      daemonEndpoints:
        kubeletEndpoint: { Port: {{ NodePort }} }
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef: { apiGroup: v1, kind: Node }
  selector:
    matchExpressions:
      - { key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ['True'] }
  delay:
    durationMilliseconds: 10000
  next:
    statusTemplate: |
${NODE_CONDITIONS}
  immediateNextStage: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef: { apiGroup: v1, kind: Pod }
  selector:
    matchExpressions:
      - { key: '.metadata.deletionTimestamp', operator: DoesNotExist }
      - { key: '.status.podIP', operator: DoesNotExist }
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      startTime: {{ $now | Quote }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName false ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      conditions:
      {{ range list "PodScheduled" "Initialized" "ContainersReady" "Ready" }}
      - { type: {{ . | Quote }}, status: "True", lastTransitionTime: {{ $now | Quote }} }
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - { name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: true, started: true, restartCount: 0, state: { running: { startedAt: {{ $now | Quote }} } } }
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-gone
spec:
  resourceRef: { apiGroup: v1, kind: Pod }
  selector:
    matchExpressions:
      - { key: '.metadata.deletionTimestamp', operator: Exists }
  next:
    finalizers: { empty: true }
    delete: true
`;

/**
 * kwok's Exec resource, which says how exec into one pod (named like it, in its namespace) runs,
 * and its ClusterExec, the same for the pods it selects: here always on this machine (`local`), in
 * a directory and with environment variables of its own.
 */
function execCrd(kind: 'Exec' | 'ClusterExec') {
  const plural = `${kind.toLowerCase()}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.kwok.x-k8s.io` },
    spec: {
      group: 'kwok.x-k8s.io',
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: kind === 'Exec' ? 'Namespaced' : 'Cluster',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: {
                spec: {
                  type: 'object',
                  required: ['execs'],
                  properties: {
                    // A ClusterExec's: the pods it is for, by namespace or name.
                    selector: {
                      type: 'object',
                      properties: {
                        matchNamespaces: { type: 'array', items: { type: 'string' } },
                        matchNames: { type: 'array', items: { type: 'string' } },
                      },
                    },
                    execs: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: {
                          containers: { type: 'array', items: { type: 'string' } },
                          local: {
                            type: 'object',
                            properties: {
                              workDir: { type: 'string' },
                              envs: {
                                type: 'array',
                                items: {
                                  type: 'object',
                                  required: ['name'],
                                  properties: { name: { type: 'string' }, value: { type: 'string' } },
                                },
                              },
                            },
                          },
                        },
                      },
                    },
                  },
                },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  };
}

/** A self-signed serving certificate for 127.0.0.1 (kwok's kubelet endpoint), which the API server is given to trust. */
function servingCert(certFile: string, keyFile: string): void {
  const out = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '7',
      '-subj',
      '/CN=kwok-kubelet',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { encoding: 'utf8' },
  );
  if (out.error || out.status !== 0) {
    throw new Error(`making kwok's serving certificate with openssl failed: ${out.error?.message ?? out.stderr}`);
  }
}

/** The binaries, as deploy/local/tools.mjs builds them. */
export interface ControlPlaneBinaries {
  etcd: string;
  'kube-apiserver': string;
  'kube-controller-manager': string;
  'kube-scheduler': string;
  kwok: string;
}

export interface KubeResponse<T = unknown> {
  status: number;
  body: T;
}

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  server: string;
  /** A kubeconfig for the cluster admin (system:masters), as helm and client libraries read it. */
  kubeconfig: string;
  /** The admin's bearer token. */
  token: string;
  /** The API server's serving certificate (self-signed), to trust it. */
  ca: string;
  /** Issues a request as the admin (or with another bearer token); JSON in, JSON (or text) out. */
  api<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    opts?: { token?: string; contentType?: string },
  ): Promise<KubeResponse<T>>;
  /**
   * Makes exec into the pod `namespace/name` (any of its containers) run the command on this
   * machine, in `workDir`, with `env` over kwok's own environment (PATH, and HOME an empty
   * directory): an Exec resource named like the pod. kwok takes it up through its watch a moment
   * later; an exec before that is refused ("no exec found").
   */
  execLocally(
    pod: { namespace: string; name: string },
    opts: { workDir: string; env?: Record<string, string> },
  ): Promise<void>;
  /** The same for every pod of `namespace`, those made later included (a ClusterExec). */
  execLocallyInNamespace(namespace: string, opts: { workDir: string; env?: Record<string, string> }): Promise<void>;
  stop(): Promise<void>;
}

interface Started {
  name: string;
  child: ChildProcess;
  output: () => string;
}

/**
 * How to start `binary` as pid 1 of a pid namespace of its own, with its own /proc (util-linux
 * `unshare`; a user namespace too where this is not root). Where that cannot be had, the cluster
 * test cannot run runs in sandbox pods safely, and says so.
 */
function podNamespace(binary: string): [string, string[]] {
  const unshare = ['/usr/bin/unshare', '/bin/unshare'].find((path) => existsSync(path));
  if (!unshare) throw new Error('util-linux unshare is needed to give kwok a pid namespace of its own');
  const user = process.getuid?.() === 0 ? [] : ['--user', '--map-root-user'];
  return [unshare, [...user, '--fork', '--pid', '--mount-proc', '--kill-child=SIGKILL', '--', binary]];
}

function start(name: string, binary: string, args: string[], dir: string, env?: NodeJS.ProcessEnv): Started {
  const child = spawnGuarded(binary, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString()).slice(-16_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { name, child, output: () => out };
}

function alive(p: Started): void {
  if (p.child.exitCode !== null || p.child.signalCode !== null) {
    throw new Error(`${p.name} exited (${p.child.exitCode ?? p.child.signalCode}):\n${p.output()}`);
  }
}

async function stopProcess(p: Started): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => p.child.once('exit', () => resolve()));
  p.child.kill('SIGTERM');
  const force = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(force);
}

function kubeRequest<T>(
  server: string,
  ca: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<KubeResponse<T>> {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, server),
      {
        method,
        ca,
        headers: {
          authorization: `Bearer ${token}`,
          accept: 'application/json',
          ...(payload === undefined
            ? {}
            : { 'content-type': contentType, 'content-length': String(Buffer.byteLength(payload)) }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // Not JSON (readyz says "ok"): kept as text.
          }
          resolve({ status: res.statusCode ?? 0, body: parsed as T });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

function kubeconfigFor(server: string, ca: string, user: string, token: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'local', cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') } },
    ],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'local', context: { cluster: 'local', user } }],
    'current-context': 'local',
  });
}

/** Users the API server authenticates by bearer token: name → {token, groups}. */
export interface TokenUser {
  token: string;
  groups?: string[];
}

export interface ControlPlaneOptions {
  binaries: ControlPlaneBinaries;
  /** Extra token users (beyond the admin), for RBAC checks as a service account would be checked. */
  users?: Record<string, TokenUser>;
  /** Simulated nodes to create (kwok manages them): default one, `kwok-node-0`. */
  nodes?: number;
}

/**
 * Starts the control plane and resolves once the API server is ready, the controllers run and the
 * simulated nodes are Ready. Everything lives in a temporary directory removed on stop.
 */
export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  const { binaries } = options;
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-kube-'));
  const processes: Started[] = [];
  const stopAll = async () => {
    for (const p of [...processes].reverse()) await stopProcess(p);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // etcd
    const [etcdClient, etcdPeer] = [await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = start(
      'etcd',
      binaries.etcd,
      [
        '--name=local',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=local=http://127.0.0.1:${etcdPeer}`,
        '--log-level=warn',
      ],
      dir,
    );
    processes.push(etcd);
    await waitFor(
      'etcd to serve',
      async () => {
        alive(etcd);
        const res = await fetch(`${etcdUrl}/health`).catch(() => null);
        return res?.ok === true;
      },
      60_000,
    );

    // kube-apiserver
    const token = randomBytes(24).toString('hex');
    const users: Record<string, TokenUser> = { admin: { token, groups: ['system:masters'] }, ...options.users };
    const tokens = Object.entries(users)
      .map(([name, u]) => `${u.token},${name},${name}${u.groups?.length ? `,"${u.groups.join(',')}"` : ''}`)
      .join('\n');
    writeFileSync(join(dir, 'tokens.csv'), tokens + '\n', { mode: 0o600 });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }), { mode: 0o600 });
    writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    const certDir = join(dir, 'certs');
    mkdirSync(certDir);
    // kwok's server plays the kubelet's: exec goes there over TLS, checked against this certificate.
    // kwok asks for no client certificate (it authenticates no one), so the API server is given none.
    const kubeletCert = join(certDir, 'kubelet.crt');
    const kubeletKey = join(certDir, 'kubelet.key');
    servingCert(kubeletCert, kubeletKey);
    const kubeletPort = await freePort();
    const apiPort = await freePort();
    const server = `https://127.0.0.1:${apiPort}`;
    const apiserver = start(
      'kube-apiserver',
      binaries['kube-apiserver'],
      [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        // The `kubernetes` Service's endpoint is this address, which the default (lease)
        // reconciler refuses as loopback; nothing here reaches the API server through the Service.
        '--endpoint-reconciler-type=none',
        `--secure-port=${apiPort}`,
        `--cert-dir=${certDir}`,
        `--token-auth-file=${join(dir, 'tokens.csv')}`,
        '--authorization-mode=Node,RBAC',
        '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
        `--service-account-key-file=${join(dir, 'sa.pub')}`,
        `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
        '--service-cluster-ip-range=10.96.0.0/16',
        '--allow-privileged=true',
        '--anonymous-auth=false',
        // A node's kubelet is reached at its InternalIP (kwok's, 127.0.0.1), not its unresolvable name.
        '--kubelet-preferred-address-types=InternalIP',
        `--kubelet-certificate-authority=${kubeletCert}`,
      ],
      dir,
    );
    processes.push(apiserver);
    const caFile = join(certDir, 'apiserver.crt');
    await waitFor(
      'kube-apiserver to be ready',
      async () => {
        alive(apiserver);
        if (!existsSync(caFile)) return false;
        const ca = readFileSync(caFile, 'utf8');
        const res = await kubeRequest(server, ca, token, 'GET', '/readyz').catch(() => null);
        return res?.status === 200;
      },
      120_000,
    );
    const ca = readFileSync(caFile, 'utf8');
    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, kubeconfigFor(server, ca, 'admin', token), { mode: 0o600 });
    const api = <T>(
      method: string,
      path: string,
      body?: unknown,
      opts: { token?: string; contentType?: string } = {},
    ) => kubeRequest<T>(server, ca, opts.token ?? token, method, path, body, opts.contentType);

    // Controllers and the scheduler, as the admin (one process each: no leader election).
    const controllers = start(
      'kube-controller-manager',
      binaries['kube-controller-manager'],
      [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        `--secure-port=${await freePort()}`,
        `--service-account-private-key-file=${join(dir, 'sa.key')}`,
        `--root-ca-file=${caFile}`,
        '--use-service-account-credentials=false',
        '--cluster-cidr=10.244.0.0/16',
        '--service-cluster-ip-range=10.96.0.0/16',
        // No cloud controllers are built in (1.37 has none to disable); node IPAM is left to kwok.
        '--controllers=*,-node-ipam-controller',
      ],
      dir,
    );
    processes.push(controllers);
    const scheduler = start(
      'kube-scheduler',
      binaries['kube-scheduler'],
      [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        `--secure-port=${await freePort()}`,
      ],
      dir,
    );
    processes.push(scheduler);
    writeFileSync(join(dir, 'kwok.yaml'), KWOK_STAGES);
    // Exec and ClusterExec resources are watched by kwok, so a test adds them as it makes pods.
    for (const kind of ['Exec', 'ClusterExec'] as const) {
      const definition = execCrd(kind);
      const crd = await api('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', definition);
      if (crd.status !== 201)
        throw new Error(`creating the ${kind} resource definition: ${crd.status} ${JSON.stringify(crd.body)}`);
      await waitFor(
        `the ${kind} resource definition to be established`,
        async () => {
          const res = await api<{ status?: { conditions?: { type: string; status: string }[] } }>(
            'GET',
            `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${definition.metadata.name}`,
          );
          return res.body.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true;
        },
        60_000,
      );
    }
    // What an exec'd command sees of kwok's environment: PATH and an empty HOME, nothing of the tests'.
    const home = join(dir, 'home');
    mkdirSync(home);
    // kwok in a pid namespace of its own, where it is pid 1 as a container's command is: what an
    // exec runs in a pod of it runs there, so a runner sweeping "the whole pod" of the agent's
    // processes sweeps that namespace, not this machine. It goes with kwok.
    const [kwokBinary, kwokPrefix] = podNamespace(binaries.kwok);
    const kwok = start(
      'kwok',
      kwokBinary,
      [
        ...kwokPrefix,
        `--kubeconfig=${kubeconfig}`,
        '--manage-all-nodes=false',
        '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
        '--node-ip=127.0.0.1',
        `--config=${join(dir, 'kwok.yaml')}`,
        // The kubelet endpoint the nodes report (--node-port), served on loopback only.
        `--node-port=${kubeletPort}`,
        `--server-address=127.0.0.1:${kubeletPort}`,
        `--tls-cert-file=${kubeletCert}`,
        `--tls-private-key-file=${kubeletKey}`,
        '--enable-crds=Exec,ClusterExec',
      ],
      dir,
      { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: home },
    );
    processes.push(kwok);

    // The simulated nodes. kwok marks them Ready and plays their kubelet.
    const nodeCount = options.nodes ?? 1;
    for (let i = 0; i < nodeCount; i++) {
      const name = `kwok-node-${i}`;
      const created = await api('POST', '/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: {
          name,
          annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
          labels: {
            'kubernetes.io/hostname': name,
            'kubernetes.io/os': 'linux',
            'kubernetes.io/arch': 'amd64',
            type: 'kwok',
          },
        },
        status: {
          allocatable: { cpu: '64', memory: '256Gi', pods: '250', 'ephemeral-storage': '1Ti' },
          capacity: { cpu: '64', memory: '256Gi', pods: '250', 'ephemeral-storage': '1Ti' },
        },
      });
      if (created.status !== 201)
        throw new Error(`creating node ${name}: ${created.status} ${JSON.stringify(created.body)}`);
    }
    await waitFor(
      'the simulated nodes to be Ready',
      async () => {
        for (const p of processes) alive(p);
        const res = await api<{ items: { status?: { conditions?: { type: string; status: string }[] } }[] }>(
          'GET',
          '/api/v1/nodes',
        );
        const ready = res.body.items.filter((n) =>
          n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return ready.length === nodeCount;
      },
      120_000,
    );
    // The default ServiceAccount in `default` shows that the controllers run.
    await waitFor(
      'the controllers to run',
      async () => {
        for (const p of processes) alive(p);
        return (await api('GET', '/api/v1/namespaces/default/serviceaccounts/default')).status === 200;
      },
      120_000,
    );

    const execLocally = async (
      pod: { namespace: string; name: string },
      opts: { workDir: string; env?: Record<string, string> },
    ) => {
      const res = await api('POST', `/apis/kwok.x-k8s.io/v1alpha1/namespaces/${pod.namespace}/execs`, {
        apiVersion: 'kwok.x-k8s.io/v1alpha1',
        kind: 'Exec',
        metadata: { name: pod.name, namespace: pod.namespace },
        spec: {
          execs: [
            {
              local: {
                workDir: opts.workDir,
                envs: Object.entries(opts.env ?? {}).map(([name, value]) => ({ name, value })),
              },
            },
          ],
        },
      });
      if (res.status !== 201)
        throw new Error(`creating the Exec of ${pod.name}: ${res.status} ${JSON.stringify(res.body)}`);
    };

    const execLocallyInNamespace = async (
      namespace: string,
      opts: { workDir: string; env?: Record<string, string> },
    ) => {
      const res = await api('POST', '/apis/kwok.x-k8s.io/v1alpha1/clusterexecs', {
        apiVersion: 'kwok.x-k8s.io/v1alpha1',
        kind: 'ClusterExec',
        metadata: { name: `namespace-${namespace}` },
        spec: {
          selector: { matchNamespaces: [namespace] },
          execs: [
            {
              local: {
                workDir: opts.workDir,
                envs: Object.entries(opts.env ?? {}).map(([name, value]) => ({ name, value })),
              },
            },
          ],
        },
      });
      if (res.status !== 201)
        throw new Error(`creating the ClusterExec of ${namespace}: ${res.status} ${JSON.stringify(res.body)}`);
    };

    return {
      server,
      kubeconfig,
      token,
      ca,
      api,
      execLocally,
      execLocallyInNamespace,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
