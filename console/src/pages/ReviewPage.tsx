import { useCallback, useEffect, useMemo, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { api } from '../api/client.js';
import type { components } from '../api/generated/schema.js';
import { When } from '../components/When.js';
import { DiffView } from '../review/DiffView.js';
import { parseUnifiedDiff } from '../review/unified-diff.js';
import './review.css';
import { useLoad } from '../api/useLoad.js';

type Evidence = components['schemas']['ReviewEvidence'];
type Publication = NonNullable<Evidence['publication']>;
type ProjectRepository = components['schemas']['WorkList']['projects'][number]['repositories'][number];

/** Pages of the work list read at most, looking for the thread's project. */
const WORK_PAGES_MAX = 20;

const DIFF_STATUS: Record<string, string> = {
  ready: 'The candidate is ready for review.',
  pending: 'A run is still working: this is the latest candidate so far.',
  no_sandbox: 'No run has produced a candidate yet.',
  error: 'The latest candidate could not be made; the previous one is shown if there was one.',
};

/** An address from the provider as a link only when it is a web address (never `javascript:`). */
function safeHref(url: string | null | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

function readWorkPage(cursor: string | null, signal: AbortSignal) {
  return api.GET('/v1/work', { params: { query: { limit: 200, ...(cursor ? { cursor } : {}) } }, signal });
}

/** The thread's project's repositories: its project_id, found in the pages of GET /v1/work. */
async function projectRepositories(
  threadId: string,
  signal: AbortSignal,
): Promise<{ repositories: ProjectRepository[] } | { status: number }> {
  const thread = await api.GET('/v1/threads/{id}', { params: { path: { id: threadId } }, signal });
  if (!thread.data) return { status: thread.response.status };
  let cursor: string | null = null;
  for (let page = 0; page < WORK_PAGES_MAX; page++) {
    const work = await readWorkPage(cursor, signal);
    if (!work.data) return { status: work.response.status };
    const project = work.data.projects.find((p) => p.id === thread.data.project_id);
    if (project) return { repositories: project.repositories };
    cursor = work.data.next_cursor ?? null;
    if (!cursor) break;
  }
  return { status: 404 };
}

/**
 * Review evidence of one of a thread's repositories: line statistics, the files, the diff of the
 * candidate, and the pull request with its checks. `?repository=` names the project repository;
 * without it, the project's primary one.
 */
export function ReviewPage({ onSignedOut }: { onSignedOut: () => void }) {
  const { id = '' } = useParams();
  const [search] = useSearchParams();
  const wanted = search.get('repository');
  const [repositories, setRepositories] = useState<ProjectRepository[] | null>(null);
  const [evidence, setEvidence] = useState<Evidence | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);

  const repositoryId = wanted ?? repositories?.[0]?.id ?? null;

  useEffect(() => {
    const abort = new AbortController();
    projectRepositories(id, abort.signal).then(
      (found) => {
        if ('status' in found) {
          if (found.status === 401) return onSignedOut();
          return setFailure(found.status === 404 ? 'No such thread.' : `HTTP ${found.status}`);
        }
        if (found.repositories.length === 0) return setFailure('This thread has no repository to review.');
        setRepositories(found.repositories);
      },
      (err: unknown) => {
        if (!abort.signal.aborted) setFailure(String(err));
      },
    );
    return () => abort.abort();
  }, [id, onSignedOut]);

  const load = useCallback(
    async (signal?: AbortSignal) => {
      if (!repositoryId) return;
      setLoading(true);
      try {
        const { data, response } = await api.GET('/v1/threads/{id}/review', {
          params: { path: { id }, query: { project_repository_id: repositoryId } },
          ...(signal ? { signal } : {}),
        });
        if (response.status === 401) return onSignedOut();
        if (!data) {
          return setFailure(
            response.status === 404 ? 'No review for this thread and repository.' : `HTTP ${response.status}`,
          );
        }
        setFailure(null);
        setEvidence(data);
      } finally {
        setLoading(false);
      }
    },
    [id, repositoryId, onSignedOut],
  );

  useLoad(load, setFailure);

  const repository = repositories?.find((r) => r.id === repositoryId);

  return (
    <section aria-labelledby="review-title" className="page review">
      <p>
        <Link to={`/threads/${encodeURIComponent(id)}`}>← Thread</Link>
      </p>
      <h1 id="review-title">Review{repository ? ` · ${repository.full_name}` : ''}</h1>
      {repositories && repositories.length > 1 && (
        <nav aria-label="Repositories of this thread" className="review-repos">
          <ul>
            {repositories.map((r) => (
              <li key={r.id}>
                <Link
                  to={`?repository=${encodeURIComponent(r.id)}`}
                  aria-current={r.id === repositoryId ? 'page' : undefined}
                >
                  {r.full_name}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      )}
      {failure && <p role="alert">{failure}</p>}
      {!evidence && !failure && <p aria-busy="true">Loading…</p>}
      {evidence && <EvidenceView evidence={evidence} />}
      {evidence && (
        <button
          type="button"
          disabled={loading}
          onClick={() => void load().catch((err: unknown) => setFailure(String(err)))}
        >
          {loading ? 'Refreshing…' : 'Refresh'}
        </button>
      )}
    </section>
  );
}

function EvidenceView({ evidence }: { evidence: Evidence }) {
  const { diff, stats, publication } = evidence;
  const parsed = useMemo(() => parseUnifiedDiff(diff.diff), [diff.diff]);
  // The files the diff shows get an anchor; the list links to them.
  const shown = new Set(parsed.files.map((f) => f.path));

  return (
    <>
      <p data-testid="diff-status">{DIFF_STATUS[diff.status] ?? diff.status}</p>
      <dl className="facts" data-testid="review-stats">
        <div>
          <dt>Added</dt>
          <dd className="added">{`+${stats.additions}`}</dd>
        </div>
        <div>
          <dt>Removed</dt>
          <dd className="removed">{`−${stats.deletions}`}</dd>
        </div>
        <div>
          <dt>Files</dt>
          <dd>{diff.files.length}</dd>
        </div>
        {diff.candidate_revision && (
          <div>
            <dt>Candidate</dt>
            <dd>
              <code title={diff.candidate_revision}>{diff.candidate_revision.slice(0, 12)}</code>
            </dd>
          </div>
        )}
      </dl>

      {diff.truncated && (
        <p className="truncated" role="note" data-testid="truncated">
          This diff was cut at its size limit: the last file shown may end early and later files are missing from it.
          The statistics and the list of files below are complete.
        </p>
      )}

      <PullRequest publication={publication} />

      <section aria-labelledby="files-title">
        <h2 id="files-title">Files</h2>
        {diff.files.length === 0 ? (
          <p className="muted">No files changed.</p>
        ) : (
          <ul className="review-files" data-testid="review-files">
            {diff.files.map((file) => (
              <li key={file.path}>
                <span className={`file-status status-${file.status}`}>{file.status}</span>{' '}
                {shown.has(file.path) ? (
                  <a href={`#${fileAnchor(file.path)}`}>{file.path}</a>
                ) : (
                  <span>{file.path}</span>
                )}
              </li>
            ))}
          </ul>
        )}
      </section>

      <section aria-labelledby="diff-title">
        <h2 id="diff-title">Diff</h2>
        <DiffView parsed={parsed} anchorOf={fileAnchor} />
      </section>
    </>
  );
}

function fileAnchor(path: string): string {
  return `file-${encodeURIComponent(path)}`;
}

function PullRequest({ publication }: { publication: Publication | null }) {
  if (!publication) {
    return (
      <section aria-labelledby="pr-title">
        <h2 id="pr-title">Pull request</h2>
        <p className="muted">No pull request has been opened yet.</p>
      </section>
    );
  }
  const { checks, commitStatuses } = publication;
  return (
    <section aria-labelledby="pr-title" data-testid="pull-request">
      <h2 id="pr-title">Pull request</h2>
      <p>
        <a href={safeHref(publication.prUrl)} rel="noreferrer" target="_blank">
          {`#${publication.prNumber}`}
        </a>{' '}
        <span className={`pr-state state-${publication.state}`}>{publication.state}</span>{' '}
        <span className="muted">
          {`${publication.repository.owner}/${publication.repository.name} · ${publication.branch}`}
        </span>
      </p>
      <dl className="facts">
        <div>
          <dt>Checks</dt>
          <dd>{publication.checksAggregate}</dd>
        </div>
        <div>
          <dt>Mergeable</dt>
          <dd>{publication.mergeable === null ? 'unknown' : publication.mergeable ? 'yes' : 'no'}</dd>
        </div>
        <div>
          <dt>Synced</dt>
          <dd>
            <When at={publication.lastSyncedAt} />
          </dd>
        </div>
      </dl>
      {checks.length + commitStatuses.length > 0 && (
        <ul className="checks" data-testid="checks">
          {checks.map((check) => (
            <li key={`check-${check.id}`}>
              <CheckName name={check.name} url={check.detailsUrl} />
              <span className={`check-result result-${check.conclusion ?? check.status}`}>
                {check.conclusion ? `${check.status} · ${check.conclusion}` : check.status}
              </span>
            </li>
          ))}
          {commitStatuses.map((status) => (
            <li key={`status-${status.id}`}>
              <CheckName name={status.context} url={status.targetUrl} />
              <span className={`check-result result-${status.state}`}>{status.state}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function CheckName({ name, url }: { name: string; url: string | null }) {
  const href = safeHref(url);
  return href ? (
    <a href={href} rel="noreferrer" target="_blank" className="check-name">
      {name}
    </a>
  ) : (
    <span className="check-name">{name}</span>
  );
}
