// Markdown tables of the results, printed to stdout (progress goes to stderr), so a run's output
// can be pasted into bench/RESULTS.md as it is.

export const int = (n) => (n === null || n === undefined ? '—' : Math.round(n).toLocaleString('en-US'));
export const ms = (n) => (n === null || n === undefined ? '—' : n.toFixed(n < 10 ? 2 : 1));
export const ratio = (n) => `${n.toFixed(2)}×`;

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The `p`th percentile of ascending `sorted` by nearest rank; null when it is empty. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** A Markdown table: the first `textColumns` columns left-aligned, the figures after them right-aligned. */
export function table(header, rows, textColumns = 1) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  const rule = header.map((_, i) => (i < textColumns ? '---' : '---:'));
  return [line(header), line(rule), ...rows.map(line)].join('\n');
}

/**
 * A row of the summary. `target` is { text, met(ratio or figure) }; rows without a target say "—".
 */
export function summaryRow(number, name, ours, baseline, value, target) {
  return [
    number,
    name,
    ours,
    baseline,
    value === null ? '—' : ratio(value),
    target?.text ?? '—',
    target ? (target.met ? 'met' : '**missed**') : '—',
  ];
}

export const SUMMARY_HEADER = ['#', 'benchmark', 'ours', 'baseline', 'ratio', 'target', 'result'];
