import { useCallback, useState } from 'react';
import { Link } from 'react-router';
import { api, type Project, type WorkThread } from '../api/client.js';
import { When } from '../components/When.js';
import { useLoad } from '../api/useLoad.js';

/** Pages of GET /v1/work merged: a project whose threads span pages appears on each (merge by id). */
function merge(into: Project[], page: Project[]): Project[] {
  const byId = new Map(into.map((project) => [project.id, { ...project, threads: [...project.threads] }]));
  for (const project of page) {
    const known = byId.get(project.id);
    if (known) known.threads.push(...project.threads);
    else byId.set(project.id, { ...project, threads: [...project.threads] });
  }
  return [...byId.values()];
}

/** The signed-in user's projects with their threads, newest first, as GET /v1/work pages them. */
export function WorkPage({ onSignedOut }: { onSignedOut: () => void }) {
  const [projects, setProjects] = useState<Project[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);

  const load = useCallback(
    async (after: string | null, signal?: AbortSignal) => {
      const { data, response } = await api.GET('/v1/work', {
        params: { query: after ? { cursor: after } : {} },
        ...(signal ? { signal } : {}),
      });
      if (response.status === 401) return onSignedOut();
      if (!data) return setFailure(`the work list could not be read (HTTP ${response.status})`);
      setProjects((known) => merge(after ? (known ?? []) : [], data.projects));
      setCursor(data.next_cursor ?? null);
    },
    [onSignedOut],
  );

  const loadFirst = useCallback((signal: AbortSignal) => load(null, signal), [load]);
  useLoad(loadFirst, setFailure);

  return (
    <section aria-labelledby="work-title" className="page">
      <h1 id="work-title">Work</h1>
      <p>
        <Link to="/new">New thread</Link>
      </p>
      {failure && <p role="alert">{failure}</p>}
      {projects === null && !failure && <p aria-busy="true">Loading…</p>}
      {projects?.length === 0 && <p>No threads yet: start one with New thread.</p>}
      {projects?.map((project) => (
        <ProjectSection key={project.id} project={project} />
      ))}
      {cursor && (
        <button type="button" onClick={() => void load(cursor).catch((err: unknown) => setFailure(String(err)))}>
          Show older threads
        </button>
      )}
    </section>
  );
}

function ProjectSection({ project }: { project: Project }) {
  return (
    <section aria-labelledby={`project-${project.id}`} className="project">
      <h2 id={`project-${project.id}`}>
        {project.name} <span className="muted">{`${project.repository} · ${project.branch}`}</span>
      </h2>
      <ul className="threads">
        {project.threads.map((thread) => (
          <ThreadRow key={thread.id} thread={thread} />
        ))}
      </ul>
    </section>
  );
}

function ThreadRow({ thread }: { thread: WorkThread }) {
  return (
    <li className="thread" data-testid="thread">
      <Link to={`/threads/${encodeURIComponent(thread.id)}`} className="thread-link">
        {thread.prompt?.trim() || thread.id}
      </Link>
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
          <dt>Latest run</dt>
          <dd>{thread.latest_run?.status ?? '—'}</dd>
        </div>
        {(thread.additions !== undefined || thread.deletions !== undefined) && (
          <div>
            <dt>Changes</dt>
            <dd data-testid="thread-changes">
              <span className="added">{`+${thread.additions ?? 0}`}</span>{' '}
              <span className="deleted">{`−${thread.deletions ?? 0}`}</span>
            </dd>
          </div>
        )}
        <div>
          <dt>Updated</dt>
          <dd>
            <When at={thread.updated_at ?? thread.created_at} />
          </dd>
        </div>
      </dl>
    </li>
  );
}
