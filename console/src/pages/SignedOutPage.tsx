import { useEffect, useState } from 'react';
import { api } from '../api/client.js';
import './SignedOutPage.css';

/**
 * Whether this Threadwork offers sign-in with GitHub (`GET /v1/auth/providers`); false until it
 * says so, and when it cannot be asked, so the button never leads to a 404.
 */
function useGitHubSignIn(): boolean {
  const [offered, setOffered] = useState(false);
  useEffect(() => {
    const controller = new AbortController();
    api
      .GET('/v1/auth/providers', { signal: controller.signal })
      .then(({ data }) => setOffered(data?.github === true))
      .catch(() => setOffered(false));
    return () => controller.abort();
  }, []);
  return offered;
}

/** What a visitor without a session sees: how to get one. */
export function SignedOutPage() {
  const github = useGitHubSignIn();
  return (
    <section aria-labelledby="signed-out-title" className="page">
      <h1 id="signed-out-title">Sign in to Threadwork</h1>
      {github && (
        <p>
          {/* A navigation, not a fetch: the gateway sends the browser on to GitHub and back. */}
          <a className="sign-in-github" href="/v1/auth/github">
            Sign in with GitHub
          </a>
        </p>
      )}
      <p>
        {github ? 'Or sign in' : 'You are not signed in. The console signs you in'} from a login link made for you by
        whoever runs this Threadwork:
      </p>
      <ul>
        <li>
          On a laptop, <code>npm start</code> prints a login link when the stack is up.
        </li>
        <li>
          Anywhere else, an operator runs <code>npm run admin -- login-link --user &lt;you&gt;</code> and sends you the
          link it prints.
        </li>
      </ul>
      <p>Open the link in this browser; it brings you back here signed in.</p>
    </section>
  );
}
