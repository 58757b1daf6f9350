import { Worker } from 'node:worker_threads';
import { describe, expect, it, onTestFinished } from 'vitest';
import { MAX_QUOTE_DEPTH, parseInline, parseMarkdown, safeHref } from '../../console/src/components/markdown-parse.js';

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

  it('makes no link inside a link', () => {
    expect(parseInline('[https://a.example/x **see https://b.example**](https://c.example/)')).toEqual([
      {
        t: 'link',
        href: 'https://c.example/',
        c: [
          { t: 'text', v: 'https://a.example/x ' },
          { t: 'strong', c: [{ t: 'text', v: 'see https://b.example' }] },
        ],
      },
    ]);
  });

  it('reads nothing inside code', () => {
    expect(parseInline('`**not bold** [x](https://a.example)`')).toEqual([
      { t: 'code', v: '**not bold** [x](https://a.example)' },
    ]);
  });

  // An agent's text is untrusted and may be crafted to make the reader work hard. These inputs run
  // to 600,000 characters: the reader is linear, so each is read in well under a second, while a
  // reader that backtracks quadratically on them (the link pattern once took 18 s on 100,000 `[`,
  // so some 11 minutes on 600,000; the heading pattern more than 20 s on 5,000 spaces) runs far
  // past this suite's test timeout (vitest.config.ts). Each is read in a worker thread because
  // vitest cannot interrupt synchronous code: the test awaits the worker, so a slow reader fails by
  // that timeout (and the worker is stopped) instead of hanging the run. No wall-clock limit is
  // asserted; the timeout is the bound.
  const N = 600_000;
  const hostile: Record<string, string> = {
    'a line of `>`': '>'.repeat(20_000),
    'many lines of `>`': Array.from({ length: 2_000 }, () => '>'.repeat(100)).join('\n'),
    '`[`': '['.repeat(100_000),
    '`[` twice as long': '['.repeat(N),
    'unclosed link targets': '[a]('.repeat(N / 4),
    '`*`': 'a ' + '*'.repeat(N),
    '`*a`': '*a'.repeat(N / 2),
    'unclosed `**`': ('**' + 'a*'.repeat(1_000)).repeat(N / 2_002),
    '`_`': 'a ' + '_'.repeat(N),
    backticks: 'a ' + '`'.repeat(N),
    'single backticks': '`a'.repeat(N / 2),
    'backtick runs of every length': Array.from({ length: N / 10 }, (_, k) => '`'.repeat((k % 20) + 1) + 'a').join(''),
    'URLs of punctuation': 'http://' + '.'.repeat(N),
    'a heading of spaces': '# a' + ' '.repeat(N) + 'b',
    'a heading of `#`s': '# x' + ' '.repeat(N / 2) + '#'.repeat(N / 2) + 'x',
    'a rule that is not one': '- '.repeat(N / 2) + 'x',
    'every mark at once': '[*_`>#('.repeat(N / 7),
  };
  for (const [name, text] of Object.entries(hostile)) {
    it(`reads ${name} without failing`, async () => {
      const { blocks, shown } = await readInWorker(text);
      expect(blocks).toBeGreaterThan(0);
      // Read as something to show, not as nothing.
      expect(shown).toBeGreaterThan(0);
    });
  }

  it('nests quotes only so deep; deeper `>` stay text', () => {
    const blocks = parseMarkdown('>'.repeat(20_000) + ' deep');
    let depth = 0;
    let inner = blocks;
    while (inner.length === 1 && inner[0]!.t === 'quote') {
      inner = inner[0]!.c;
      depth += 1;
    }
    expect(depth).toBe(MAX_QUOTE_DEPTH);
    expect(inner).toEqual([{ t: 'p', c: [{ t: 'text', v: '>'.repeat(20_000 - MAX_QUOTE_DEPTH) + ' deep' }] }]);
    expect(parseMarkdown('> > two\n> one')).toEqual([
      {
        t: 'quote',
        c: [
          { t: 'quote', c: [{ t: 'p', c: [{ t: 'text', v: 'two' }] }] },
          { t: 'p', c: [{ t: 'text', v: 'one' }] },
        ],
      },
    ]);
  });

  it('reads 100,000 `[` as the text they are', () => {
    expect(parseMarkdown('['.repeat(100_000))).toEqual([{ t: 'p', c: [{ t: 'text', v: '['.repeat(100_000) }] }]);
  });

  it('reads headings (a closing run of `#` only after a space) and rules', () => {
    expect(parseMarkdown('## Title ##')).toEqual([{ t: 'h', level: 2, c: [{ t: 'text', v: 'Title' }] }]);
    expect(parseMarkdown('# C#')).toEqual([{ t: 'h', level: 1, c: [{ t: 'text', v: 'C#' }] }]);
    expect(parseMarkdown('#   ')).toEqual([{ t: 'h', level: 1, c: [] }]);
    expect(parseMarkdown('* * *\n\n___\n\n- - x').map((b) => b.t)).toEqual(['hr', 'hr', 'ul']);
  });
});

/** `text` read by parseMarkdown in a worker thread (stopped when the test ends): how many blocks, how much text. */
function readInWorker(text: string): Promise<{ blocks: number; shown: number }> {
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     import(workerData.module).then(({ parseMarkdown }) => {
       const blocks = parseMarkdown(workerData.text);
       parentPort.postMessage({ blocks: blocks.length, shown: JSON.stringify(blocks).length });
     });`,
    { eval: true, workerData: { text, module: PARSER.href } },
  );
  onTestFinished(async () => {
    await worker.terminate();
  });
  return new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

const PARSER = new URL('../../console/src/components/markdown-parse.ts', import.meta.url);
