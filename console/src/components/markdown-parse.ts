// A small Markdown reader for what agents write: paragraphs, headings, lists, quotes, fenced
// code, inline code, emphasis and links, read into a tree of a fixed set of node kinds. The agent
// is untrusted: there is no node for HTML (it stays text, shown as typed), and a link is a link
// only when its target is an absolute http(s) URL; anything else stays text. Pure, so it is
// tested on its own (test/console/markdown.test.ts); Markdown.tsx renders the tree as React
// elements, never as an HTML string.

export type Inline =
  | { t: 'text'; v: string }
  | { t: 'code'; v: string }
  | { t: 'strong'; c: Inline[] }
  | { t: 'em'; c: Inline[] }
  | { t: 'link'; href: string; c: Inline[] };

export type Block =
  | { t: 'p'; c: Inline[] }
  | { t: 'h'; level: number; c: Inline[] }
  | { t: 'pre'; v: string }
  | { t: 'ul'; items: Inline[][] }
  | { t: 'ol'; start: number; items: Inline[][] }
  | { t: 'quote'; c: Block[] }
  | { t: 'hr' };

/** The target of a link when it is safe to follow: an absolute http(s) URL. */
export function safeHref(href: string): string | null {
  try {
    const url = new URL(href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

// Every pattern here is anchored or bounded, so none backtracks more than a bounded amount at a
// position: an agent's text can be long and crafted (a line of 100,000 `[`), and the console reads
// it again on every streamed delta. Parts that would need unbounded backtracking (a heading's
// closing `#`s, a rule's marks) are read by code instead.
const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*)$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const ORDERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
/** Quotes nest this deep; a `>` deeper than that stays text. */
export const MAX_QUOTE_DEPTH = 8;

/** A heading's text without the optional closing run of `#`s (which must follow a space). */
function headingText(raw: string): string {
  const text = raw.trim();
  let end = text.length;
  while (end > 0 && text[end - 1] === '#') end -= 1;
  if (end === 0) return '';
  return end < text.length && /\s/.test(text[end - 1]!) ? text.slice(0, end).trimEnd() : text;
}

/** A thematic break: up to three spaces, then three or more of one of `-`, `*`, `_`, spaces between. */
function isRule(line: string): boolean {
  const text = line.trimEnd();
  const indent = text.length - text.trimStart().length;
  if (indent > 3) return false;
  const mark = text[indent];
  if (mark !== '-' && mark !== '*' && mark !== '_') return false;
  let marks = 0;
  for (let k = indent; k < text.length; k += 1) {
    const c = text[k]!;
    if (c === mark) marks += 1;
    else if (c !== ' ' && c !== '\t') return false;
  }
  return marks >= 3;
}

/** `text` read as Markdown blocks. */
export function parseMarkdown(text: string): Block[] {
  return parseBlocks(text.replace(/\r\n?/g, '\n').split('\n'), 0);
}

/** `lines` read as blocks inside `depth` quotes. */
function parseBlocks(lines: string[], depth: number): Block[] {
  // Quotes nest by recursion, so their depth is capped: past it, a `>` line is a paragraph's text.
  const isQuote = (line: string) => depth < MAX_QUOTE_DEPTH && QUOTE.test(line);
  const out: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const body: string[] = [];
      i += 1;
      while (i < lines.length && !lines[i]!.trimStart().startsWith(marker)) body.push(lines[i++]!);
      i += 1;
      out.push({ t: 'pre', v: body.join('\n') });
      continue;
    }
    if (line.trim() === '') {
      i += 1;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      out.push({ t: 'h', level: heading[1]!.length, c: parseInline(headingText(heading[2]!)) });
      i += 1;
      continue;
    }
    if (isRule(line)) {
      out.push({ t: 'hr' });
      i += 1;
      continue;
    }
    if (isQuote(line)) {
      const body: string[] = [];
      while (i < lines.length && isQuote(lines[i]!)) body.push(QUOTE.exec(lines[i++]!)![1]!);
      out.push({ t: 'quote', c: parseBlocks(body, depth + 1) });
      continue;
    }
    const bullet = BULLET.test(line);
    const ordered = ORDERED.exec(line);
    if (bullet || ordered) {
      const pattern = bullet ? BULLET : ORDERED;
      const items: string[] = [];
      while (i < lines.length) {
        const current = lines[i]!;
        const match = pattern.exec(current);
        if (match) items.push(match[match.length - 1]!);
        // An indented line continues the item before it.
        else if (/^\s{2,}\S/.test(current) && items.length > 0) items[items.length - 1] += ` ${current.trim()}`;
        else break;
        i += 1;
      }
      const parsed = items.map((item) => parseInline(item));
      out.push(bullet ? { t: 'ul', items: parsed } : { t: 'ol', start: Number(ordered![1]), items: parsed });
      continue;
    }
    const paragraph: string[] = [];
    while (i < lines.length) {
      const current = lines[i]!;
      if (current.trim() === '' || FENCE.test(current) || HEADING.test(current) || isQuote(current)) break;
      if (paragraph.length > 0 && (BULLET.test(current) || ORDERED.test(current) || isRule(current))) break;
      paragraph.push(current.trim());
      i += 1;
    }
    out.push({ t: 'p', c: parseInline(paragraph.join('\n')) });
  }
  return out;
}

// Code first (nothing inside it is Markdown), then links, strong, emphasis and bare URLs. Each
// alternative opens with a fixed mark and its parts are bounded (a code span's run of backticks,
// a link's label and target, what emphasis holds, a bare URL), so a failed attempt costs a bounded
// amount and the whole reading stays linear in the text's length. Longer spans stay text.
const INLINE = new RegExp(
  [
    // A code span: a whole run of up to 16 backticks, then the same run closing it.
    '(?<!`)(`{1,16})([^`]|[^`][\\s\\S]{0,2000}?[^`])\\1(?!`)',
    // A link: a label without brackets, an absolute target without spaces or parentheses.
    '\\[([^\\[\\]\\n]{1,500})\\]\\(\\s{0,16}<?([^()\\s<>]{1,2000})>?\\s{0,16}\\)',
    '\\*\\*(?=\\S)([\\s\\S]{1,2000}?)\\*\\*',
    '__(?=\\S)([\\s\\S]{1,2000}?)__',
    '\\*(?=[^\\s*])([^*]{1,2000}?)\\*',
    '(?<![\\w])_(?=[^\\s_])([^_]{1,2000}?)_(?![\\w])',
    '(https?:\\/\\/[^\\s<>()]{0,2000}[^\\s<>().,;:!?\'"])',
  ].join('|'),
  'g',
);

/** One block's text read as inline Markdown. */
export function parseInline(text: string, depth = 0, inLink = false): Inline[] {
  const out: Inline[] = [];
  let at = 0;
  const push = (v: string) => {
    const last = out[out.length - 1];
    if (last?.t === 'text') last.v += v;
    else out.push({ t: 'text', v });
  };
  for (const m of text.matchAll(new RegExp(INLINE))) {
    const start = m.index;
    if (start > at) push(text.slice(at, start));
    at = start + m[0].length;
    const [, , code, label, href, strong1, strong2, em1, em2, bare] = m;
    // A link holds no link (an <a> inside an <a> is not HTML): inside one, links stay text.
    const nested = (s: string, link = inLink): Inline[] =>
      depth < 4 ? parseInline(s, depth + 1, link) : [{ t: 'text', v: s }];
    if (code !== undefined) out.push({ t: 'code', v: code.trim() === '' ? code : code.trim() });
    else if (label !== undefined) {
      const safe = inLink ? null : safeHref(href!);
      if (safe) out.push({ t: 'link', href: safe, c: nested(label, true) });
      else push(m[0]);
    } else if (strong1 !== undefined || strong2 !== undefined)
      out.push({ t: 'strong', c: nested((strong1 ?? strong2)!) });
    else if (em1 !== undefined || em2 !== undefined) out.push({ t: 'em', c: nested((em1 ?? em2)!) });
    else if (bare !== undefined) {
      const safe = inLink ? null : safeHref(bare);
      if (safe) out.push({ t: 'link', href: safe, c: [{ t: 'text', v: bare }] });
      else push(bare);
    }
  }
  if (at < text.length) push(text.slice(at));
  return out;
}
