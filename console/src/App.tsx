import { useCallback, useEffect, useState } from 'react';
import { Navigate, Route } from 'react-router';
import { fetchSession, type Session } from './api/session.js';
import { PageRoutes } from './components/ErrorBoundary.js';
import { Header } from './components/Header.js';
import { NewThreadPage } from './pages/NewThreadPage.js';
import { NotFoundPage } from './pages/NotFoundPage.js';
import { ApiKeysPage } from './pages/settings/ApiKeysPage.js';
import { GitHubPage } from './pages/settings/GitHubPage.js';
import { ReviewPage } from './pages/ReviewPage.js';
import { SignedOutPage } from './pages/SignedOutPage.js';
import { ThreadPage } from './pages/ThreadPage.js';
import { WorkPage } from './pages/WorkPage.js';

/** The shell: who is signed in decides between the pages and the sign-in instructions. */
export function App() {
  const [session, setSession] = useState<Session>({ state: 'loading' });
  const [failure, setFailure] = useState<string | null>(null);

  useEffect(() => {
    const abort = new AbortController();
    fetchSession(abort.signal).then(setSession, (err: unknown) => {
      if (!abort.signal.aborted) setFailure(err instanceof Error ? err.message : String(err));
    });
    return () => abort.abort();
  }, []);

  // A page whose request is refused (the session expired meanwhile) sends the user to sign in again.
  const signedOut = useCallback(() => setSession({ state: 'signed-out' }), []);

  return (
    <>
      <Header session={session} onSignedOut={signedOut} />
      <main id="main">
        {failure ? (
          <p role="alert">The gateway did not answer as expected ({failure}). Reload to try again.</p>
        ) : session.state === 'loading' ? (
          <p aria-busy="true">Loading…</p>
        ) : session.state === 'signed-out' ? (
          <SignedOutPage />
        ) : (
          <PageRoutes>
            <Route path="/" element={<WorkPage onSignedOut={signedOut} />} />
            <Route path="/threads/:id" element={<ThreadPage onSignedOut={signedOut} />} />
            <Route path="/settings" element={<Navigate to="/settings/keys" replace />} />
            <Route path="/settings/keys" element={<ApiKeysPage onSignedOut={signedOut} />} />
            <Route path="/settings/github" element={<GitHubPage onSignedOut={signedOut} />} />
            <Route path="/new" element={<NewThreadPage onSignedOut={signedOut} />} />
            <Route path="/threads/:id/review" element={<ReviewPage onSignedOut={signedOut} />} />
            <Route path="*" element={<NotFoundPage />} />
          </PageRoutes>
        )}
      </main>
    </>
  );
}
