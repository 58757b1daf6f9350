import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { api } from '../api/client.js';
import type { components } from '../api/generated/schema.js';
import './new-thread.css';

type Harness = components['schemas']['Harness'];
type Repository = components['schemas']['Repository'];

/** How long typing pauses before the repository search asks the API. */
const SEARCH_DEBOUNCE_MS = 250;

/** A random id for `client_request_id`; getRandomValues works on plain http too, unlike randomUUID. */
function requestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `web_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** The message of an API error body, whatever else came back. */
function errorMessage(body: unknown, status: number): string {
  const error = (body as { error?: unknown } | undefined)?.error;
  const message = (error as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' && message !== '' ? message : `The thread was not created (HTTP ${status}).`;
}

/**
 * A new thread: a repository found by search, the first prompt, and the agent it runs with (what
 * GET /v1/harnesses offers, each harness's defaults preselected). Submits POST /v1/threads and
 * opens the thread; a refusal is shown beside the form, which keeps everything typed.
 */
export function NewThreadPage({ onSignedOut }: { onSignedOut: () => void }) {
  const navigate = useNavigate();
  const ids = useId();
  const [query, setQuery] = useState('');
  const [repositories, setRepositories] = useState<Repository[] | null>(null);
  const [searchFailure, setSearchFailure] = useState<string | null>(null);
  const [repository, setRepository] = useState<Repository | null>(null);
  const [prompt, setPrompt] = useState('');
  const [harnesses, setHarnesses] = useState<Harness[] | null>(null);
  const [harnessId, setHarnessId] = useState('');
  const [model, setModel] = useState('');
  const [effort, setEffort] = useState('');
  const [mode, setMode] = useState('');
  const [branch, setBranch] = useState('');
  const [submitting, setSubmitting] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  // The same request sent again (a retry after a lost answer) keeps its id, so it makes one thread.
  const attempt = useRef<{ body: string; id: string } | null>(null);

  const harness = harnesses?.find((h) => h.id === harnessId) ?? null;

  useEffect(() => {
    const abort = new AbortController();
    api.GET('/v1/harnesses', { signal: abort.signal }).then(
      ({ data, response }) => {
        if (response.status === 401) return onSignedOut();
        if (!data) return setFailure(`The harnesses could not be read (HTTP ${response.status}).`);
        setHarnesses(data.harnesses);
        const chosen = data.harnesses.find((h) => h.default) ?? data.harnesses[0];
        if (chosen) choose(chosen);
      },
      (err: unknown) => {
        if (!abort.signal.aborted) setFailure(String(err));
      },
    );
    return () => abort.abort();
  }, [onSignedOut]);

  useEffect(() => {
    const abort = new AbortController();
    const timer = setTimeout(() => {
      const q = query.trim();
      api.GET('/v1/repohost/repositories', { params: { query: q ? { q } : {} }, signal: abort.signal }).then(
        ({ data, response }) => {
          if (response.status === 401) return onSignedOut();
          if (!data) return setSearchFailure(`The repositories could not be read (HTTP ${response.status}).`);
          setSearchFailure(null);
          setRepositories(data.repositories);
        },
        (err: unknown) => {
          if (!abort.signal.aborted) setSearchFailure(String(err));
        },
      );
    }, SEARCH_DEBOUNCE_MS);
    return () => {
      clearTimeout(timer);
      abort.abort();
    };
  }, [query, onSignedOut]);

  /** A harness with its own defaults: the model and effort lists follow the harness. */
  function choose(next: Harness) {
    setHarnessId(next.id);
    setModel(next.default_model);
    setEffort(next.default_reasoning_effort);
    setMode((current) =>
      (next.collaboration_modes as readonly string[]).includes(current) ? current : (next.collaboration_modes[0] ?? ''),
    );
  }

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    if (!repository || submitting) return;
    const body = {
      repository_id: repository.repository_id,
      prompt,
      ...(harnessId ? { harness: harnessId } : {}),
      ...(model.trim() ? { model: model.trim() } : {}),
      ...(effort ? { reasoning_effort: effort } : {}),
      ...(mode ? { collaboration_mode: mode as 'default' | 'plan' } : {}),
      ...(branch.trim() ? { branch: branch.trim() } : {}),
    };
    const key = JSON.stringify(body);
    if (attempt.current?.body !== key) attempt.current = { body: key, id: requestId() };
    setSubmitting(true);
    setFailure(null);
    try {
      const { data, error, response } = await api.POST('/v1/threads', {
        body: { ...body, client_request_id: attempt.current.id },
      });
      if (response.status === 401) return onSignedOut();
      if (!data) {
        // A refusal is final for this body: a changed form gets a fresh request id anyway.
        setFailure(errorMessage(error, response.status));
        return;
      }
      navigate(`/threads/${encodeURIComponent(data.id)}`);
    } catch (err) {
      setFailure(`The gateway did not answer (${String(err)}). Your form is kept: submit again to retry.`);
    } finally {
      setSubmitting(false);
    }
  }

  const errorId = `${ids}-error`;
  const listId = `${ids}-repositories`;
  const hasModels = (harness?.models.length ?? 0) > 0;

  return (
    <section aria-labelledby="new-thread-title" className="page new-thread">
      <p>
        <Link to="/">← Work</Link>
      </p>
      <h1 id="new-thread-title">New thread</h1>
      <form onSubmit={(e) => void submit(e)} aria-describedby={failure ? errorId : undefined}>
        <fieldset className="field">
          <legend>Repository</legend>
          <label htmlFor={`${ids}-search`}>Search repositories</label>
          <input
            id={`${ids}-search`}
            type="search"
            value={query}
            autoComplete="off"
            aria-controls={listId}
            onChange={(e) => setQuery(e.target.value)}
            onKeyDown={(e) => {
              // Down from the search box goes to the results, as in a combobox, picking the first
              // one when none is picked yet.
              if (e.key === 'ArrowDown') {
                e.preventDefault();
                document.getElementById(listId)?.focus();
                if (!repository && repositories?.[0]) setRepository(repositories[0]);
              }
            }}
          />
          <label htmlFor={listId}>
            Repository{' '}
            <span className="muted" aria-live="polite">
              {repositories === null ? '(searching…)' : `(${repositories.length} found)`}
            </span>
          </label>
          <select
            id={listId}
            required
            size={Math.max(2, Math.min(6, repositories?.length ?? 0))}
            value={repository ? String(repository.repository_id) : ''}
            onChange={(e) =>
              setRepository(repositories?.find((r) => String(r.repository_id) === e.target.value) ?? null)
            }
          >
            {repository && !repositories?.some((r) => r.repository_id === repository.repository_id) && (
              <option value={String(repository.repository_id)}>{repository.full_name}</option>
            )}
            {repositories?.map((r) => (
              <option key={r.repository_id} value={String(r.repository_id)}>
                {r.full_name}
              </option>
            ))}
          </select>
          {searchFailure && <p role="alert">{searchFailure}</p>}
          {repositories?.length === 0 && <p className="muted">No repository matches “{query.trim()}”.</p>}
          {repository && (
            <p className="muted" data-testid="chosen-repository">
              Chosen: {repository.full_name} (default branch {repository.default_branch})
            </p>
          )}
        </fieldset>

        <div className="field">
          <label htmlFor={`${ids}-prompt`}>Prompt</label>
          <textarea
            id={`${ids}-prompt`}
            required
            rows={6}
            maxLength={4096}
            value={prompt}
            onChange={(e) => setPrompt(e.target.value)}
          />
        </div>

        <fieldset className="field agent">
          <legend>Agent</legend>
          {harnesses === null && !failure && <p aria-busy="true">Loading the harnesses…</p>}
          {harnesses && (
            <div className="agent-grid">
              <div>
                <label htmlFor={`${ids}-harness`}>Harness</label>
                <select
                  id={`${ids}-harness`}
                  value={harnessId}
                  onChange={(e) => {
                    const next = harnesses.find((h) => h.id === e.target.value);
                    if (next) choose(next);
                  }}
                >
                  {harnesses.map((h) => (
                    <option key={h.id} value={h.id}>
                      {h.id}
                    </option>
                  ))}
                </select>
              </div>
              <div>
                <label htmlFor={`${ids}-model`}>Model</label>
                {hasModels ? (
                  <select id={`${ids}-model`} value={model} onChange={(e) => setModel(e.target.value)}>
                    {harness!.models.map((m) => (
                      <option key={m} value={m}>
                        {m}
                      </option>
                    ))}
                  </select>
                ) : (
                  // This harness takes any model: its default is filled in.
                  <input
                    id={`${ids}-model`}
                    value={model}
                    maxLength={256}
                    autoComplete="off"
                    onChange={(e) => setModel(e.target.value)}
                  />
                )}
              </div>
              <div>
                <label htmlFor={`${ids}-effort`}>Reasoning effort</label>
                <select id={`${ids}-effort`} value={effort} onChange={(e) => setEffort(e.target.value)}>
                  {harness?.reasoning_efforts.map((r) => (
                    <option key={r} value={r}>
                      {r}
                    </option>
                  ))}
                </select>
              </div>
              <div>
                <label htmlFor={`${ids}-mode`}>Collaboration mode</label>
                <select id={`${ids}-mode`} value={mode} onChange={(e) => setMode(e.target.value)}>
                  {harness?.collaboration_modes.map((m) => (
                    <option key={m} value={m}>
                      {m}
                    </option>
                  ))}
                </select>
              </div>
            </div>
          )}
        </fieldset>

        <div className="field">
          <label htmlFor={`${ids}-branch`}>
            Base branch <span className="muted">(optional)</span>
          </label>
          <input
            id={`${ids}-branch`}
            value={branch}
            maxLength={256}
            autoComplete="off"
            placeholder={repository?.default_branch ?? 'the repository’s default branch'}
            onChange={(e) => setBranch(e.target.value)}
          />
        </div>

        {failure && (
          <p role="alert" id={errorId} className="form-error" data-testid="form-error">
            {failure}
          </p>
        )}
        <button type="submit" disabled={submitting} aria-busy={submitting}>
          {submitting ? 'Creating…' : 'Create thread'}
        </button>
      </form>
    </section>
  );
}
