import { isAbsolute, relative } from 'node:path';
import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import type { FileChangeKind, PlanStepStatus, RunEventChunk, RunUsage } from '@threadwork/contracts';
import { OutputBudget } from '../../domain/text.js';
import { outputChunks } from '../output.js';

// Claude Code's SDK messages → the neutral chunks of DESIGN.md section 6. Pure apart from the
// per-turn state it keeps (the tools called and not yet answered, the last reply, the usage so far),
// so it is tested with recorded messages and no process.
//
// The SDK streams each model response twice: as raw stream events (text as it is written) and as
// one `assistant` message per content block once the block is complete. Tool calls are answered by
// `user` messages carrying `tool_result` blocks, with the tool's structured output beside them.

export interface ClaudeMapperOptions {
  /** The agent's working directory: file paths in events are relative to it. */
  cwd: string;
  /** Output forwarded per command; the rest is dropped with one note. */
  outputCapBytes: number;
  /** Keep the native message under `raw`. */
  includeRaw: boolean;
}

/** Tools whose calls change files: their path is in `file_path` (`notebook_path` for notebooks). */
const FILE_TOOLS = new Set(['Write', 'Edit', 'MultiEdit', 'NotebookEdit']);

interface ToolUse {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
}

interface Block {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
}

const TODO_STATUS: Record<string, PlanStepStatus> = {
  pending: 'pending',
  in_progress: 'in_progress',
  completed: 'completed',
};

/** The usage a `result` reports: this CLI turn's tokens, and the process's cost so far. */
export interface ResultUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

export class ClaudeTurnMapper {
  private readonly budget: OutputBudget;
  /** Tool calls seen and not yet answered, by tool use id. */
  private readonly calls = new Map<string, ToolUse>();
  /** Blocks of each model response seen so far: a block's item id is its response's id and index. */
  private readonly blocksSeen = new Map<string, number>();
  /** The response whose stream events are arriving. */
  private streaming: string | null = null;
  private readonly usageTotal = { inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: 0 };
  private sawUsage = false;
  lastReply: { itemId: string; text: string } | null = null;

  constructor(private readonly options: ClaudeMapperOptions) {
    this.budget = new OutputBudget(options.outputCapBytes);
  }

  /** Tokens (and cost, when the harness prices them) of this turn so far. */
  get usage(): RunUsage {
    return this.sawUsage ? { ...this.usageTotal } : {};
  }

  /** The tool call `id` as the model made it, while it waits for its result. */
  call(id: string): ToolUse | undefined {
    return this.calls.get(id);
  }

  map(message: SDKMessage): RunEventChunk[] {
    // A subagent's messages carry the tool call that started it; its own work stays inside it.
    if ('parent_tool_use_id' in message && message.parent_tool_use_id) return [];
    const raw = this.options.includeRaw ? { raw: message } : {};
    switch (message.type) {
      case 'stream_event':
        return this.streamEvent(message.event as unknown as Record<string, unknown>, raw);
      case 'assistant':
        // Claude Code tells a failed model call as an assistant message of its own making: the
        // turn's error says it, and it is not the agent's reply.
        if (message.error || message.message.model === '<synthetic>') return [];
        return this.assistant(message.message.id, message.message.content as unknown as Block[], raw);
      case 'user':
        if ('isReplay' in message && message.isReplay) return [];
        return this.toolResults(message.message.content, message.tool_use_result, raw);
      default:
        return [];
    }
  }

  /**
   * Adds a `result`'s usage to the turn's: its tokens are that CLI turn's, and `costUsd` what it
   * cost (the caller works it out from the process's running total). Answers the usage chunk.
   */
  addUsage(usage: ResultUsage, costUsd: number | null): RunEventChunk {
    const input =
      (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0);
    const output = usage.output_tokens ?? 0;
    this.sawUsage = true;
    this.usageTotal.inputTokens += input;
    this.usageTotal.outputTokens += output;
    this.usageTotal.totalTokens += input + output;
    if (costUsd !== null && costUsd > 0) this.usageTotal.costUsd += costUsd;
    return { type: 'usage', ...this.usageTotal };
  }

  private streamEvent(event: Record<string, unknown>, raw: object): RunEventChunk[] {
    if (event.type === 'message_start') {
      this.streaming = ((event.message as { id?: unknown } | undefined)?.id as string | undefined) ?? null;
      return [];
    }
    if (event.type !== 'content_block_delta' || !this.streaming) return [];
    const delta = event.delta as { type?: string; text?: string; thinking?: string } | undefined;
    const itemId = `${this.streaming}_${String(event.index)}`;
    if (delta?.type === 'text_delta' && delta.text)
      return [{ type: 'message.delta', item_id: itemId, delta: delta.text, ...raw }];
    if (delta?.type === 'thinking_delta' && delta.thinking)
      return [{ type: 'reasoning.delta', item_id: itemId, delta: delta.thinking, ...raw }];
    return [];
  }

  private assistant(responseId: string, content: Block[], raw: object): RunEventChunk[] {
    const chunks: RunEventChunk[] = [];
    for (const block of content) {
      // Complete blocks arrive one message each, in order: the n-th of a response is block n.
      const index = this.blocksSeen.get(responseId) ?? 0;
      this.blocksSeen.set(responseId, index + 1);
      const itemId = `${responseId}_${index}`;
      if (block.type === 'text' && typeof block.text === 'string') {
        this.lastReply = { itemId, text: block.text };
        chunks.push({ type: 'message.completed', item_id: itemId, text: block.text, ...raw });
      } else if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
        const call: ToolUse = { type: 'tool_use', id: block.id, name: block.name, input: asRecord(block.input) };
        this.calls.set(call.id, call);
        chunks.push(...this.toolCalled(call, raw));
      }
    }
    return chunks;
  }

  private toolCalled(call: ToolUse, raw: object): RunEventChunk[] {
    if (call.name === 'Bash' && typeof call.input.command === 'string') {
      return [{ type: 'command.started', item_id: call.id, command: call.input.command, ...raw }];
    }
    if (call.name === 'TodoWrite' && Array.isArray(call.input.todos)) {
      const plan = (call.input.todos as Record<string, unknown>[]).map((todo) => ({
        step: String(todo.content ?? ''),
        status: TODO_STATUS[String(todo.status)] ?? 'pending',
      }));
      return [{ type: 'plan.updated', plan, ...raw }];
    }
    return [];
  }

  private toolResults(content: unknown, structured: unknown, raw: object): RunEventChunk[] {
    if (!Array.isArray(content)) return [];
    const chunks: RunEventChunk[] = [];
    for (const block of content as Block[]) {
      if (block.type !== 'tool_result' || typeof block.tool_use_id !== 'string') continue;
      const call = this.calls.get(block.tool_use_id);
      if (!call) continue;
      this.calls.delete(call.id);
      if (call.name === 'Bash') chunks.push(...this.commandDone(call, block, structured, raw));
      else if (FILE_TOOLS.has(call.name) && !block.is_error) chunks.push(...this.fileChanged(call, structured, raw));
    }
    return chunks;
  }

  /**
   * A command's output arrives whole with its result (Claude Code does not stream it): what the
   * command wrote to stdout and stderr, as the model saw it. A failed command's result starts with
   * `Exit code N`, which becomes the exit code; a command that was stopped has none.
   */
  private commandDone(call: ToolUse, block: Block, structured: unknown, raw: object): RunEventChunk[] {
    let output = textOf(block.content);
    let exitCode: number | null = 0;
    const result = asRecord(structured);
    if (block.is_error) {
      const failed = /^(?:Error: )?Exit code (\d+)\n?/.exec(output);
      exitCode = failed ? Number(failed[1]) : null;
      if (failed) output = output.slice(failed[0].length);
    } else if (typeof result.stdout === 'string') {
      const stderr = typeof result.stderr === 'string' && result.stderr ? `\n${result.stderr}` : '';
      output = result.stdout + stderr;
      if (result.interrupted === true) exitCode = null;
    }
    return [
      ...this.output(call.id, output),
      { type: 'command.completed', item_id: call.id, exit_code: exitCode, ...raw },
    ];
  }

  /** A file the agent wrote or edited: a new one is `added` (Write reports `create`). */
  private fileChanged(call: ToolUse, structured: unknown, raw: object): RunEventChunk[] {
    const path = call.input.file_path ?? call.input.notebook_path;
    if (typeof path !== 'string') return [];
    const kind: FileChangeKind = asRecord(structured).type === 'create' ? 'added' : 'modified';
    return [{ type: 'file.changed', item_id: call.id, path: this.relativePath(path), kind, ...raw }];
  }

  private output(itemId: string, text: string): RunEventChunk[] {
    return text ? outputChunks(this.budget, this.options.outputCapBytes, itemId, text) : [];
  }

  private relativePath(path: string): string {
    if (!isAbsolute(path)) return path;
    const rel = relative(this.options.cwd, path);
    return rel && !rel.startsWith('..') ? rel : path;
  }
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** A tool result's text: a string, or the text blocks of a list. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Block[]).map((block) => (typeof block.text === 'string' ? block.text : '')).join('');
}
