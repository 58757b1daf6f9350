import { describe, expect, it } from 'vitest';
import { parseInline, parseMarkdown, safeHref } from '../../console/src/components/markdown-parse.js';

// What the console makes of an agent's Markdown. The agent is untrusted: its HTML stays text and
// only http(s) links become links; everything else a reply usually holds is read as meant.

describe('the console’s Markdown reader', () => {
  it('reads what replies usually hold', () => {
    const blocks = parseMarkdown(
      [
        '# Done',
        '',
        'I ran `ls -la` and **changed** _two_ files:',
        '',
        '- `a.txt`',
        '- b.txt',
        '',
        '3. third',
        '4. fourth',
        '',
        '> quoted',
        '',
        '```sh',
        'echo "<b>"',
        '```',
        '',
        '---',
        'See [the docs](https://example.com/docs?a=1) or https://example.org/x.',
      ].join('\n'),
    );
    expect(blocks.map((b) => b.t)).toEqual(['h', 'p', 'ul', 'ol', 'quote', 'pre', 'hr', 'p']);
    expect(blocks[1]).toEqual({
      t: 'p',
      c: [
        { t: 'text', v: 'I ran ' },
        { t: 'code', v: 'ls -la' },
        { t: 'text', v: ' and ' },
        { t: 'strong', c: [{ t: 'text', v: 'changed' }] },
        { t: 'text', v: ' ' },
        { t: 'em', c: [{ t: 'text', v: 'two' }] },
        { t: 'text', v: ' files:' },
      ],
    });
    expect(blocks[3]).toMatchObject({ t: 'ol', start: 3 });
    expect(blocks[5]).toEqual({ t: 'pre', v: 'echo "<b>"' });
    expect(blocks[7]).toEqual({
      t: 'p',
      c: [
        { t: 'text', v: 'See ' },
        { t: 'link', href: 'https://example.com/docs?a=1', c: [{ t: 'text', v: 'the docs' }] },
        { t: 'text', v: ' or ' },
        { t: 'link', href: 'https://example.org/x', c: [{ t: 'text', v: 'https://example.org/x' }] },
        { t: 'text', v: '.' },
      ],
    });
  });

  it('leaves HTML as text and makes no link of anything but http(s)', () => {
    const hostile = [
      '<img src=x onerror=alert(1)>',
      '[click](javascript:alert(1))',
      '[data](data:text/html;base64,PHNjcmlwdD4=)',
      '[relative](/v1/keys)',
      '[vb](  JavaScript:alert(1) )',
      '[plain](javascript:void%200) and [file](file:///etc/passwd)',
      '<script>alert(1)</script>',
    ].join('\n\n');
    const blocks = parseMarkdown(hostile);
    const links = JSON.stringify(blocks).match(/"t":"link"/g);
    expect(links).toBeNull();
    // Every block is a paragraph of text, the text exactly as the agent wrote it.
    expect(
      blocks.map((b) => (b.t === 'p' ? b.c.map((n) => (n.t === 'text' ? n.v : `<${n.t}>`)).join('') : b.t)),
    ).toEqual(hostile.split('\n\n'));
    expect(safeHref('https://example.com')).toBe('https://example.com/');
    expect(safeHref('javascript:alert(1)')).toBeNull();
    expect(safeHref('//example.com')).toBeNull();
  });

  it('reads nothing inside code', () => {
    expect(parseInline('`**not bold** [x](https://a.example)`')).toEqual([
      { t: 'code', v: '**not bold** [x](https://a.example)' },
    ]);
  });
});
