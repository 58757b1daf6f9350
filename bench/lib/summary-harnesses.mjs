// The report of benchmarks 6 and 7, every harness side by side: each harness's figures and their
// ratio to the first harness's (Codex), all measured in the same run. No target: the ratios say
// what choosing one harness over the other costs.
import { mib } from './proc.mjs';
import { int, ratio, summaryRow, table } from './report.mjs';

const TURN_KINDS = [
  ['cold', 'new thread (POST /v1/threads)', 'cold: new thread'],
  ['warm', 'follow-up in a warm sandbox (POST /v1/threads/{id}/messages)', 'warm: follow-up message'],
];
const TURN_MARKS = [
  ['firstEventMs', 'first harness event'],
  ['completedMs', 'completed'],
];

const quotient = (a, b) => (a === null || b === null || !(b > 0) ? null : a / b);
const shown = (value) => (value === null ? '—' : ratio(value));

/** Memory one live sandbox of a harness costs: the runner's growth and the harness's process tree. */
function perSandbox(result) {
  const { runnerGrowth, harness } = result.perSandbox;
  return { rss: runnerGrowth.rss + harness.rss, anon: runnerGrowth.anon + harness.anon };
}

/**
 * Summary rows of benchmarks 6 and 7: each other harness as "ours" against the first as "baseline".
 * With one harness, its figures alone, as before the comparison.
 */
export function harnessSummaryRows(turns, sandboxes) {
  const rows = [];
  if (turns) {
    const [base, ...others] = Object.keys(turns.byHarness);
    for (const [kind, label] of TURN_KINDS) {
      for (const [mark, markLabel] of TURN_MARKS) {
        const baseline = turns.byHarness[base][kind];
        const name = `trivial turn, ${label} → ${markLabel}, median of ${baseline.samples}`;
        if (others.length === 0)
          rows.push(summaryRow(6, `${name} (${base})`, `${int(baseline[mark])} ms`, '—', null, null));
        for (const other of others) {
          const ours = turns.byHarness[other][kind];
          rows.push(
            summaryRow(
              6,
              `${name}: ${other} vs ${base}`,
              `${int(ours[mark])} ms`,
              `${int(baseline[mark])} ms`,
              quotient(ours[mark], baseline[mark]),
              null,
            ),
          );
        }
      }
    }
  }
  if (sandboxes) {
    const [base, ...others] = Object.keys(sandboxes);
    const memory = (m) => `${mib(m.rss)} MiB RSS, ${mib(m.anon)} MiB anon`;
    const name = (harness) =>
      `memory per live sandbox (runner growth + harness processes), ${sandboxes[harness].sandboxes} turns in flight`;
    const baseline = perSandbox(sandboxes[base]);
    if (others.length === 0) rows.push(summaryRow(7, `${name(base)} (${base})`, memory(baseline), '—', null, null));
    for (const other of others) {
      const ours = perSandbox(sandboxes[other]);
      rows.push(
        summaryRow(
          7,
          `${name(other)}: ${other} vs ${base}, RSS`,
          memory(ours),
          memory(baseline),
          quotient(ours.rss, baseline.rss),
          null,
        ),
        summaryRow(
          7,
          `${name(other)}: ${other} vs ${base}, anon`,
          `${mib(ours.anon)} MiB`,
          `${mib(baseline.anon)} MiB`,
          quotient(ours.anon, baseline.anon),
          null,
        ),
      );
    }
  }
  return rows;
}

/** The detail tables of benchmarks 6 and 7: one column per harness, then the ratio to the first. */
export function harnessTables(turns, sandboxes) {
  const tables = [];
  if (turns) {
    const harnesses = Object.keys(turns.byHarness);
    const [base, ...others] = harnesses;
    const rows = [];
    for (const [kind, , label] of TURN_KINDS) {
      for (const [mark, markLabel] of TURN_MARKS) {
        const figure = (harness) => turns.byHarness[harness][kind][mark];
        rows.push([
          `${label} → ${markLabel}`,
          turns.byHarness[base][kind].samples,
          ...harnesses.map((harness) => int(figure(harness))),
          ...others.map((other) => shown(quotient(figure(other), figure(base)))),
        ]);
      }
    }
    tables.push(
      table(
        [
          'trivial turn (median)',
          'samples',
          ...harnesses.map((harness) => `${harness} ms`),
          ...others.map((other) => `${other} / ${base}`),
        ],
        rows,
      ),
    );
    if (turns.createRetriedAfter500 > 0) {
      tables.push(
        `POST /v1/threads answered 500 ${turns.createRetriedAfter500} time(s) and was replayed (same client_request_id).`,
      );
    }
  }
  if (sandboxes) {
    const harnesses = Object.keys(sandboxes);
    const cells = (pick) =>
      harnesses.flatMap((harness) => [mib(pick(sandboxes[harness]).rss), mib(pick(sandboxes[harness]).anon)]);
    const processes = harnesses
      .map((harness) => {
        const made = Object.entries(sandboxes[harness].commands).map(
          ([name, kind]) => `${name} ×${kind.count} (${mib(kind.rss)} MiB RSS, ${mib(kind.anon)} MiB anon per sandbox)`,
        );
        return `${harness}: ${made.join(', ') || 'none'}`;
      })
      .join('; ');
    tables.push(
      table(
        [
          `runner with ${sandboxes[harnesses[0]].sandboxes} live sandboxes`,
          ...harnesses.flatMap((harness) => [`${harness} RSS MiB`, `${harness} RssAnon MiB`]),
        ],
        [
          ['runner process, idle', ...cells((s) => s.runnerIdle)],
          ['runner process, sandboxes live', ...cells((s) => s.runnerLive)],
          ['runner growth per sandbox', ...cells((s) => s.perSandbox.runnerGrowth)],
          ['harness processes per sandbox', ...cells((s) => s.perSandbox.harness)],
          ['per sandbox in all', ...cells(perSandbox)],
        ],
      ),
      `Harness processes (the runner's new descendants while the sandboxes were live): ${processes}.`,
    );
  }
  return tables;
}
