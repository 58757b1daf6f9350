import { isAbsolute, relative } from 'node:path';
import type { ServerNotification } from '@threadwork/codex-protocol';
import type {
  PatchChangeKind,
  ThreadItem,
  ToolRequestUserInputQuestion,
  TurnPlanStepStatus,
} from '@threadwork/codex-protocol/v2';
import type { FileChangeKind, PlanStepStatus, Question, RunEventChunk, RunUsage } from '@threadwork/contracts';
import { OutputBudget } from '../../domain/text.js';
import { outputChunks } from '../output.js';

// Codex app-server notifications → the neutral chunks of DESIGN.md section 6. Pure apart from the
// per-turn state it keeps (output forwarded per command, the last reply, the usage so far), so it
// is tested with recorded notifications and no process.

export interface MapperOptions {
  /** The agent's working directory: file paths in events are relative to it. */
  cwd: string;
  /** Output forwarded per command; the rest is dropped with one note. */
  outputCapBytes: number;
  /** Keep the native notification under `raw`. */
  includeRaw: boolean;
}

const PLAN_STATUS: Record<TurnPlanStepStatus, PlanStepStatus> = {
  pending: 'pending',
  inProgress: 'in_progress',
  completed: 'completed',
};

export function fileChangeKind(kind: PatchChangeKind): FileChangeKind {
  switch (kind.type) {
    case 'add':
      return 'added';
    case 'delete':
      return 'deleted';
    case 'update':
      return kind.move_path ? 'renamed' : 'modified';
  }
}

/** Codex asks with the very shape the contract's Question mirrors; only a missing option list differs. */
export function toQuestion(q: ToolRequestUserInputQuestion): Question {
  return {
    id: q.id,
    header: q.header,
    question: q.question,
    isOther: q.isOther,
    isSecret: q.isSecret,
    options: (q.options ?? []).map((o) => ({ label: o.label, description: o.description })),
  };
}

export class CodexTurnMapper {
  private readonly budget: OutputBudget;
  /**
   * What each command's deltas carried, up to the output cap: the completed item repeats the whole
   * output, and what the deltas missed is taken from there.
   */
  private readonly streamed = new Map<string, string>();
  private readonly usageTotal = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };
  private sawUsage = false;
  lastReply: { itemId: string; text: string } | null = null;

  constructor(private readonly options: MapperOptions) {
    this.budget = new OutputBudget(options.outputCapBytes);
  }

  /** Tokens of this turn so far (the sum of each model response's usage). */
  get usage(): RunUsage {
    return this.sawUsage ? { ...this.usageTotal } : {};
  }

  map(n: ServerNotification): RunEventChunk[] {
    const raw = this.options.includeRaw ? { raw: n.params } : {};
    switch (n.method) {
      case 'item/agentMessage/delta':
        return [{ type: 'message.delta', item_id: n.params.itemId, delta: n.params.delta, ...raw }];
      case 'item/reasoning/summaryTextDelta':
      case 'item/reasoning/textDelta':
        return [{ type: 'reasoning.delta', item_id: n.params.itemId, delta: n.params.delta, ...raw }];
      case 'item/commandExecution/outputDelta': {
        const seen = this.streamed.get(n.params.itemId) ?? '';
        if (seen.length <= this.options.outputCapBytes) this.streamed.set(n.params.itemId, seen + n.params.delta);
        return this.output(n.params.itemId, n.params.delta, raw);
      }
      case 'item/started':
        return this.itemStarted(n.params.item, raw);
      case 'item/completed':
        return this.itemCompleted(n.params.item, raw);
      case 'turn/plan/updated':
        return [
          {
            type: 'plan.updated',
            plan: n.params.plan.map((s) => ({ step: s.step, status: PLAN_STATUS[s.status] })),
            explanation: n.params.explanation,
            ...raw,
          },
        ];
      case 'thread/tokenUsage/updated': {
        const last = n.params.tokenUsage.last;
        this.sawUsage = true;
        this.usageTotal.inputTokens += last.inputTokens;
        this.usageTotal.outputTokens += last.outputTokens;
        this.usageTotal.totalTokens += last.totalTokens;
        return [{ type: 'usage', ...this.usageTotal, ...raw }];
      }
      case 'error':
        return [
          {
            type: 'error',
            code: 'harness_error',
            message: n.params.error.message,
            ...(n.params.error.codexErrorInfo ? { detail: describeErrorInfo(n.params.error.codexErrorInfo) } : {}),
            will_retry: n.params.willRetry,
            ...raw,
          },
        ];
      default:
        return [];
    }
  }

  private itemStarted(item: ThreadItem, raw: object): RunEventChunk[] {
    if (item.type === 'commandExecution') {
      return [{ type: 'command.started', item_id: item.id, command: item.command, ...raw }];
    }
    return [];
  }

  private itemCompleted(item: ThreadItem, raw: object): RunEventChunk[] {
    switch (item.type) {
      case 'agentMessage':
        this.lastReply = { itemId: item.id, text: item.text };
        return [{ type: 'message.completed', item_id: item.id, text: item.text, ...raw }];
      case 'commandExecution': {
        const output = this.remainingOutput(item.id, item.aggregatedOutput ?? '');
        return [
          ...output,
          {
            type: 'command.completed',
            item_id: item.id,
            exit_code: item.exitCode,
            ...(item.durationMs !== null ? { duration_ms: item.durationMs } : {}),
            ...raw,
          },
        ];
      }
      case 'fileChange':
        if (item.status !== 'completed') return [];
        return item.changes.map((change) => ({
          type: 'file.changed' as const,
          item_id: item.id,
          path: this.relativePath(
            change.kind.type === 'update' && change.kind.move_path ? change.kind.move_path : change.path,
          ),
          kind: fileChangeKind(change.kind),
          ...raw,
        }));
      default:
        return [];
    }
  }

  /**
   * The output the deltas did not carry, from the command's whole output as Codex returned it to
   * the model. Short commands send no deltas at all; others may miss their last piece (the tail is
   * added) or their first one (the deltas are then not a start of the whole, and the whole output
   * follows once more marked `replace: true`: readers drop what they had for the command and keep
   * this). Either way the log ends up carrying all of it, up to the cap.
   */
  private remainingOutput(itemId: string, whole: string): RunEventChunk[] {
    const seen = this.streamed.get(itemId) ?? '';
    this.streamed.delete(itemId);
    if (whole === '' || whole === seen) return [];
    if (whole.startsWith(seen)) return this.output(itemId, whole.slice(seen.length), {});
    this.budget.reset(itemId);
    return this.output(itemId, whole, {}).map((chunk, i) => (i === 0 ? { ...chunk, replace: true } : chunk));
  }

  private output(itemId: string, text: string, raw: object): RunEventChunk[] {
    return outputChunks(this.budget, this.options.outputCapBytes, itemId, text, raw);
  }

  private relativePath(path: string): string {
    if (!isAbsolute(path)) return path;
    const rel = relative(this.options.cwd, path);
    return rel && !rel.startsWith('..') ? rel : path;
  }
}

function describeErrorInfo(info: unknown): string {
  return typeof info === 'string' ? info : JSON.stringify(info);
}
