import { useCallback, useEffect, useRef, useState, type FormEvent } from 'react';
import { api, problemOf } from '../../api/client.js';
import type { paths } from '../../api/generated/schema.js';
import { When } from '../../components/When.js';
import { SettingsNav } from './SettingsNav.js';
import { useLoad } from '../../api/useLoad.js';

type ApiKey = paths['/v1/keys']['get']['responses'][200]['content']['application/json']['keys'][number];

/** The new key, shown once: the gateway keeps only its hash. */
interface Created {
  name: string;
  key: string;
}

/**
 * The signed-in user's API keys (GET /v1/keys, browser session only): made here, shown once,
 * revoked here after a confirmation. A refused request says what the gateway said.
 */
export function ApiKeysPage({ onSignedOut }: { onSignedOut: () => void }) {
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [created, setCreated] = useState<Created | null>(null);
  // Where focus goes once a revoked key's buttons are gone: the sentence saying it is revoked.
  const statusLine = useRef<HTMLParagraphElement>(null);

  const load = useCallback(
    async (signal?: AbortSignal) => {
      const { data, error, response } = await api.GET('/v1/keys', signal ? { signal } : {});
      if (response.status === 401) return onSignedOut();
      if (!data) return setFailure(`The keys could not be read: ${problemOf(error, response)}`);
      setKeys(data.keys);
    },
    [onSignedOut],
  );

  useLoad(load, setFailure);

  const reload = () => load().catch((err: unknown) => setFailure(String(err)));

  const active = keys?.filter((key) => key.revoked_at === null) ?? [];
  const revoked = keys?.filter((key) => key.revoked_at !== null) ?? [];

  return (
    <section aria-labelledby="keys-title" className="page settings">
      <SettingsNav />
      <h1 id="keys-title">API keys</h1>
      <p>
        A key lets a script or another program use the API as you: send it as <code>Authorization: Bearer …</code>. Keys
        are managed here only, from a signed-in browser.
      </p>
      <CreateKeyForm
        onSignedOut={onSignedOut}
        onCreated={(made) => {
          setCreated(made);
          setStatus(null);
          void reload();
        }}
      />
      {created && (
        <NewKey
          created={created}
          onDone={() => {
            setCreated(null);
            document.getElementById('key-name')?.focus();
          }}
        />
      )}
      <p role="status" className="settings-status" ref={statusLine} tabIndex={-1}>
        {status}
      </p>
      {failure && <p role="alert">{failure}</p>}
      {keys === null && !failure && <p aria-busy="true">Loading…</p>}
      {keys !== null && (
        <>
          <h2>Active keys</h2>
          {active.length === 0 ? (
            <p>No active keys.</p>
          ) : (
            <ul className="keys" aria-label="Active keys">
              {active.map((key) => (
                <KeyRow
                  key={key.id}
                  apiKey={key}
                  onSignedOut={onSignedOut}
                  onRevoked={() => {
                    setStatus(`Key “${key.name}” (${key.prefix}…) revoked.`);
                    statusLine.current?.focus();
                    void reload();
                  }}
                />
              ))}
            </ul>
          )}
          {revoked.length > 0 && (
            <>
              <h2>Revoked keys</h2>
              <ul className="keys" aria-label="Revoked keys">
                {revoked.map((key) => (
                  <KeyRow key={key.id} apiKey={key} onSignedOut={onSignedOut} onRevoked={() => undefined} />
                ))}
              </ul>
            </>
          )}
        </>
      )}
    </section>
  );
}

function CreateKeyForm({ onCreated, onSignedOut }: { onCreated: (made: Created) => void; onSignedOut: () => void }) {
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setFailure(null);
    api
      .POST('/v1/keys', { body: { name } })
      .then(({ data, error, response }) => {
        if (response.status === 401) return onSignedOut();
        if (!data) return setFailure(`No key was made: ${problemOf(error, response)}`);
        setName('');
        onCreated({ name: data.api_key.name, key: data.key });
      })
      .catch((err: unknown) => setFailure(`No key was made: ${String(err)}`))
      .finally(() => setBusy(false));
  };

  return (
    <form className="create-key" onSubmit={submit} aria-labelledby="create-key-title">
      <h2 id="create-key-title">New key</h2>
      <label htmlFor="key-name">Name</label>
      <div className="row">
        <input
          id="key-name"
          name="name"
          value={name}
          onChange={(event) => setName(event.target.value)}
          required
          maxLength={100}
          autoComplete="off"
          placeholder="What the key is for"
        />
        <button type="submit" disabled={busy || name.trim() === ''}>
          Create key
        </button>
      </div>
      {failure && <p role="alert">{failure}</p>}
    </form>
  );
}

/** The key just made, once: a read-only field to copy it from, focused so the keyboard is there. */
function NewKey({ created, onDone }: { created: Created; onDone: () => void }) {
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<string | null>(null);

  useEffect(() => {
    field.current?.focus();
    field.current?.select();
  }, [created]);

  const copy = () => {
    const select = () => {
      field.current?.focus();
      field.current?.select();
      setCopied('Selected: press Ctrl+C (⌘C on a Mac) to copy it.');
    };
    // The clipboard API needs a secure context and the page's focus; without it, select the text.
    if (!navigator.clipboard) return select();
    navigator.clipboard.writeText(created.key).then(() => setCopied('Copied to the clipboard.'), select);
  };

  return (
    <div className="new-key" role="region" aria-labelledby="new-key-title">
      <h2 id="new-key-title">{`Key “${created.name}” created`}</h2>
      <p>
        <strong>Copy it now: it will not be shown again.</strong> Only a fingerprint of it is kept.
      </p>
      <label htmlFor="new-key-value">Your new API key</label>
      <div className="row">
        <input
          id="new-key-value"
          ref={field}
          readOnly
          value={created.key}
          spellCheck={false}
          autoComplete="off"
          onFocus={(event) => event.currentTarget.select()}
        />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p role="status">{copied}</p>
      <button type="button" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

function KeyRow({
  apiKey,
  onRevoked,
  onSignedOut,
}: {
  apiKey: ApiKey;
  onRevoked: () => void;
  onSignedOut: () => void;
}) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const revokeButton = useRef<HTMLButtonElement>(null);
  const cancelButton = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);

  // Focus follows the confirmation: onto its safe choice when asked, back to Revoke when cancelled.
  useEffect(() => {
    if (confirming) cancelButton.current?.focus();
    else if (asked.current) revokeButton.current?.focus();
  }, [confirming]);

  const revoke = () => {
    setBusy(true);
    setFailure(null);
    api
      .DELETE('/v1/keys/{id}', { params: { path: { id: apiKey.id } } })
      .then(({ error, response }) => {
        if (response.status === 401) return onSignedOut();
        if (response.status !== 204) return setFailure(`Not revoked: ${problemOf(error, response)}`);
        onRevoked();
      })
      .catch((err: unknown) => setFailure(`Not revoked: ${String(err)}`))
      .finally(() => setBusy(false));
  };

  return (
    <li className="key" data-testid="api-key" data-prefix={apiKey.prefix}>
      <div className="key-title">
        <strong>{apiKey.name}</strong> <code>{`${apiKey.prefix}…`}</code>
      </div>
      <dl className="facts">
        <div>
          <dt>Created</dt>
          <dd>
            <When at={apiKey.created_at} />
          </dd>
        </div>
        <div>
          <dt>Last used</dt>
          <dd>{apiKey.last_used_at ? <When at={apiKey.last_used_at} /> : 'never'}</dd>
        </div>
        {apiKey.revoked_at && (
          <div>
            <dt>Revoked</dt>
            <dd>
              <When at={apiKey.revoked_at} />
            </dd>
          </div>
        )}
      </dl>
      {apiKey.revoked_at === null &&
        (confirming ? (
          <div className="confirm" role="group" aria-label={`Revoke key ${apiKey.name}?`}>
            <p>{`Revoke “${apiKey.name}”? Programs using it are refused from now on; this cannot be undone.`}</p>
            <button type="button" className="danger" onClick={revoke} disabled={busy}>
              Yes, revoke
            </button>
            <button
              type="button"
              ref={cancelButton}
              onClick={() => {
                asked.current = true;
                setConfirming(false);
              }}
              disabled={busy}
            >
              Cancel
            </button>
          </div>
        ) : (
          <button
            type="button"
            ref={revokeButton}
            onClick={() => setConfirming(true)}
            aria-label={`Revoke key ${apiKey.name}`}
          >
            Revoke
          </button>
        ))}
      {failure && <p role="alert">{failure}</p>}
    </li>
  );
}
