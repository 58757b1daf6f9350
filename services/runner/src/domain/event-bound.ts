import { RunEventChunk } from '@threadwork/contracts';
import { cutUtf8 } from './text.js';

// What one run event may be in the log, whatever the agent put in it. Much of an event is the
// agent's to write (a reply, a command line, a plan, and in `raw` the harness's notification with
// the tool arguments it made up), and it is stored, sent to every reader and parsed again by each:
// so the whole event is bounded — bytes once serialized, nesting, items per list, keys per object,
// bytes per string — not only its top-level texts. A deep or wide value is cut as it is copied,
// never serialized whole first (a few hundred thousand levels of nesting would overflow the stack).

/** An event is at most this many bytes of JSON: a fraction of a NATS message, a batch holds several. */
export const EVENT_MAX_BYTES = 64 * 1024;

interface Cut {
  /** Objects and arrays nested deeper than this are emptied (the event itself is depth 0). */
  depth: number;
  items: number;
  keys: number;
  /** Bytes of UTF-8 kept of any one string (and longest key kept). */
  string: number;
  /** Whether top-level fields the contract does not name are kept. */
  extras: boolean;
}

/**
 * Tried in order until the event is within bounds and valid against its contract. Each bounds the
 * bytes by itself; the second, leaner one is for an event whose extra fields crowded out one its
 * contract requires.
 */
const CUTS: readonly Cut[] = [
  { depth: 8, items: 256, keys: 64, string: 16 * 1024, extras: true },
  { depth: 4, items: 64, keys: 16, string: 4 * 1024, extras: false },
];

/** Room left for the braces and the `truncated` flag around the fields. */
const FRAME_BYTES = 64;

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? 'null', 'utf8');

/** The fields the contract names for each type of event, in the order they are kept. */
const CONTRACT_KEYS: ReadonlyMap<string, readonly string[]> = new Map(
  RunEventChunk.options.map((schema) => {
    const keys = Object.keys(schema.shape);
    return [String(schema.shape.type.value), keys] as const;
  }),
);

class Copier {
  changed = false;
  /** Something was cut for want of bytes left (not for a bound): what follows finds none either. */
  private starved = false;

  constructor(
    private readonly cut: Cut,
    /** Bytes of JSON still free. */
    private left: number,
  ) {}

  /** `value` cut to the bounds and to the bytes left, or undefined when not even a stub of it fits. */
  copy(value: unknown, depth: number): unknown {
    if (value === null || typeof value === 'boolean' || typeof value === 'number') {
      const bytes = jsonBytes(value);
      if (bytes > this.left) return this.starve();
      this.left -= bytes;
      return value;
    }
    if (typeof value === 'string') return this.copyString(value);
    if (Array.isArray(value)) return this.copyArray(value, depth);
    if (typeof value === 'object') return this.copyObject(value as Record<string, unknown>, depth, null);
    // Functions, symbols, bigints: not JSON, not kept.
    return this.drop();
  }

  copyObject(value: Record<string, unknown>, depth: number, order: readonly string[] | null): unknown {
    if (this.left < 2) return this.starve();
    this.left -= 2;
    const out: Record<string, unknown> = {};
    if (depth > this.cut.depth) {
      if (Object.keys(value).length > 0) this.changed = true;
      return out;
    }
    let kept = 0;
    for (const key of order ?? Object.keys(value)) {
      const child = value[key];
      if (child === undefined || !Object.hasOwn(value, key)) continue;
      const keyBytes = jsonBytes(key) + 2;
      if (kept >= this.cut.keys || Buffer.byteLength(key, 'utf8') > this.cut.string) {
        this.changed = true;
        continue;
      }
      if (keyBytes >= this.left) {
        this.starve();
        continue;
      }
      this.left -= keyBytes;
      const copied = this.copy(child, depth + 1);
      if (copied === undefined) {
        this.left += keyBytes;
        continue;
      }
      // Defined, not assigned: a key `__proto__` (JSON allows it) is kept as data, not made a prototype.
      Object.defineProperty(out, key, { value: copied, enumerable: true, writable: true, configurable: true });
      kept++;
    }
    return out;
  }

  private copyArray(value: unknown[], depth: number): unknown {
    if (this.left < 2) return this.starve();
    this.left -= 2;
    if (depth > this.cut.depth) {
      if (value.length > 0) this.changed = true;
      return [];
    }
    const out: unknown[] = [];
    for (const item of value.slice(0, this.cut.items)) {
      // An item is kept whole or not at all: one cut short for want of bytes (a plan step without
      // its status) would leave the event invalid. The list ends there.
      const before = this.left;
      const starved = this.starved;
      this.starved = false;
      this.left -= 1;
      // JSON writes a hole or an undefined item as null.
      const copied = this.copy(item === undefined ? null : item, depth + 1);
      if (copied === undefined || this.starved) {
        this.left = before;
        this.starved = true;
        this.changed = true;
        break;
      }
      this.starved = starved;
      out.push(copied);
    }
    if (out.length < value.length) this.changed = true;
    return out;
  }

  private copyString(value: string): string | undefined {
    let text = cutUtf8(value, this.cut.string);
    // Escapes can make the JSON of a string six times its bytes: halve until it fits.
    if (jsonBytes(text) > this.left) {
      this.starved = true;
      while (jsonBytes(text) > this.left && text !== '') text = cutUtf8(text, Math.floor(Buffer.byteLength(text) / 2));
      if (jsonBytes(text) > this.left) return this.starve();
    }
    if (text !== value) this.changed = true;
    this.left -= jsonBytes(text);
    return text;
  }

  private drop(): undefined {
    this.changed = true;
    return undefined;
  }

  private starve(): undefined {
    this.starved = true;
    return this.drop();
  }
}

/**
 * The event as the log keeps it, within EVENT_MAX_BYTES and the bounds above, valid against its
 * contract; `truncated: true` when anything was cut. An event with nothing to cut is returned as
 * it is. One that no cut makes valid (its required fields alone too large) becomes an `error`
 * event saying so, which is.
 */
export function boundEvent(chunk: Record<string, unknown>): { chunk: Record<string, unknown>; size: number } {
  const type = typeof chunk.type === 'string' ? chunk.type : '';
  const contract = CONTRACT_KEYS.get(type) ?? ['type'];
  for (const cut of CUTS) {
    // The contract's fields first, so nothing of the agent's crowds them out; `raw` (the harness's
    // own copy of what the rest says) last.
    const named = contract.filter((k) => k !== 'raw');
    const extras = cut.extras ? Object.keys(chunk).filter((k) => !contract.includes(k)) : [];
    const order = [...named, ...extras, ...(contract.includes('raw') ? ['raw'] : [])];
    const copier = new Copier(cut, EVENT_MAX_BYTES - FRAME_BYTES);
    const copied = copier.copyObject(chunk, 0, order) as Record<string, unknown>;
    const dropped = Object.keys(chunk).some((k) => chunk[k] !== undefined && !(k in copied));
    if (!copier.changed && !dropped) return { chunk, size: jsonBytes(chunk) };
    const out = { ...copied, truncated: true };
    const size = jsonBytes(out);
    if (size <= EVENT_MAX_BYTES && RunEventChunk.safeParse(out).success) return { chunk: out, size };
  }
  const out = {
    type: 'error',
    code: 'event_too_large',
    message: `an event of type ${cutUtf8(type, 64) || '(none)'} was too large to keep`,
    truncated: true,
  };
  return { chunk: out, size: jsonBytes(out) };
}
