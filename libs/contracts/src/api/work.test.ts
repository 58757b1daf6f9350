import { describe, expect, it } from 'vitest';
import { Project, WorkList, WorkThread } from './work.js';

const at = '2025-05-01T10:00:00.000Z';

const workThread = {
  id: 'thr_1',
  project_id: 'prj_1',
  status: 'active',
  prompt: 'Fix the build',
  harness: 'codex',
  model: 'gpt-5',
  reasoning_effort: 'medium',
  collaboration_mode: 'default',
  sandbox_status: 'initializing',
  additions: 3,
  deletions: 1,
  latest_run: { id: 'run_1', status: 'queued' },
  created_at: at,
  updated_at: at,
};

const project = {
  id: 'prj_1',
  name: 'app',
  repository: 'acme/app',
  branch: 'main',
  repositories: [{ id: 'prp_1', repository_id: 42, full_name: 'acme/app', branch: 'main' }],
  threads: [workThread],
};

describe('WorkList', () => {
  it('accepts the contract example', () => {
    expect(WorkList.parse({ projects: [project] })).toEqual({ projects: [project] });
  });

  it('accepts a work thread with only the required fields and null prompt and latest run', () => {
    const minimal = { id: 'thr_2', status: 'idle', prompt: null, harness: 'codex', model: 'gpt-5', latest_run: null };
    expect(WorkThread.parse(minimal)).toEqual(minimal);
  });

  it('requires prompt and latest_run to be present even when null', () => {
    const { latest_run: _latestRun, ...withoutRun } = workThread;
    expect(WorkThread.safeParse(withoutRun).success).toBe(false);
    const { prompt: _prompt, ...withoutPrompt } = workThread;
    expect(WorkThread.safeParse(withoutPrompt).success).toBe(false);
  });

  it('rejects a latest run with an unknown status and a repository with a non-positive id', () => {
    expect(WorkThread.safeParse({ ...workThread, latest_run: { id: 'run_1', status: 'done' } }).success).toBe(false);
    expect(
      Project.safeParse({
        ...project,
        repositories: [{ id: 'prp_1', repository_id: 0, full_name: 'a/b', branch: 'main' }],
      }).success,
    ).toBe(false);
  });
});
