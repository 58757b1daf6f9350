import { describe, expect, it } from 'vitest';
import { canonicalJson, messageAdmissionKey, requestHash } from './idempotency.js';

describe('idempotency', () => {
  it('hashes bodies independently of member order and absent members', () => {
    expect(canonicalJson({ b: 1, a: [{ y: 2, x: 1 }], c: undefined })).toBe('{"a":[{"x":1,"y":2}],"b":1}');
    expect(requestHash({ prompt: 'p', repository_id: 1 })).toBe(requestHash({ repository_id: 1, prompt: 'p' }));
    expect(requestHash({ prompt: 'p' })).not.toBe(requestHash({ prompt: 'q' }));
  });

  it('scopes admission keys to the thread', () => {
    expect(messageAdmissionKey('thr_a', '1')).toBe(messageAdmissionKey('thr_a', '1'));
    expect(messageAdmissionKey('thr_a', '1')).not.toBe(messageAdmissionKey('thr_b', '1'));
    expect(messageAdmissionKey('thr_a', 'x'.repeat(256)).length).toBeLessThanOrEqual(256);
  });
});
