import { ControlSubmission, Interaction, MessageAccepted, MessagePage, Run, Task } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { RunDriver, question, waitFor } from '@threadwork/testing';
import { json } from './support/http.js';
import { alice, createThread, post, runOf, stack, useApiStack } from './support/api-stack.js';

// The public API end to end: what follows a thread's first run (messages, queue, steer, cancel, questions).

useApiStack();

describe('messages, queue and steer', () => {
  it('admits a new run on an idle thread and refuses a message while one is live', async () => {
    const created = await createThread(alice);
    const busy = await json<{ error: { code: string } }>(
      await post(`/v1/threads/${created.id}/messages`, alice, { prompt: 'again' }),
      409,
    );
    expect(busy.error.code).toBe('thread_busy');

    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    await driver.to('completed');
    const accepted = await json(
      await post(`/v1/threads/${created.id}/messages`, alice, { prompt: 'Now the docs' }),
      202,
      MessageAccepted,
    );
    expect(accepted).toMatchObject({ status: 'accepted', run_status: 'queued' });
    expect(accepted.run_id).not.toBe(created.run_id);

    const messages = await json(
      await stack.fetch(`/v1/threads/${created.id}/messages`, { user: alice }),
      200,
      MessagePage,
    );
    expect(messages.messages.map((m) => m.parts)).toEqual([
      [{ type: 'text', text: 'Add a changelog' }],
      [{ type: 'text', text: 'Now the docs' }],
    ]);
    expect(messages.next_cursor).toBeNull();
    const first = await json(
      await stack.fetch(`/v1/threads/${created.id}/messages?limit=1`, { user: alice }),
      200,
      MessagePage,
    );
    expect(first.messages).toHaveLength(1);
    const second = await json(
      await stack.fetch(`/v1/threads/${created.id}/messages?limit=1&cursor=${first.next_cursor}`, { user: alice }),
      200,
      MessagePage,
    );
    expect(second.messages[0]?.id).toBe(accepted.message_id);
  });

  it('queues behind a live run and admits the queued prompt when the run ends', async () => {
    const created = await createThread(alice);
    const queued = await json(
      await post(`/v1/threads/${created.id}/queue`, alice, { prompt: 'Then this' }),
      202,
      ControlSubmission,
    );
    expect(queued).toMatchObject({
      control: { kind: 'queue', status: 'pending', target_run_id: created.run_id, created_run_id: null },
      run: null,
    });

    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    await driver.to('completed');

    const applied = await waitFor('queued control applied', async () => {
      const list = await json<{ controls: { id: string; status: string; created_run_id: string | null }[] }>(
        await stack.fetch(`/v1/threads/${created.id}/controls`, { user: alice }),
        200,
      );
      const control = list.controls.find((c) => c.id === queued.control.id);
      return control?.status === 'applied' ? control : undefined;
    });
    expect(applied.created_run_id).toBeTruthy();
    expect((await runOf(alice, applied.created_run_id!)).status).toBe('queued');

    const taskControls = await json<{ controls: { task_id: string }[] }>(
      await stack.fetch(`/v1/tasks/${created.id}/controls?status=applied`, { user: alice }),
      200,
    );
    expect(taskControls.controls[0]?.task_id).toBe(created.id);
  });

  it('applies a queue at once on an idle thread', async () => {
    const created = await createThread(alice);
    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    await driver.to('failed', { error: { code: 'model_error', message: 'the model answered 500' } });
    const submission = await json(
      await post(`/v1/threads/${created.id}/queue`, alice, { prompt: 'Try again' }),
      202,
      ControlSubmission,
    );
    expect(submission.control.status).toBe('applied');
    expect(submission.run).toMatchObject({ run_status: 'queued', run_id: submission.control.created_run_id });
  });

  it('steers only a live run', async () => {
    const created = await createThread(alice);
    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    const steer = await json(
      await post(`/v1/threads/${created.id}/steer`, alice, { prompt: 'Use markdown' }),
      202,
      ControlSubmission,
    );
    expect(steer).toMatchObject({
      control: { kind: 'steer', status: 'pending', target_run_id: created.run_id },
      run: null,
    });
    await driver.to('completed');
    const none = await json<{ error: { code: string } }>(
      await post(`/v1/threads/${created.id}/steer`, alice, { prompt: 'too late' }),
      409,
    );
    expect(none.error.code).toBe('no_active_run');
  });
});

describe('cancel', () => {
  it('cancels a queued run at once, a running one through cancelling, and leaves a terminal one alone', async () => {
    const queued = await createThread(alice);
    const cancelled = await json(await post(`/v1/runs/${queued.run_id}/cancel`, alice, undefined), 202, Run);
    expect(cancelled).toMatchObject({ status: 'cancelled', terminal: true });
    const again = await json(await post(`/v1/runs/${queued.run_id}/cancel`, alice, undefined), 200, Run);
    expect(again.status).toBe('cancelled');
    expect((await json(await stack.fetch(`/v1/tasks/${queued.id}`, { user: alice }), 200, Task)).status).toBe(
      'cancelled',
    );

    const live = await createThread(alice);
    const driver = await RunDriver.claim(stack.nc, live.run_id);
    await driver.start();
    const cancelling = await json(await post(`/v1/runs/${live.run_id}/cancel`, alice, undefined), 202, Run);
    expect(cancelling.status).toBe('cancelling');
    await driver.to('cancelled');
    expect((await runOf(alice, live.run_id)).status).toBe('cancelled');
  });
});

describe('interactions', () => {
  it('waits for an answer, settles once and redacts secrets', async () => {
    const created = await createThread(alice, { collaboration_mode: 'plan' });
    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    const interaction = await driver.ask([question('file', ['README.md', 'NOTES.md']), question('token', [], true)]);
    expect((await runOf(alice, created.run_id)).status).toBe('waiting_for_input');
    expect((await json(await stack.fetch(`/v1/tasks/${created.id}`, { user: alice }), 200, Task)).status).toBe(
      'waiting',
    );

    const pending = await json<{ interactions: Interaction[] }>(
      await stack.fetch(`/v1/threads/${created.id}/interactions?status=pending`, { user: alice }),
      200,
    );
    expect(pending.interactions.map((i) => i.id)).toEqual([interaction.id]);
    const one = await json(await stack.fetch(`/v1/interactions/${interaction.id}`, { user: alice }), 200, Interaction);
    expect(one).toMatchObject({ status: 'pending', kind: 'question', run_id: created.run_id, thread_id: created.id });

    const answers = {
      file: { kind: 'options', optionIds: ['NOTES.md'] },
      token: { kind: 'text', text: 's3cr3t-value' },
    };
    const settled = await json<Record<string, unknown>>(
      await post(`/v1/interactions/${interaction.id}/answer`, alice, { action: 'answer', answers }),
      200,
    );
    expect(settled).toMatchObject({
      interactionId: interaction.id,
      status: 'answered',
      answers: { file: answers.file, token: { kind: 'redacted' } },
    });
    expect(JSON.stringify(settled)).not.toContain('s3cr3t-value');

    const conflict = await json<{ error: { code: string } }>(
      await post(`/v1/interactions/${interaction.id}/answer`, alice, { action: 'answer', answers }),
      409,
    );
    expect(conflict.error.code).toBe('already_settled');

    const read = await stack.fetch(`/v1/interactions/${interaction.id}`, { user: alice });
    expect(await read.text()).not.toContain('s3cr3t-value');
    expect((await runOf(alice, created.run_id)).status).toBe('running');
    // The runner reads the answers in clear through the internal API only.
    expect(JSON.stringify(await driver.settlement(interaction.id))).toContain('s3cr3t-value');
  });
});
