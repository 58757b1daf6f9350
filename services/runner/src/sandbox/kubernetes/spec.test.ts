import { describe, expect, it } from 'vitest';
import { sandboxClaim, sandboxName, sandboxPod, THREAD_ANNOTATION, type PodSettings } from './spec.js';

const settings: PodSettings = {
  namespace: 'threadwork-sandboxes',
  image: 'registry.example.com/sandbox:1',
  resources: { limits: { cpu: '2', memory: '4Gi' } },
  runtimeClassName: 'gvisor',
  nodeSelector: { pool: 'sandboxes' },
  tolerations: [{ key: 'sandboxes', operator: 'Exists', effect: 'NoSchedule' }],
  volumeSize: '10Gi',
  storageClassName: null,
  tmpSize: '1Gi',
};

describe('the sandbox pod and volume asked for', () => {
  it('names both from the thread id, stably, fit for any thread id', () => {
    expect(sandboxName('thr_1')).toBe(sandboxName('thr_1'));
    expect(sandboxName('thr_1')).not.toBe(sandboxName('thr_2'));
    for (const id of ['thr_1', 'Thread With Spaces/and:colons', 'x'.repeat(256)]) {
      expect(sandboxName(id)).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(sandboxName(id).length).toBeLessThanOrEqual(63);
      expect(sandboxPod(id, settings).metadata?.annotations?.[THREAD_ANNOTATION]).toBe(id);
      expect(sandboxClaim(id, settings).metadata?.name).toBe(sandboxName(id));
    }
  });

  it('holds no credential: no token, no service links, no Secret, ConfigMap or projected volume, HOME alone', () => {
    const pod = sandboxPod('thr_1', settings);
    const spec = pod.spec!;
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.enableServiceLinks).toBe(false);
    expect(spec.serviceAccountName).toBeUndefined();
    expect(spec.containers).toHaveLength(1);
    const c = spec.containers[0]!;
    expect(c.env).toEqual([{ name: 'HOME', value: '/workspace/home' }]);
    expect(c.envFrom).toBeUndefined();
    expect(c.args).toBeUndefined();
    expect(c.ports).toBeUndefined();
    // Only the workspace claim and an emptyDir: no Secret, ConfigMap, projected token or host path.
    expect(spec.volumes?.map((v) => Object.keys(v).sort())).toEqual([
      ['name', 'persistentVolumeClaim'],
      ['emptyDir', 'name'],
    ]);
  });

  it('runs non-root with no capability and a read-only root, writable only its workspace and /tmp', () => {
    const spec = sandboxPod('thr_1', settings).spec!;
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(spec.hostNetwork).toBe(false);
    expect(spec.hostPID).toBe(false);
    expect(spec.hostIPC).toBe(false);
    const c = spec.containers[0]!;
    expect(c.securityContext).toMatchObject({
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.securityContext?.capabilities?.add).toBeUndefined();
    expect(c.volumeMounts?.map((m) => m.mountPath).sort()).toEqual(['/tmp', '/workspace']);
    expect(spec.volumes).toEqual([
      { name: 'workspace', persistentVolumeClaim: { claimName: sandboxName('thr_1') } },
      { name: 'tmp', emptyDir: { sizeLimit: '1Gi' } },
    ]);
  });

  it('takes image, resources, RuntimeClass, node selector, tolerations and the volume from the settings', () => {
    const spec = sandboxPod('thr_1', settings).spec!;
    expect(spec.containers[0]!.image).toBe('registry.example.com/sandbox:1');
    expect(spec.containers[0]!.resources).toEqual({ limits: { cpu: '2', memory: '4Gi' } });
    expect(spec.runtimeClassName).toBe('gvisor');
    expect(spec.nodeSelector).toEqual({ pool: 'sandboxes' });
    expect(spec.tolerations).toEqual(settings.tolerations);
    expect(sandboxPod('thr_1', { ...settings, runtimeClassName: null }).spec!.runtimeClassName).toBeUndefined();
    expect(sandboxClaim('thr_1', settings).spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '10Gi' } },
    });
    expect(sandboxClaim('thr_1', { ...settings, storageClassName: 'fast' }).spec?.storageClassName).toBe('fast');
  });
});
