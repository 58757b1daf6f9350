import type { components } from '../../api/generated/schema.js';
import { ItemBoundary } from '../../components/ErrorBoundary.js';
import { Markdown } from '../../components/Markdown.js';
import { When } from '../../components/When.js';
import type { LogItem, RunError, RunLog, Usage } from './log.js';
import type { StreamState } from './stream.js';

type Run = components['schemas']['Run'];

const STREAM_NOTE: Record<StreamState, string> = {
  connecting: 'connecting…',
  live: 'live',
  reconnecting: 'connection lost, reconnecting…',
  ended: 'complete',
};

/** The run's state: status, times, usage and, for a failed run, its error code and message. */
export function RunFacts({
  status,
  run,
  usage,
  error,
  streamState,
}: {
  status: string | null;
  run: Run | undefined;
  usage: Usage | null;
  error: RunError | null;
  streamState: StreamState;
}) {
  return (
    <>
      <dl className="facts">
        <div>
          <dt>Run status</dt>
          <dd data-testid="run-status">{status ?? '…'}</dd>
        </div>
        <div>
          <dt>Log</dt>
          <dd aria-live="polite" data-testid="stream-state">
            {STREAM_NOTE[streamState]}
          </dd>
        </div>
        {run && run.attempt > 0 && (
          <div>
            <dt>Attempt</dt>
            <dd>{run.attempt + 1}</dd>
          </div>
        )}
        {run?.started_at && (
          <div>
            <dt>Started</dt>
            <dd>
              <When at={run.started_at} />
            </dd>
          </div>
        )}
        {run?.completed_at && (
          <div>
            <dt>Ended</dt>
            <dd>
              <When at={run.completed_at} />
            </dd>
          </div>
        )}
        {usage && (
          <div>
            <dt>Usage</dt>
            <dd data-testid="usage">{describeUsage(usage)}</dd>
          </div>
        )}
      </dl>
      {error && status === 'failed' && (
        <div role="alert" className="run-error">
          <p>
            The run failed: {error.message} <code>{error.code}</code>
          </p>
          {error.detail && <pre>{error.detail}</pre>}
        </div>
      )}
    </>
  );
}

function describeUsage(u: Usage): string {
  const parts = [
    u.inputTokens !== undefined && `${u.inputTokens.toLocaleString()} in`,
    u.outputTokens !== undefined && `${u.outputTokens.toLocaleString()} out`,
    u.totalTokens !== undefined && `${u.totalTokens.toLocaleString()} tokens in all`,
    u.costUsd !== undefined && `$${u.costUsd.toFixed(4)}`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(' · ') : '—';
}

/** The log, in order, for people: messages as Markdown, commands folded with their output. */
export function RunLogView({ log }: { log: RunLog }) {
  return (
    <>
      {log.plan && (
        <ItemBoundary resetKey={log.plan}>
          <Plan steps={log.plan.steps} explanation={log.plan.explanation} />
        </ItemBoundary>
      )}
      <h3>Log</h3>
      {log.items.length === 0 ? (
        <p className="muted">Nothing yet.</p>
      ) : (
        <ol className="log" data-testid="run-log">
          {log.items.map((item) => (
            <li key={`${item.kind}:${item.sequence}`} className={`item ${item.kind}`} data-sequence={item.sequence}>
              <ItemBoundary resetKey={item}>
                <Item item={item} />
              </ItemBoundary>
            </li>
          ))}
        </ol>
      )}
    </>
  );
}

function Plan({ steps, explanation }: { steps: { step: string; status: string }[]; explanation: string | null }) {
  return (
    <section className="plan-panel" aria-label="Plan">
      <h3>Plan</h3>
      {explanation && <p>{explanation}</p>}
      <ol>
        {steps.map((s, n) => (
          <li key={n} className={s.status}>
            <span className="step-status">{s.status.replace('_', ' ')}</span> {s.step}
          </li>
        ))}
      </ol>
    </section>
  );
}

function Item({ item }: { item: LogItem }) {
  switch (item.kind) {
    case 'status':
      return (
        <p className="muted">
          Run {item.previous ? `${item.previous} → ` : ''}
          <strong>{item.status}</strong>
          {item.error && (
            <>
              : {item.error.message} <code>{item.error.code}</code>
            </>
          )}
        </p>
      );
    case 'message':
      return (
        <div className="agent-message">
          <Markdown text={item.text} />
        </div>
      );
    case 'reasoning':
      return (
        <details>
          <summary>Reasoning</summary>
          <p className="plain">{item.text}</p>
        </details>
      );
    case 'command':
      return (
        <details>
          <summary>
            <code>$ {item.command || '(command)'}</code>{' '}
            <span className={item.exitCode === 0 ? 'ok' : item.exitCode === undefined ? 'muted' : 'bad'}>
              {item.exitCode === undefined
                ? 'running…'
                : item.exitCode === null
                  ? 'ended, no exit code'
                  : `exit ${item.exitCode}`}
            </span>
            {item.durationMs !== null && <span className="muted"> · {(item.durationMs / 1000).toFixed(1)} s</span>}
          </summary>
          <pre className="output">{item.output || '(no output)'}</pre>
          {item.truncated && <p className="muted">Output cut at its limit.</p>}
        </details>
      );
    case 'file':
      return (
        <p>
          File {item.change}: <code>{item.path}</code>
        </p>
      );
    case 'plan':
      return <p className="muted">Plan updated ({item.steps.length} steps).</p>;
    case 'interaction':
      return (
        <p>
          {item.interactionKind === 'plan_approval' ? 'Plan approval' : 'Question'}{' '}
          {item.settled ? <strong>{item.settled}</strong> : <strong>waiting for your answer</strong>}
        </p>
      );
    case 'control':
      return (
        <p className="muted">{item.controlKind === 'steer' ? 'Steering message applied' : 'Queued message applied'}</p>
      );
    case 'error':
      return (
        <p role="note" className="bad">
          Error: {item.error.message} <code>{item.error.code}</code>
          {item.error.detail && <span className="muted"> — {item.error.detail}</span>}
        </p>
      );
    case 'network':
      return (
        <p className="bad">
          Connection refused by the sandbox: <code>{`${item.host}:${item.port}`}</code> ({item.reason})
        </p>
      );
    case 'sandbox':
      return (
        <p className="muted">
          Sandbox ready ({item.layers.join(', ') || 'no isolation'}; network: {item.egress})
        </p>
      );
    case 'other':
      return <p className="muted">{item.type}</p>;
  }
}
