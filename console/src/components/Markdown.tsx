import type { ReactNode } from 'react';

// A small Markdown renderer for what agents write: paragraphs, headings, lists, quotes, fenced
// code, inline code, emphasis and links. The agent is untrusted, so its text only ever becomes
// React text nodes and a fixed set of elements: no HTML from the text is interpreted (it shows as
// typed), and a link is a link only when its target is http(s); anything else stays plain text.

/** `text` as Markdown, safely. */
export function Markdown({ text }: { text: string }) {
  return <div className="markdown">{blocks(text)}</div>;
}

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

function blocks(text: string): ReactNode[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const out: ReactNode[] = [];
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
      out.push(
        <pre key={out.length}>
          <code>{body.join('\n')}</code>
        </pre>,
      );
      continue;
    }
    if (line.trim() === '') {
      i += 1;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      // One level below the page's own headings, whatever the agent wrote.
      const level = Math.min(heading[1]!.length + 2, 6);
      const Tag = `h${level}` as 'h3';
      out.push(<Tag key={out.length}>{inline(heading[2]!)}</Tag>);
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      out.push(<hr key={out.length} />);
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const body: string[] = [];
      while (i < lines.length && QUOTE.test(lines[i]!)) body.push(QUOTE.exec(lines[i++]!)![1]!);
      out.push(<blockquote key={out.length}>{blocks(body.join('\n'))}</blockquote>);
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
      const children = items.map((item, n) => <li key={n}>{inline(item)}</li>);
      out.push(
        bullet ? (
          <ul key={out.length}>{children}</ul>
        ) : (
          <ol key={out.length} start={Number(ordered![1])}>
            {children}
          </ol>
        ),
      );
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
    out.push(<p key={out.length}>{inline(paragraph.join('\n'))}</p>);
  }
  return out;
}

// Code first (nothing inside it is Markdown), then links, strong, emphasis.
const INLINE =
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(\s*<?([^()\s<>]+)>?\s*\)|\*\*(?=\S)([\s\S]+?)\*\*|__(?=\S)([\s\S]+?)__|\*(?=[^\s*])([^*]+?)\*|(?<![\w])_(?=[^\s_])([^_]+?)_(?![\w])|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

function inline(text: string, depth = 0): ReactNode[] {
  const out: ReactNode[] = [];
  let at = 0;
  for (const m of text.matchAll(new RegExp(INLINE.source, 'g'))) {
    const start = m.index;
    if (start > at) out.push(text.slice(at, start));
    at = start + m[0].length;
    const [, , code, label, href, strong1, strong2, em1, em2, bare] = m;
    const nested = (s: string) => (depth < 4 ? inline(s, depth + 1) : [s]);
    if (code !== undefined) out.push(<code key={out.length}>{code.trim() === '' ? code : code.trim()}</code>);
    else if (label !== undefined) {
      const safe = safeHref(href!);
      if (safe)
        out.push(
          <a key={out.length} href={safe} rel="noopener noreferrer nofollow" target="_blank">
            {nested(label)}
          </a>,
        );
      else out.push(m[0]);
    } else if (strong1 !== undefined || strong2 !== undefined)
      out.push(<strong key={out.length}>{nested((strong1 ?? strong2)!)}</strong>);
    else if (em1 !== undefined || em2 !== undefined) out.push(<em key={out.length}>{nested((em1 ?? em2)!)}</em>);
    else if (bare !== undefined) {
      const safe = safeHref(bare);
      out.push(
        safe ? (
          <a key={out.length} href={safe} rel="noopener noreferrer nofollow" target="_blank">
            {bare}
          </a>
        ) : (
          bare
        ),
      );
    }
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}
