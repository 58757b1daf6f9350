// A unified diff (git's `diff --git` output, or plain `---`/`+++` files) read into files, hunks
// and numbered lines. Our own ~150 lines rather than a library: the console only needs to show
// git's own output, and the small registry parsers either pull in more than the whole page weighs
// or drop what this page must show (a cut-off last hunk, binary files, renames). Pure: no DOM, and
// the text it returns is only ever rendered as text.

export type DiffLineKind = 'context' | 'add' | 'del' | 'note';

export interface DiffLine {
  kind: DiffLineKind;
  /** The line without its leading ' ', '+', '-' or '\'. */
  text: string;
  /** Line number in the old file (context and deletions), else null. */
  oldNumber: number | null;
  /** Line number in the new file (context and additions), else null. */
  newNumber: number | null;
}

export interface DiffHunk {
  /** The whole `@@ … @@ section` line. */
  header: string;
  oldStart: number;
  newStart: number;
  lines: DiffLine[];
}

export type DiffFileStatus = 'added' | 'deleted' | 'modified' | 'renamed' | 'copied';

export interface DiffFileSection {
  /** The path to show: the new path, or the old one for a deletion. */
  path: string;
  oldPath: string | null;
  newPath: string | null;
  status: DiffFileStatus;
  binary: boolean;
  /** git's extended header lines (`index …`, `new file mode …`), as they came. */
  headers: string[];
  hunks: DiffHunk[];
  additions: number;
  deletions: number;
}

export interface ParsedDiff {
  files: DiffFileSection[];
  /** Lines before the first file (none in git's output; anything else is shown as it is). */
  preamble: string[];
}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

export function parseUnifiedDiff(text: string): ParsedDiff {
  const files: DiffFileSection[] = [];
  const preamble: string[] = [];
  let file: DiffFileSection | null = null;
  // Whether `file` began with a `diff --git` line (its `---`/`+++` lines are then its own).
  let gitFile = false;
  let hunk: DiffHunk | null = null;
  let oldLine = 0;
  let newLine = 0;
  // Lines the open hunk's header still promises: until both are spent, every line is the hunk's,
  // even one that reads like `--- x` (a deleted `-- x`).
  let oldLeft = 0;
  let newLeft = 0;

  const lines = text.split('\n');
  // A final newline ends the last line; it does not start an empty one.
  if (lines.at(-1) === '') lines.pop();

  const startFile = (oldPath: string | null, newPath: string | null): DiffFileSection => {
    const section: DiffFileSection = {
      path: newPath ?? oldPath ?? '',
      oldPath,
      newPath,
      status: 'modified',
      binary: false,
      headers: [],
      hunks: [],
      additions: 0,
      deletions: 0,
    };
    files.push(section);
    hunk = null;
    oldLeft = newLeft = 0;
    return section;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '');

    if (file && hunk && (oldLeft > 0 || newLeft > 0 || line.startsWith('\\'))) {
      const current: DiffHunk = hunk;
      const body = line.slice(1);
      if (line.startsWith('+')) {
        current.lines.push({ kind: 'add', text: body, oldNumber: null, newNumber: newLine++ });
        file.additions++;
        newLeft--;
      } else if (line.startsWith('-')) {
        current.lines.push({ kind: 'del', text: body, oldNumber: oldLine++, newNumber: null });
        file.deletions++;
        oldLeft--;
      } else if (line.startsWith('\\')) {
        current.lines.push({ kind: 'note', text: line.slice(2), oldNumber: null, newNumber: null });
      } else {
        // ' ' — or an empty line, which some tools write for an empty context line.
        current.lines.push({ kind: 'context', text: body, oldNumber: oldLine++, newNumber: newLine++ });
        oldLeft--;
        newLeft--;
      }
      continue;
    }

    if (line.startsWith('diff --git ')) {
      const [oldPath, newPath] = gitHeaderPaths(line.slice('diff --git '.length));
      file = startFile(oldPath, newPath);
      gitFile = true;
      continue;
    }
    if (line.startsWith('--- ') && lines[i + 1]?.startsWith('+++ ')) {
      // A plain unified diff has no `diff --git`: its files start here.
      if (!file || !gitFile || file.hunks.length > 0) {
        file = startFile(null, null);
        gitFile = false;
      }
      setPaths(file, pathOf(line.slice(4)), pathOf(lines[i + 1]!.slice(4)));
      i++;
      continue;
    }
    if (!file) {
      preamble.push(line);
      continue;
    }

    const header = HUNK.exec(line);
    if (header) {
      oldLine = Number(header[1]);
      newLine = Number(header[3]);
      oldLeft = header[2] === undefined ? 1 : Number(header[2]);
      newLeft = header[4] === undefined ? 1 : Number(header[4]);
      hunk = { header: line, oldStart: oldLine, newStart: newLine, lines: [] };
      file.hunks.push(hunk);
      continue;
    }

    // Extended header lines between `diff --git` and the first hunk.
    file.headers.push(line);
    if (line.startsWith('new file mode')) file.status = 'added';
    else if (line.startsWith('deleted file mode')) file.status = 'deleted';
    else if (line.startsWith('rename from ')) setStatusPath(file, 'renamed', 'old', line.slice(12));
    else if (line.startsWith('rename to ')) setStatusPath(file, 'renamed', 'new', line.slice(10));
    else if (line.startsWith('copy from ')) setStatusPath(file, 'copied', 'old', line.slice(10));
    else if (line.startsWith('copy to ')) setStatusPath(file, 'copied', 'new', line.slice(8));
    else if (line.startsWith('Binary files ') || line === 'GIT binary patch') file.binary = true;
  }
  for (const section of files) {
    if (section.status === 'added') section.oldPath = null;
    if (section.status === 'deleted') section.newPath = null;
  }
  return { files, preamble };
}

function setStatusPath(file: DiffFileSection, status: DiffFileStatus, side: 'old' | 'new', raw: string): void {
  file.status = status;
  const path = unquote(raw);
  if (side === 'old') file.oldPath = path;
  else file.newPath = file.path = path;
}

/** Paths of `---` / `+++`: /dev/null marks the side that does not exist. */
function setPaths(file: DiffFileSection, oldPath: string | null, newPath: string | null): void {
  if (oldPath === null && newPath !== null) file.status = 'added';
  if (newPath === null && oldPath !== null) file.status = 'deleted';
  file.oldPath = oldPath;
  file.newPath = newPath;
  file.path = newPath ?? oldPath ?? file.path;
}

function pathOf(raw: string): string | null {
  const value = unquote(raw.split('\t')[0]!);
  if (value === '/dev/null') return null;
  return stripPrefix(value);
}

function stripPrefix(path: string): string {
  return /^[ab]\//.test(path) ? path.slice(2) : path;
}

/**
 * `a/<old> b/<new>` of a `diff --git` line. Paths with spaces are ambiguous there; git writes the
 * same path twice unless the file was renamed (then `rename from/to` follows and wins), so an
 * unquoted line is cut in its middle when both halves match, else at its last ` b/`.
 */
function gitHeaderPaths(rest: string): [string, string] {
  if (rest.startsWith('"')) {
    const end = closingQuote(rest);
    const oldPath = unquote(rest.slice(0, end + 1));
    return [stripPrefix(oldPath), stripPrefix(unquote(rest.slice(end + 2)))];
  }
  const half = (rest.length - 1) / 2;
  if (Number.isInteger(half) && rest.slice(2, half) === rest.slice(half + 3) && rest[half] === ' ') {
    return [rest.slice(2, half), rest.slice(half + 3)];
  }
  const cut = rest.lastIndexOf(' b/');
  if (cut < 0) return [stripPrefix(rest), stripPrefix(rest)];
  return [stripPrefix(rest.slice(0, cut)), stripPrefix(unquote(rest.slice(cut + 1)))];
}

function closingQuote(text: string): number {
  for (let i = 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i;
  }
  return text.length - 1;
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };

/** git's C-style quoting (`core.quotePath`): escapes and octal bytes of UTF-8. */
export function unquote(text: string): string {
  if (!(text.length >= 2 && text.startsWith('"') && text.endsWith('"'))) return text;
  const bytes: number[] = [];
  const body = text.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch !== '\\') {
      bytes.push(...new TextEncoder().encode(ch));
      continue;
    }
    const next = body[i + 1] ?? '';
    const octal = /^[0-7]{3}/.exec(body.slice(i + 1));
    if (octal) {
      bytes.push(parseInt(octal[0], 8));
      i += 3;
    } else {
      bytes.push(ESCAPES[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}
