// A run's event log as the Thread page shows it, built from the events (DESIGN.md section 6) one
// batch at a time. Pure: no DOM, no fetch, so it is tested on its own (test/console/thread-log.test.ts).
// Chunks are read loosely, the way the contract keeps them (`chunk` is any JSON value): a field
// of the wrong type is ignored and an unknown `type` is shown by name, never thrown on.

export interface RunEvent {
  sequence: number;
  chunk: unknown;
  created_at: string;
}

export interface RunError {
  code: string;
  message: string;
  detail?: string | undefined;
}

export interface Usage {
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  totalTokens?: number | undefined;
  costUsd?: number | undefined;
}

export interface PlanStep {
  step: string;
  status: string;
}

export type LogItem =
  | { kind: 'status'; sequence: number; status: string; previous: string | null; error: RunError | null }
  | { kind: 'message'; sequence: number; itemId: string; text: string; complete: boolean }
  | { kind: 'reasoning'; sequence: number; itemId: string; text: string }
  | {
      kind: 'command';
      sequence: number;
      itemId: string;
      command: string;
      output: string;
      truncated: boolean;
      /** undefined while it runs; null when it ended without one (killed, or not reported). */
      exitCode: number | null | undefined;
      durationMs: number | null;
    }
  | { kind: 'file'; sequence: number; path: string; change: string }
  | { kind: 'plan'; sequence: number; steps: PlanStep[]; explanation: string | null }
  | { kind: 'interaction'; sequence: number; interactionId: string; interactionKind: string; settled: string | null }
  | { kind: 'control'; sequence: number; controlId: string; controlKind: string }
  | { kind: 'error'; sequence: number; error: RunError }
  | { kind: 'network'; sequence: number; host: string; port: number; reason: string }
  | { kind: 'sandbox'; sequence: number; layers: string[]; egress: string }
  | { kind: 'other'; sequence: number; type: string };

export interface RunLog {
  /** The last sequence applied; an event at or below it is one already seen (a resumed stream's repeat). */
  lastSequence: number;
  items: LogItem[];
  /** Where the item of a message, reasoning or command `item_id` is in `items`, by kind and id. */
  index: Record<string, number>;
  /** Latest of each: the chunks carry the whole plan and the cumulative usage each time. */
  plan: { steps: PlanStep[]; explanation: string | null } | null;
  usage: Usage | null;
  status: string | null;
  error: RunError | null;
}

export const emptyLog = (): RunLog => ({
  lastSequence: 0,
  items: [],
  index: {},
  plan: null,
  usage: null,
  status: null,
  error: null,
});

/**
 * The log with `events` applied in order. Events at or below `lastSequence` are skipped, so a
 * stream resumed from an earlier point (or delivering a repeat) never shows anything twice.
 * Copies the log once per batch, not once per event: a long stored log arrives in one batch.
 */
export function applyEvents(log: RunLog, events: readonly RunEvent[]): RunLog {
  const fresh = events.filter(
    (e, i) => e.sequence > log.lastSequence && (i === 0 || e.sequence > events[i - 1]!.sequence),
  );
  if (fresh.length === 0) return log;
  const next: RunLog = { ...log, items: log.items.slice(), index: { ...log.index } };
  for (const event of fresh) {
    applyOne(next, event);
    next.lastSequence = event.sequence;
  }
  return next;
}

function applyOne(log: RunLog, { sequence, chunk }: RunEvent): void {
  const c = (chunk ?? {}) as Record<string, unknown>;
  const type = str(c.type);
  switch (type) {
    case 'run.status': {
      const status = str(c.status);
      if (!status) return;
      const error = runError(c.error);
      log.status = status;
      if (error) log.error = error;
      log.items.push({ kind: 'status', sequence, status, previous: str(c.previous) ?? null, error });
      return;
    }
    case 'message.delta':
    case 'message.completed': {
      const itemId = str(c.item_id);
      if (!itemId) return;
      const done = type === 'message.completed';
      const found = itemAt(log, 'message', itemId);
      if (found?.kind === 'message') {
        const text = done ? (str(c.text) ?? found.text) : found.text + (str(c.delta) ?? '');
        replace(log, 'message', itemId, { ...found, text, complete: done || found.complete });
      } else {
        add(log, 'message', itemId, {
          kind: 'message',
          sequence,
          itemId,
          text: (done ? str(c.text) : str(c.delta)) ?? '',
          complete: done,
        });
      }
      return;
    }
    case 'reasoning.delta': {
      const itemId = str(c.item_id);
      if (!itemId) return;
      const found = itemAt(log, 'reasoning', itemId);
      const delta = str(c.delta) ?? '';
      if (found?.kind === 'reasoning') replace(log, 'reasoning', itemId, { ...found, text: found.text + delta });
      else add(log, 'reasoning', itemId, { kind: 'reasoning', sequence, itemId, text: delta });
      return;
    }
    case 'command.started':
    case 'command.output':
    case 'command.completed': {
      const itemId = str(c.item_id);
      if (!itemId) return;
      const found = itemAt(log, 'command', itemId);
      const command =
        found?.kind === 'command'
          ? found
          : {
              kind: 'command' as const,
              sequence,
              itemId,
              command: '',
              output: '',
              truncated: false,
              exitCode: undefined,
              durationMs: null,
            };
      let updated = command;
      if (type === 'command.started') updated = { ...command, command: str(c.command) ?? command.command };
      else if (type === 'command.output') {
        const delta = str(c.delta) ?? '';
        updated = {
          ...command,
          // `replace`: the harness sends the whole output over; what came before is dropped.
          output: c.replace === true ? delta : command.output + delta,
          truncated: command.truncated || c.truncated === true,
        };
      } else {
        updated = {
          ...command,
          exitCode: typeof c.exit_code === 'number' ? c.exit_code : null,
          durationMs: typeof c.duration_ms === 'number' ? c.duration_ms : null,
        };
      }
      if (found) replace(log, 'command', itemId, updated);
      else add(log, 'command', itemId, updated);
      return;
    }
    case 'file.changed': {
      const path = str(c.path);
      if (path) log.items.push({ kind: 'file', sequence, path, change: str(c.kind) ?? 'changed' });
      return;
    }
    case 'plan.updated': {
      const steps = Array.isArray(c.plan)
        ? c.plan.flatMap((s: unknown) => {
            const step = str((s as Record<string, unknown> | null)?.step);
            const status = str((s as Record<string, unknown> | null)?.status) ?? 'pending';
            return step === undefined ? [] : [{ step, status }];
          })
        : [];
      log.plan = { steps, explanation: str(c.explanation) ?? null };
      // Shown once, where it first appeared, with its latest content.
      const found = itemAt(log, 'plan', 'plan');
      const item: LogItem = { kind: 'plan', sequence: found?.sequence ?? sequence, ...log.plan };
      if (found) replace(log, 'plan', 'plan', item);
      else add(log, 'plan', 'plan', item);
      return;
    }
    case 'interaction.requested': {
      const interactionId = str(c.interaction_id);
      if (!interactionId) return;
      add(log, 'interaction', interactionId, {
        kind: 'interaction',
        sequence,
        interactionId,
        interactionKind: str(c.kind) ?? 'question',
        settled: null,
      });
      return;
    }
    case 'interaction.settled': {
      const interactionId = str(c.interaction_id);
      if (!interactionId) return;
      const found = itemAt(log, 'interaction', interactionId);
      const settled = str(c.status) ?? 'answered';
      if (found?.kind === 'interaction') replace(log, 'interaction', interactionId, { ...found, settled });
      else
        add(log, 'interaction', interactionId, {
          kind: 'interaction',
          sequence,
          interactionId,
          interactionKind: 'question',
          settled,
        });
      return;
    }
    case 'control.applied': {
      const controlId = str(c.control_id);
      if (controlId) log.items.push({ kind: 'control', sequence, controlId, controlKind: str(c.kind) ?? 'queue' });
      return;
    }
    case 'usage':
      log.usage = {
        inputTokens: num(c.inputTokens),
        outputTokens: num(c.outputTokens),
        totalTokens: num(c.totalTokens),
        costUsd: num(c.costUsd),
      };
      return;
    case 'error': {
      const error = runError(c);
      if (error) log.items.push({ kind: 'error', sequence, error });
      return;
    }
    case 'network.refused':
      log.items.push({
        kind: 'network',
        sequence,
        host: str(c.host) ?? '?',
        port: num(c.port) ?? 0,
        reason: str(c.reason) ?? '',
      });
      return;
    case 'sandbox.ready':
      log.items.push({
        kind: 'sandbox',
        sequence,
        layers: Array.isArray(c.layers) ? c.layers.filter((l): l is string => typeof l === 'string') : [],
        egress: str(c.egress) ?? 'none',
      });
      return;
    default:
      log.items.push({ kind: 'other', sequence, type: type ?? 'event' });
  }
}

function itemAt(log: RunLog, kind: string, id: string): LogItem | undefined {
  const at = log.index[`${kind}:${id}`];
  return at === undefined ? undefined : log.items[at];
}

function add(log: RunLog, kind: string, id: string, item: LogItem): void {
  log.index[`${kind}:${id}`] = log.items.length;
  log.items.push(item);
}

function replace(log: RunLog, kind: string, id: string, item: LogItem): void {
  const at = log.index[`${kind}:${id}`];
  if (at !== undefined) log.items[at] = item;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

function runError(v: unknown): RunError | null {
  const e = v as Record<string, unknown> | null | undefined;
  const code = str(e?.code);
  const message = str(e?.message);
  if (code === undefined || message === undefined) return null;
  return { code, message, detail: str(e?.detail) };
}
