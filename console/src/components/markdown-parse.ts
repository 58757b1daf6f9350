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

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const ORDERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

/** `text` read as Markdown blocks. */
export function parseMarkdown(text: string): Block[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
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
      out.push({ t: 'h', level: heading[1]!.length, c: parseInline(heading[2]!) });
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      out.push({ t: 'hr' });
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const body: string[] = [];
      while (i < lines.length && QUOTE.test(lines[i]!)) body.push(QUOTE.exec(lines[i++]!)![1]!);
      out.push({ t: 'quote', c: parseMarkdown(body.join('\n')) });
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
      if (current.trim() === '' || FENCE.test(current) || HEADING.test(current) || QUOTE.test(current)) break;
      if (paragraph.length > 0 && (BULLET.test(current) || ORDERED.test(current) || RULE.test(current))) break;
      paragraph.push(current.trim());
      i += 1;
    }
    out.push({ t: 'p', c: parseInline(paragraph.join('\n')) });
  }
  return out;
}

// Code first (nothing inside it is Markdown), then links, strong, emphasis and bare URLs.
const INLINE =
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(\s*<?([^()\s<>]+)>?\s*\)|\*\*(?=\S)([\s\S]+?)\*\*|__(?=\S)([\s\S]+?)__|\*(?=[^\s*])([^*]+?)\*|(?<![\w])_(?=[^\s_])([^_]+?)_(?![\w])|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

/** One block's text read as inline Markdown. */
export function parseInline(text: string, depth = 0): Inline[] {
  const out: Inline[] = [];
  let at = 0;
  const push = (v: string) => {
    const last = out[out.length - 1];
    if (last?.t === 'text') last.v += v;
    else out.push({ t: 'text', v });
  };
  for (const m of text.matchAll(new RegExp(INLINE.source, 'g'))) {
    const start = m.index;
    if (start > at) push(text.slice(at, start));
    at = start + m[0].length;
    const [, , code, label, href, strong1, strong2, em1, em2, bare] = m;
    const nested = (s: string): Inline[] => (depth < 4 ? parseInline(s, depth + 1) : [{ t: 'text', v: s }]);
    if (code !== undefined) out.push({ t: 'code', v: code.trim() === '' ? code : code.trim() });
    else if (label !== undefined) {
      const safe = safeHref(href!);
      if (safe) out.push({ t: 'link', href: safe, c: nested(label) });
      else push(m[0]);
    } else if (strong1 !== undefined || strong2 !== undefined)
      out.push({ t: 'strong', c: nested((strong1 ?? strong2)!) });
    else if (em1 !== undefined || em2 !== undefined) out.push({ t: 'em', c: nested((em1 ?? em2)!) });
    else if (bare !== undefined) {
      const safe = safeHref(bare);
      if (safe) out.push({ t: 'link', href: safe, c: [{ t: 'text', v: bare }] });
      else push(bare);
    }
  }
  if (at < text.length) push(text.slice(at));
  return out;
}
