import type { SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';

// The user side of a Claude Code session: the SDK reads its prompts from one async iterable for the
// life of the process (streaming input), so every turn's prompt and every steer is pushed here.

export class Inbox implements AsyncIterable<SDKUserMessage> {
  private readonly queued: SDKUserMessage[] = [];
  private waiting: ((next: IteratorResult<SDKUserMessage>) => void) | null = null;
  private closed = false;

  /** Hands `text` to the harness, stamped with `uuid` (the harness echoes it when it takes the message). */
  push(text: string, uuid: string): void {
    if (this.closed) return;
    const message: SDKUserMessage = {
      type: 'user',
      message: { role: 'user', content: text },
      parent_tool_use_id: null,
      uuid: uuid as SDKUserMessage['uuid'],
    };
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = null;
      waiting({ value: message, done: false });
    } else {
      this.queued.push(message);
    }
  }

  /** Ends the input: the harness exits once it has read everything before. */
  close(): void {
    this.closed = true;
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<SDKUserMessage> {
    return {
      next: () => {
        const message = this.queued.shift();
        if (message) return Promise.resolve({ value: message, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiting = resolve;
        });
      },
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
