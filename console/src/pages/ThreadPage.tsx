import { useCallback, useEffect, useRef, useState } from 'react';
import { Link, useParams } from 'react-router';
import { api } from '../api/client.js';
import type { components } from '../api/generated/schema.js';
import { ItemBoundary } from '../components/ErrorBoundary.js';
import { Markdown } from '../components/Markdown.js';
import { When } from '../components/When.js';
import { describeError, InteractionForm, type Interaction } from './thread/InteractionForm.js';
import { applyEvents, emptyLog, type RunLog } from './thread/log.js';
import { RunLogView, RunFacts } from './thread/RunLogView.js';
import { followRun, type StreamState } from './thread/stream.js';
import './thread/thread.css';

type Thread = components['schemas']['Thread'];
type Run = components['schemas']['Run'];
type Message = components['schemas']['Message'];

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const isLive = (status: string | undefined | null) => !!status && !TERMINAL.has(status);

/** A caller-chosen id for idempotent writes; crypto.randomUUID needs a secure context, this does not. */
function requestId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `${prefix}_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * One thread: its record, its runs, the live log of the run shown (over SSE), the agent's pending
 * questions, and what can be sent to it: a message when idle, a queued or steering message and a
 * cancel while a run is live.
 */
export function ThreadPage({ onSignedOut }: { onSignedOut: () => void }) {
  const { id = '' } = useParams();
  // Another thread is another page: nothing of this one's state carries over.
  return <ThreadView key={id} id={id} onSignedOut={onSignedOut} />;
}

function ThreadView({ id, onSignedOut }: { id: string; onSignedOut: () => void }) {
  const [thread, setThread] = useState<Thread | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notFound, setNotFound] = useState(false);
  const [messages, setMessages] = useState<Message[]>([]);
  const [runs, setRuns] = useState<Record<string, Run>>({});
  const [runIds, setRunIds] = useState<string[]>([]);
  const [chosenRunId, setChosenRunId] = useState<string | null>(null);
  const [log, setLog] = useState<RunLog>(emptyLog);
  const [streamState, setStreamState] = useState<StreamState>('connecting');
  const [pending, setPending] = useState<Interaction[]>([]);
  // Answered here too late (someone else settled them first): kept up to say so.
  const [late, setLate] = useState<Interaction[]>([]);
  // A queued message not yet applied: when the run before it ends, it starts the next run.
  const [queued, setQueued] = useState(false);
  const [reload, setReload] = useState(0);
  const refresh = useCallback(() => setReload((n) => n + 1), []);

  // A refused read: 401 signs out, 404 is "not found" (others' threads included), else say what happened.
  const refused = useCallback(
    (status: number, error?: unknown) => {
      if (status === 401) onSignedOut();
      else if (status === 404) setNotFound(true);
      else setFailure(describeError(error, status));
    },
    [onSignedOut],
  );

  const knowRuns = useCallback((ids: (string | null | undefined)[]) => {
    setRunIds((known) => {
      const add = ids.filter((r): r is string => !!r && !known.includes(r));
      return add.length === 0 ? known : [...add.reverse(), ...known];
    });
  }, []);

  // The thread, its messages, its controls (the runs queues created) and its pending interactions.
  useEffect(() => {
    const abort = new AbortController();
    const signal = abort.signal;
    const path = { path: { id } };
    const failed = (err: unknown) => {
      if (!signal.aborted) setFailure(String(err));
    };
    // The controls before the thread: threads records a control's run as the thread's latest before
    // it marks the control applied, so a queued message read as applied has its run shown by the
    // thread read after. Read the other way round (or at once), a run admitted in between would be
    // neither queued nor latest here, and nothing would read the thread again.
    api
      .GET('/v1/threads/{id}/controls', { params: path, signal })
      .then(({ data }) => {
        if (!data) return;
        knowRuns(data.controls.map((c) => c.created_run_id));
        setQueued(data.controls.some((c) => c.kind === 'queue' && c.status === 'pending'));
      }, failed)
      .then(() => api.GET('/v1/threads/{id}', { params: path, signal }))
      .then(({ data, error, response }) => {
        if (!data) return refused(response.status, error);
        setThread(data);
        setFailure(null);
        knowRuns([data.latest_run?.id]);
      }, failed);
    api
      .GET('/v1/threads/{id}/messages', { params: { ...path, query: { limit: 200 } }, signal })
      .then(({ data }) => data && setMessages(data.messages), failed);
    api
      .GET('/v1/threads/{id}/interactions', { params: { ...path, query: { status: 'pending' } }, signal })
      .then(({ data }) => data && setPending(data.interactions), failed);
    return () => abort.abort();
  }, [id, reload, refused, knowRuns]);

  // New runs (a queued message admitted after the one shown) are followed unless one was picked.
  const latestRunId = thread?.latest_run?.id ?? null;
  const shownRunId = chosenRunId ?? latestRunId;

  const readRun = useCallback(
    async (runId: string) => {
      const { data, error, response } = await api.GET('/v1/runs/{id}', { params: { path: { id: runId } } });
      if (data) setRuns((r) => ({ ...r, [runId]: data }));
      else if (response.status === 401) onSignedOut();
      else if (response.status !== 404) setFailure(describeError(error, response.status));
    },
    [onSignedOut],
  );

  // Each run is read once here; the one shown is read again as its status changes.
  const requested = useRef(new Set<string>());
  useEffect(() => {
    for (const runId of runIds) {
      if (requested.current.has(runId)) continue;
      requested.current.add(runId);
      void readRun(runId).catch(() => undefined);
    }
  }, [runIds, readRun]);

  // The live log of the run shown: from its first event, then as they are stored, until `end`.
  useEffect(() => {
    setLog(emptyLog());
    if (!shownRunId) return;
    return followRun(shownRunId, {
      after: 0,
      onEvents(events) {
        setLog((current) => applyEvents(current, events));
        const types = new Set(events.map((e) => (e.chunk as { type?: unknown } | null)?.type));
        if (types.has('interaction.requested') || types.has('interaction.settled') || types.has('run.status')) {
          // Questions are read from the interaction, where they are owned; the run for its error and usage.
          void api
            .GET('/v1/threads/{id}/interactions', { params: { path: { id }, query: { status: 'pending' } } })
            .then(
              ({ data }) => data && setPending(data.interactions),
              () => undefined,
            );
          void readRun(shownRunId).catch(() => undefined);
        }
      },
      onState(state) {
        setStreamState(state);
        // Drained and terminal: what the run left behind (messages, a queued follow-up's run).
        if (state === 'ended') refresh();
      },
      onRefused: (status) => refused(status),
    });
  }, [shownRunId, id, readRun, refresh, refused]);

  // The threads service admits a queued message's run once it learns the run before ended, a moment
  // after the log's `end`: until the thread shows it, read the thread again (no thread event stream).
  const waitingForQueued = queued && !!thread && !isLive(thread.latest_run?.status) && !isLive(log.status);
  // An earlier run is shown while the latest is live: its status (which decides what can be sent)
  // comes from reading the thread now and then, since only the shown run's log is followed.
  const latestUnfollowed = !!latestRunId && shownRunId !== latestRunId && isLive(thread?.latest_run?.status);
  useEffect(() => {
    if (!waitingForQueued && !latestUnfollowed) return;
    const timer = setTimeout(refresh, waitingForQueued ? 1_000 : 3_000);
    return () => clearTimeout(timer);
  }, [waitingForQueued, latestUnfollowed, reload, refresh]);

  if (notFound) {
    return (
      <section className="page" aria-labelledby="thread-title">
        <p>
          <Link to="/">← Work</Link>
        </p>
        <h1 id="thread-title">Not found</h1>
        <p role="alert">No thread {id} of yours is here. It may have been mistyped, or belong to someone else.</p>
      </section>
    );
  }

  const shownRun = shownRunId ? runs[shownRunId] : undefined;
  const status = log.status ?? shownRun?.status ?? null;
  const latestStatus =
    shownRunId === latestRunId ? (status ?? thread?.latest_run?.status) : (thread?.latest_run?.status ?? null);

  return (
    <section aria-labelledby="thread-title" className="page thread-page">
      <p>
        <Link to="/">← Work</Link>
      </p>
      <h1 id="thread-title">{thread?.name ?? `Thread ${id}`}</h1>
      {failure && <p role="alert">{failure}</p>}
      <p>
        <Link to={`/threads/${encodeURIComponent(id)}/review`}>Review the changes</Link>
      </p>
      {thread && (
        <dl className="facts">
          <div>
            <dt>Status</dt>
            <dd>{latestStatus ? (isLive(latestStatus) ? 'active' : 'idle') : thread.status}</dd>
          </div>
          <div>
            <dt>Sandbox</dt>
            <dd>{thread.sandbox_status ?? '—'}</dd>
          </div>
          <div>
            <dt>Branch</dt>
            <dd>{thread.branch ?? '—'}</dd>
          </div>
          <div>
            <dt>Agent</dt>
            <dd>{`${thread.harness} · ${thread.model} · ${thread.collaboration_mode}`}</dd>
          </div>
          <div>
            <dt>Created</dt>
            <dd>
              <When at={thread.created_at} />
            </dd>
          </div>
        </dl>
      )}

      {messages.length > 0 && (
        <section aria-labelledby="conversation-title">
          <h2 id="conversation-title">Conversation</h2>
          <ol className="conversation">
            {messages.map((m) => (
              <li key={m.id} className={`message ${m.role}`}>
                <span className="who">{m.role === 'user' ? 'You' : 'Agent'}</span>
                <ItemBoundary resetKey={m}>
                  {m.role === 'assistant' ? (
                    <Markdown text={m.parts.map((p) => p.text).join('\n\n')} />
                  ) : (
                    <p className="plain">{m.parts.map((p) => p.text).join('\n\n')}</p>
                  )}
                </ItemBoundary>
              </li>
            ))}
          </ol>
        </section>
      )}

      {runIds.length > 1 && (
        <nav aria-label="Runs of this thread" className="runs">
          <h2>Runs</h2>
          <ul>
            {runIds.map((runId) => (
              <li key={runId}>
                <button
                  type="button"
                  aria-pressed={runId === shownRunId}
                  // Picking the latest goes back to following whichever run is latest.
                  onClick={() => setChosenRunId(runId === latestRunId ? null : runId)}
                >
                  {runId} ·{' '}
                  {runId === shownRunId && status
                    ? status
                    : runId === latestRunId
                      ? thread?.latest_run?.status
                      : (runs[runId]?.status ?? '…')}
                </button>
              </li>
            ))}
          </ul>
        </nav>
      )}

      {shownRunId && (
        <section aria-labelledby="run-title">
          <h2 id="run-title">
            Run <code>{shownRunId}</code>
          </h2>
          <RunFacts
            status={status}
            run={shownRun}
            usage={log.usage ?? shownRun?.usage ?? null}
            error={log.error ?? shownRun?.error ?? null}
            streamState={streamState}
          />

          {[
            ...pending.filter((i) => i.status === 'pending'),
            ...late.filter((i) => !pending.some((p) => p.id === i.id)),
          ]
            .filter((i) => i.run_id === shownRunId)
            .map((interaction) => (
              <InteractionForm
                key={interaction.id}
                interaction={interaction}
                onSettled={(wasLate) => {
                  if (wasLate) setLate((l) => [...l, interaction]);
                  refresh();
                }}
                onSignedOut={onSignedOut}
              />
            ))}

          <RunLogView log={log} />
        </section>
      )}

      {thread && (
        <Composer
          threadId={id}
          runId={latestRunId}
          runStatus={latestStatus ?? null}
          onSignedOut={onSignedOut}
          onChanged={refresh}
          onRun={(runId, runStatus) => {
            setThread((t) => (t ? { ...t, status: 'active', latest_run: { id: runId, status: runStatus } } : t));
            knowRuns([runId]);
            setChosenRunId(null);
            refresh();
          }}
        />
      )}
    </section>
  );
}

type RunStatus = Run['status'];

/**
 * What can be sent: with no live run a message (a new run); with one, a message queued behind it
 * or steering it, and a cancel (not once cancelling).
 */
function Composer({
  threadId,
  runId,
  runStatus,
  onSignedOut,
  onChanged,
  onRun,
}: {
  threadId: string;
  runId: string | null;
  runStatus: string | null;
  onSignedOut: () => void;
  /** Something was sent that changes what the thread shows (a queued message, a cancel). */
  onChanged: () => void;
  onRun: (runId: string, status: RunStatus) => void;
}) {
  const [prompt, setPrompt] = useState('');
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<{ tone: 'status' | 'alert'; text: string } | null>(null);
  const live = isLive(runStatus);
  const path = { path: { id: threadId } };

  async function send(action: 'message' | 'queue' | 'steer' | 'cancel') {
    setBusy(true);
    setNote(null);
    try {
      const text = prompt.trim();
      if (action === 'message') {
        const { data, error, response } = await api.POST('/v1/threads/{id}/messages', {
          params: path,
          body: { prompt: text, client_request_id: requestId('req'), message_id: requestId('msg') },
        });
        if (response.status === 401) return onSignedOut();
        if (!data) return setNote({ tone: 'alert', text: describeError(error, response.status) });
        setPrompt('');
        onRun(data.run_id, data.run_status);
      } else if (action === 'queue') {
        const { data, error, response } = await api.POST('/v1/threads/{id}/queue', {
          params: path,
          body: { prompt: text, client_request_id: requestId('req'), message_id: requestId('msg') },
        });
        if (response.status === 401) return onSignedOut();
        if (!data) return setNote({ tone: 'alert', text: describeError(error, response.status) });
        setPrompt('');
        if (data.run) onRun(data.run.run_id, data.run.run_status as RunStatus);
        else {
          setNote({ tone: 'status', text: 'Queued: it starts a new run when this one ends.' });
          onChanged();
        }
      } else if (action === 'steer') {
        const { data, error, response } = await api.POST('/v1/threads/{id}/steer', {
          params: path,
          body: { prompt: text, client_request_id: requestId('req') },
        });
        if (response.status === 401) return onSignedOut();
        if (!data) return setNote({ tone: 'alert', text: describeError(error, response.status) });
        setPrompt('');
        setNote({ tone: 'status', text: 'Sent to the running agent.' });
      } else if (runId) {
        const { data, error, response } = await api.POST('/v1/runs/{id}/cancel', { params: { path: { id: runId } } });
        if (response.status === 401) return onSignedOut();
        if (!data) return setNote({ tone: 'alert', text: describeError(error, response.status) });
        setNote({
          tone: 'status',
          text: data.terminal ? `The run had already ended (${data.status}).` : 'Cancelling…',
        });
        onChanged();
      }
    } catch (err) {
      setNote({ tone: 'alert', text: `Not sent (${String(err)}). Try again.` });
    } finally {
      setBusy(false);
    }
  }

  const empty = prompt.trim() === '';
  return (
    <form
      className="composer"
      aria-label="Message the agent"
      onSubmit={(e) => {
        e.preventDefault();
        if (!empty) void send(live ? 'queue' : 'message');
      }}
    >
      <label htmlFor="composer-prompt">{live ? 'Message for the running agent' : 'New message'}</label>
      <textarea
        id="composer-prompt"
        rows={3}
        maxLength={4096}
        value={prompt}
        onChange={(e) => setPrompt(e.target.value)}
        disabled={busy}
      />
      <div className="buttons">
        {live ? (
          <>
            <button type="submit" disabled={busy || empty}>
              Queue
            </button>
            <button type="button" disabled={busy || empty} onClick={() => void send('steer')}>
              Steer
            </button>
            <button
              type="button"
              className="danger"
              disabled={busy || runStatus === 'cancelling'}
              onClick={() => void send('cancel')}
            >
              Cancel run
            </button>
          </>
        ) : (
          <button type="submit" disabled={busy || empty}>
            Send
          </button>
        )}
      </div>
      {note && (
        <p role={note.tone} className={note.tone}>
          {note.text}
        </p>
      )}
    </form>
  );
}
