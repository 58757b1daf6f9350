import type { RunEventChunk } from '@threadwork/contracts';
import { splitUtf8, type OutputBudget } from '../domain/text.js';

// A command's output as run events, whichever harness ran it: in pieces far below what one event
// may carry, up to the output cap per command, then one note that the rest was dropped.

/** Output is cut into pieces of at most this size. */
export const MAX_TEXT_PIECE_BYTES = 16 * 1024;

export function outputChunks(
  budget: OutputBudget,
  capBytes: number,
  itemId: string,
  text: string,
  raw: object = {},
): RunEventChunk[] {
  const { text: kept, capped } = budget.take(itemId, text);
  const chunks: RunEventChunk[] = splitUtf8(kept, MAX_TEXT_PIECE_BYTES).map((delta) => ({
    type: 'command.output',
    item_id: itemId,
    delta,
    ...raw,
  }));
  if (capped) {
    chunks.push({
      type: 'command.output',
      item_id: itemId,
      delta: `\n[output cut at ${capBytes} bytes]\n`,
      truncated: true,
    });
  }
  return chunks;
}
