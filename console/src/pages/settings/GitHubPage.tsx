import { useCallback, useEffect, useState } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { api, problemOf } from '../../api/client.js';
import type { components } from '../../api/generated/schema.js';
import { SettingsNav } from './SettingsNav.js';
import { challengeOf, newVerifier, VERIFIER_STORAGE_KEY } from './pkce.js';
import { useLoad } from '../../api/useLoad.js';

type Connection = components['schemas']['ProviderConnection'];

/** Where GitHub's setup callback brings the browser back to, with the outcome in the query. */
export const GITHUB_SETTINGS_PATH = '/settings/github';

/** What the setup callback appended to `return_to` (services/repohost `setupRedirect`). */
interface SetupReturn {
  outcome: string;
  error: string | null;
  installationId: string | null;
  code: string | null;
}

/** What an `outcome=error` reason means, for the user. */
const SETUP_ERRORS: Record<string, string> = {
  invalid_state: 'the installation link had expired or was already used; start again',
  missing_installation: 'GitHub did not say which installation was made',
  installation_not_found: 'the installation could not be found on GitHub',
  unverified_installation: 'GitHub did not confirm who installed the app',
  not_installation_admin: 'the GitHub user who came back does not administer the account the app was installed on',
  github_account_mismatch: 'that GitHub account is already linked to another Threadwork user',
  github_unavailable: 'GitHub did not answer; try again later',
};

type Notice = { kind: 'ok' | 'problem'; text: string };

/** Codes already being redeemed by this page, so that a second mount does not spend one twice. */
const redeeming = new Set<string>();

/**
 * The GitHub connection (GET /v1/repohost/connection), read-only, and a button that starts
 * installing the GitHub App. Back from GitHub, the outcome in the query becomes a notice, and an
 * installation's one-time code is redeemed with the verifier this tab kept.
 */
export function GitHubPage({ onSignedOut }: { onSignedOut: () => void }) {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const [connection, setConnection] = useState<Connection | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notice, setNotice] = useState<Notice | null>(null);
  const [installing, setInstalling] = useState(false);
  const [installFailure, setInstallFailure] = useState<string | null>(null);

  const load = useCallback(
    async (signal?: AbortSignal) => {
      const { data, error, response } = await api.GET('/v1/repohost/connection', signal ? { signal } : {});
      if (response.status === 401) return onSignedOut();
      if (!data) return setFailure(`The connection could not be read: ${problemOf(error, response)}`);
      setConnection(data);
    },
    [onSignedOut],
  );

  useLoad(load, setFailure);

  // The setup callback's outcome: shown once, then taken out of the address (the code is a secret).
  const outcome = params.get('outcome');
  useEffect(() => {
    if (outcome === null) return;
    const back: SetupReturn = {
      outcome,
      error: params.get('error'),
      installationId: params.get('installation_id'),
      code: params.get('code'),
    };
    void navigate(GITHUB_SETTINGS_PATH, { replace: true });
    setNotice(noticeOf(back));
    if (back.outcome !== 'installed' || back.code === null || redeeming.has(back.code)) return;
    const code = back.code;
    const verifier = sessionStorage.getItem(VERIFIER_STORAGE_KEY);
    if (verifier === null) {
      setNotice({
        kind: 'problem',
        text: 'The GitHub App was installed, but this browser tab did not start the installation, so it cannot link it. Start again with “Install the GitHub App” here.',
      });
      return;
    }
    redeeming.add(code);
    api
      .POST('/v1/repohost/installations', { body: { code, code_verifier: verifier } })
      .then(({ data, error, response }) => {
        if (response.status === 401) return onSignedOut();
        if (!data) return setNotice({ kind: 'problem', text: `Not linked: ${problemOf(error, response)}` });
        sessionStorage.removeItem(VERIFIER_STORAGE_KEY);
        setNotice({ kind: 'ok', text: `GitHub App installed on ${data.installation.account} and linked to you.` });
        return load();
      })
      .catch((err: unknown) => setNotice({ kind: 'problem', text: `Not linked: ${String(err)}` }));
  }, [outcome, params, navigate, load, onSignedOut]);

  const install = () => {
    setInstalling(true);
    setInstallFailure(null);
    startInstall()
      .then((result) => {
        if (result === 'signed-out') return onSignedOut();
        if (result !== null) {
          setInstallFailure(`GitHub cannot be installed from here: ${result}`);
          setInstalling(false);
        }
      })
      .catch((err: unknown) => {
        setInstallFailure(`GitHub cannot be installed from here: ${err instanceof Error ? err.message : String(err)}`);
        setInstalling(false);
      });
  };

  return (
    <section aria-labelledby="github-title" className="page settings">
      <SettingsNav />
      <h1 id="github-title">GitHub</h1>
      {notice && (
        <p role={notice.kind === 'ok' ? 'status' : 'alert'} className={`notice notice-${notice.kind}`}>
          {notice.text}
        </p>
      )}
      {failure && <p role="alert">{failure}</p>}
      {connection === null && !failure && <p aria-busy="true">Loading…</p>}
      {connection && <ConnectionView connection={connection} />}
      <h2>Install the GitHub App</h2>
      <p>Installing the app on an account or organisation lets Threadwork work on the repositories you choose there.</p>
      <button type="button" onClick={install} disabled={installing}>
        Install the GitHub App
      </button>
      {installFailure && <p role="alert">{installFailure}</p>}
    </section>
  );
}

/**
 * An install session returning here (POST /v1/repohost/install-session, PKCE S256), then off to
 * GitHub. Null once the browser is leaving; else why not.
 */
async function startInstall(): Promise<string | 'signed-out' | null> {
  const verifier = newVerifier();
  const { data, error, response } = await api.POST('/v1/repohost/install-session', {
    body: {
      return_to: `${window.location.origin}${GITHUB_SETTINGS_PATH}`,
      code_challenge: await challengeOf(verifier),
    },
  });
  if (response.status === 401) return 'signed-out';
  if (!data) return problemOf(error, response);
  // Kept in this tab only, for the code GitHub's round trip brings back to this page.
  sessionStorage.setItem(VERIFIER_STORAGE_KEY, verifier);
  window.location.assign(data.install_url);
  return null;
}

// The query this page comes back with can be crafted by anyone who sends the user a link, so none
// of its text is shown: only outcomes and error codes repohost's setup callback appends, each in
// this console's own words, and a numeric installation id.
const UNKNOWN_RETURN =
  'GitHub came back with an answer this console does not know; nothing was linked. Start again with “Install the GitHub App” here.';

function noticeOf(back: SetupReturn): Notice {
  const installation =
    back.installationId && /^\d{1,20}$/.test(back.installationId) ? ` (installation ${back.installationId})` : '';
  switch (back.outcome) {
    case 'installed':
      return { kind: 'ok', text: `GitHub App installed${installation}; linking it…` };
    case 'requested':
      return {
        kind: 'ok',
        text: 'Installation requested: an owner of the organisation has been asked to approve it. Nothing to link until they do.',
      };
    case 'error': {
      const reason = back.error && Object.hasOwn(SETUP_ERRORS, back.error) ? SETUP_ERRORS[back.error] : undefined;
      if (!reason) return { kind: 'problem', text: UNKNOWN_RETURN };
      return { kind: 'problem', text: `The GitHub App was not linked${installation}: ${reason}.` };
    }
    default:
      return { kind: 'problem', text: UNKNOWN_RETURN };
  }
}

const STATUS_TEXT: Record<string, string> = {
  ready: 'Connected',
  not_connected: 'Not connected',
  not_configured: 'No GitHub App configured',
  error: 'Error',
};

function ConnectionView({ connection }: { connection: Connection }) {
  return (
    <>
      <dl className="facts connection" aria-label="Connection">
        <div>
          <dt>Status</dt>
          <dd data-testid="connection-status">
            {connection.status ? (STATUS_TEXT[connection.status] ?? connection.status) : '—'}
          </dd>
        </div>
        {connection.app_slug && (
          <div>
            <dt>App</dt>
            <dd>{connection.app_slug}</dd>
          </div>
        )}
        {connection.user && (
          <div>
            <dt>GitHub user</dt>
            <dd>{connection.user.login}</dd>
          </div>
        )}
      </dl>
      {connection.message && <p className="muted">{connection.message}</p>}
      <h2>Installations</h2>
      {connection.installations.length === 0 ? (
        <p>No installations yet.</p>
      ) : (
        <ul className="keys" aria-label="Installations">
          {connection.installations.map((installation) => (
            <li key={String(installation.id)} className="key" data-testid="installation">
              <div className="key-title">
                <strong>{installation.account}</strong> <span className="muted">{installation.target_type}</span>
              </div>
              <dl className="facts">
                <div>
                  <dt>Repositories</dt>
                  <dd>{installation.repository_selection === 'all' ? 'all' : 'selected'}</dd>
                </div>
                {installation.suspended && (
                  <div>
                    <dt>State</dt>
                    <dd>suspended</dd>
                  </div>
                )}
              </dl>
              {installation.manage_url.startsWith('https://') && (
                <a href={installation.manage_url} rel="noreferrer">
                  {`Manage ${installation.account} on GitHub`}
                </a>
              )}
            </li>
          ))}
        </ul>
      )}
      {connection.installation_requests.length > 0 && (
        <>
          <h2>Waiting for an owner</h2>
          <ul className="keys" aria-label="Installation requests">
            {connection.installation_requests.map((request) => (
              <li key={String(request.id)} className="key">
                <strong>{request.account}</strong> <span className="muted">{request.target_type}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}
