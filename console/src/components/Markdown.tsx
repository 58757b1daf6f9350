import { useMemo, type ReactNode } from 'react';
import './Markdown.css';
import { parseMarkdown, safeHref, type Block, type Inline } from './markdown-parse.js';

/**
 * `text` (an agent's, so untrusted) as Markdown: the tree markdown-parse.ts reads, rendered as
 * React elements of a fixed set. Nothing of the text is ever interpreted as HTML.
 */
export function Markdown({ text }: { text: string }) {
  // Read again only when the text changes, not on every render of the page around it (a streamed
  // delta re-renders the whole log).
  const blocks = useMemo(() => parseMarkdown(text), [text]);
  return <div className="markdown">{blocks.map(block)}</div>;
}

function block(b: Block, key: number): ReactNode {
  switch (b.t) {
    case 'p':
      return <p key={key}>{b.c.map(inline)}</p>;
    case 'h': {
      // One level below the page's own headings, whatever the agent wrote.
      const Tag = `h${Math.min(b.level + 2, 6)}` as 'h3';
      return <Tag key={key}>{b.c.map(inline)}</Tag>;
    }
    case 'pre':
      return (
        <pre key={key}>
          <code>{b.v}</code>
        </pre>
      );
    case 'ul':
      return (
        <ul key={key}>
          {b.items.map((item, n) => (
            <li key={n}>{item.map(inline)}</li>
          ))}
        </ul>
      );
    case 'ol':
      return (
        <ol key={key} start={b.start}>
          {b.items.map((item, n) => (
            <li key={n}>{item.map(inline)}</li>
          ))}
        </ol>
      );
    case 'quote':
      return <blockquote key={key}>{b.c.map(block)}</blockquote>;
    case 'hr':
      return <hr key={key} />;
  }
}

function inline(node: Inline, key: number): ReactNode {
  switch (node.t) {
    case 'text':
      return node.v;
    case 'code':
      return <code key={key}>{node.v}</code>;
    case 'strong':
      return <strong key={key}>{node.c.map(inline)}</strong>;
    case 'em':
      return <em key={key}>{node.c.map(inline)}</em>;
    case 'link': {
      // Only http(s) targets reach here (safeHref); they open apart from the console and learn nothing of it.
      const link = (
        <a key={key} href={node.href} rel="noopener noreferrer nofollow" target="_blank">
          {node.c.map(inline)}
        </a>
      );
      // A label that is not the target itself (it may name another site) is followed by where the
      // link really goes.
      if (safeHref(textOf(node.c).trim()) === node.href) return link;
      return (
        <span key={key}>
          {link} <span className="link-host">({new URL(node.href).host})</span>
        </span>
      );
    }
  }
}

/** The text `nodes` show, marks left out. */
function textOf(nodes: Inline[]): string {
  return nodes.map((n) => (n.t === 'text' || n.t === 'code' ? n.v : textOf(n.c))).join('');
}
