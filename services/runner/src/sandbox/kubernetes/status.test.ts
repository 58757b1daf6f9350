import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podState } from './status.js';

const pod = (status: V1Pod['status'], deleting = false): V1Pod => ({
  metadata: { name: 'p', ...(deleting ? { deletionTimestamp: new Date() } : {}) },
  status,
});
const ready = (value: 'True' | 'False') => ({ type: 'Ready', status: value });

describe('a sandbox status as its pod shows it', () => {
  it('is ready only when the pod runs and is Ready', () => {
    expect(podState(pod({ phase: 'Running', conditions: [ready('True')] }))).toEqual({ status: 'ready', reason: null });
    expect(podState(pod({ phase: 'Running', conditions: [ready('False')] })).status).toBe('initializing');
    expect(podState(pod({ phase: 'Pending', conditions: [ready('True')] })).status).toBe('initializing');
    expect(podState(pod(undefined)).status).toBe('initializing');
  });

  it('is initializing, saying why, while the pod cannot be scheduled yet', () => {
    expect(
      podState(
        pod({
          phase: 'Pending',
          conditions: [
            { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available' },
          ],
        }),
      ),
    ).toEqual({ status: 'initializing', reason: '0/3 nodes are available' });
  });

  it('is stopped when the pod is gone or being deleted, and failed when it ended or cannot start', () => {
    expect(podState(null)).toEqual({ status: 'stopped', reason: null });
    expect(podState(pod({ phase: 'Running', conditions: [ready('True')] }, true)).status).toBe('stopped');
    expect(podState(pod({ phase: 'Failed', reason: 'Evicted' }))).toEqual({ status: 'failed', reason: 'Evicted' });
    expect(podState(pod({ phase: 'Succeeded' }))).toEqual({ status: 'failed', reason: 'pod succeeded' });
    for (const reason of ['ErrImagePull', 'ImagePullBackOff', 'CrashLoopBackOff', 'CreateContainerConfigError']) {
      const state = podState(
        pod({
          phase: 'Pending',
          containerStatuses: [
            {
              name: 'sandbox',
              image: 'i',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { waiting: { reason, message: 'no such image' } },
            },
          ],
        }),
      );
      expect(state, reason).toEqual({ status: 'failed', reason: `${reason}: no such image` });
    }
    // A container still being made is not a failure.
    expect(
      podState(
        pod({
          phase: 'Pending',
          containerStatuses: [
            {
              name: 'sandbox',
              image: 'i',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { waiting: { reason: 'ContainerCreating' } },
            },
          ],
        }),
      ).status,
    ).toBe('initializing');
  });
});
