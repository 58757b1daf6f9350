import { useEffect, useState } from 'react';
import { Link, useParams } from 'react-router';
import { api } from '../api/client.js';
import { When } from '../components/When.js';

type Thread = NonNullable<Awaited<ReturnType<typeof readThread>>['data']>;

function readThread(id: string, signal: AbortSignal) {
  return api.GET('/v1/threads/{id}', { params: { path: { id } }, signal });
}

/** One thread's record; its conversation and runs come to the console later. */
export function ThreadPage({ onSignedOut }: { onSignedOut: () => void }) {
  const { id = '' } = useParams();
  const [thread, setThread] = useState<Thread | null>(null);
  const [failure, setFailure] = useState<string | null>(null);

  useEffect(() => {
    const abort = new AbortController();
    readThread(id, abort.signal).then(
      ({ data, response }) => {
        if (response.status === 401) return onSignedOut();
        if (!data) return setFailure(response.status === 404 ? 'No such thread.' : `HTTP ${response.status}`);
        setThread(data);
      },
      (err: unknown) => {
        if (!abort.signal.aborted) setFailure(String(err));
      },
    );
    return () => abort.abort();
  }, [id, onSignedOut]);

  return (
    <section aria-labelledby="thread-title" className="page">
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
            <dd>{thread.status}</dd>
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
            <dd>{`${thread.harness} · ${thread.model}`}</dd>
          </div>
          <div>
            <dt>Created</dt>
            <dd>
              <When at={thread.created_at} />
            </dd>
          </div>
        </dl>
      )}
    </section>
  );
}
