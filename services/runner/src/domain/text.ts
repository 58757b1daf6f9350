// Byte-bounded text: event payloads and diffs are bounded in bytes (what NATS and the log store
// count), while strings are indexed in UTF-16 units. These helpers never split a character.

/** The longest prefix of `text` that is at most `maxBytes` bytes of UTF-8. */
export function cutUtf8(text: string, maxBytes: number): string {
  if (maxBytes <= 0) return '';
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const bytes = Buffer.from(text, 'utf8');
  let end = maxBytes;
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character boundary.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

/** `text` in pieces of at most `pieceBytes` bytes each, in order; empty text gives no pieces. */
export function splitUtf8(text: string, pieceBytes: number): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > 0) {
    let piece = cutUtf8(rest, pieceBytes);
    // A single character wider than the piece size still has to go somewhere.
    if (piece.length === 0) piece = String.fromCodePoint(rest.codePointAt(0) ?? 0);
    pieces.push(piece);
    rest = rest.slice(piece.length);
  }
  return pieces;
}

/**
 * The longest prefix of `text` of at most `maxBytes` bytes that ends at a line boundary (a diff cut
 * mid-line would show a line that is not in the file). A first line longer than the bound is cut
 * at the bound instead, so something is always shown.
 */
export function cutAtLine(text: string, maxBytes: number): { text: string; truncated: boolean } {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return { text, truncated: false };
  const prefix = cutUtf8(text, maxBytes);
  const lastNewline = prefix.lastIndexOf('\n');
  return { text: lastNewline >= 0 ? prefix.slice(0, lastNewline + 1) : prefix, truncated: true };
}

/**
 * Caps how much output of each command is forwarded: `take` returns what may still go out for an
 * item, and says once when the cap was reached so the reader learns that output was cut.
 */
export class OutputBudget {
  private readonly used = new Map<string, number>();
  private readonly noted = new Set<string>();

  constructor(private readonly capBytes: number) {}

  take(itemId: string, text: string): { text: string; capped: boolean } {
    const used = this.used.get(itemId) ?? 0;
    const kept = cutUtf8(text, Math.max(0, this.capBytes - used));
    this.used.set(itemId, used + Buffer.byteLength(kept, 'utf8'));
    const capped = kept.length < text.length && !this.noted.has(itemId);
    if (capped) this.noted.add(itemId);
    return { text: kept, capped };
  }

  /** Starts an item's count again, for output that replaces what was sent of it so far. */
  reset(itemId: string): void {
    this.used.delete(itemId);
    this.noted.delete(itemId);
  }
}
