import type { DiffFileSection, DiffLine, ParsedDiff } from './unified-diff.js';

const MARKER: Record<DiffLine['kind'], string> = { add: '+', del: '-', context: ' ', note: '\\' };

/**
 * A parsed unified diff, one collapsible section per file, each hunk's lines numbered on both
 * sides. The diff comes from an agent's work: everything in it is rendered as text, never as markup.
 * Long lines scroll inside the diff's own box, not the page.
 */
export function DiffView({ parsed, anchorOf }: { parsed: ParsedDiff; anchorOf: (path: string) => string }) {
  if (parsed.files.length === 0) {
    if (parsed.preamble.length === 0) return <p className="muted">The diff is empty.</p>;
    // Not a diff this page can read: shown as it came.
    return (
      <div className="diff-scroll" role="region" aria-label="Diff text" tabIndex={0}>
        <pre className="diff-raw">{parsed.preamble.join('\n')}</pre>
      </div>
    );
  }
  return (
    <div className="diff" data-testid="diff">
      {parsed.files.map((file, index) => (
        <FileDiff key={`${index}:${file.path}`} file={file} anchor={anchorOf(file.path)} />
      ))}
    </div>
  );
}

function FileDiff({ file, anchor }: { file: DiffFileSection; anchor: string }) {
  const moved = (file.status === 'renamed' || file.status === 'copied') && file.oldPath && file.oldPath !== file.path;
  return (
    <details open className="diff-file" id={anchor} data-testid="diff-file">
      <summary>
        <span className="diff-path">{moved ? `${file.oldPath} → ${file.path}` : file.path}</span>{' '}
        <span className={`file-status status-${file.status}`}>{file.status}</span>{' '}
        <span className="added">{`+${file.additions}`}</span> <span className="removed">{`−${file.deletions}`}</span>
      </summary>
      {file.binary ? (
        <p className="muted diff-message">Binary file, not shown.</p>
      ) : file.hunks.length === 0 ? (
        <p className="muted diff-message">
          No line changes{file.headers.length ? ` (${file.headers.join('; ')})` : ''}.
        </p>
      ) : (
        <div className="diff-scroll" role="region" aria-label={`Changes to ${file.path}`} tabIndex={0}>
          <table className="diff-table">
            <colgroup>
              <col className="diff-ln" />
              <col className="diff-ln" />
              <col />
            </colgroup>
            {file.hunks.map((hunk, h) => (
              <tbody key={h}>
                <tr className="diff-hunk">
                  <td colSpan={3}>{hunk.header}</td>
                </tr>
                {hunk.lines.map((line, l) => (
                  <tr key={l} className={`diff-${line.kind}`}>
                    <td className="diff-num">{line.oldNumber ?? ''}</td>
                    <td className="diff-num">{line.newNumber ?? ''}</td>
                    <td className="diff-code">
                      <span className="diff-marker">{MARKER[line.kind]}</span>
                      {line.text}
                    </td>
                  </tr>
                ))}
              </tbody>
            ))}
          </table>
        </div>
      )}
    </details>
  );
}
