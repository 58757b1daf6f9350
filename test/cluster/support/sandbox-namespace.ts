// A namespace for sandbox pods on a test control plane, as a deployment has it once the chart is in:
// the namespace, a volume for a workspace claim to bind (no provisioner runs), and the default
// ServiceAccount the controllers give it, without which no pod is admitted.
import { waitFor, type ControlPlane } from '@threadwork/testing';

export async function sandboxNamespace(plane: ControlPlane, namespace: string, volume: string): Promise<void> {
  const ns = await plane.api('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace },
  });
  if (ns.status !== 201) throw new Error(`creating namespace ${namespace}: ${ns.status}`);
  const pv = await plane.api('POST', '/api/v1/persistentvolumes', {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: volume },
    spec: {
      capacity: { storage: '10Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      storageClassName: '',
      hostPath: { path: `/var/lib/${volume}` },
    },
  });
  if (pv.status !== 201) throw new Error(`creating volume ${volume}: ${pv.status}`);
  await waitFor(
    `namespace ${namespace}'s default ServiceAccount`,
    async () => (await plane.api('GET', `/api/v1/namespaces/${namespace}/serviceaccounts/default`)).status === 200,
    300_000,
  );
}
