import { useState } from 'react';
import { useNavigate } from 'react-router';
import { signOut } from '../api/session.js';
import './SignOutButton.css';

/** Ends the session (every session of the user) and lands on the signed-out page. */
export function SignOutButton({ onSignedOut }: { onSignedOut: () => void }) {
  const navigate = useNavigate();
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);

  const click = () => {
    setBusy(true);
    setFailure(null);
    signOut().then(
      () => {
        void navigate('/', { replace: true });
        onSignedOut();
      },
      (err: unknown) => {
        setBusy(false);
        setFailure(`Could not sign out: ${err instanceof Error ? err.message : String(err)}`);
      },
    );
  };

  return (
    <>
      <button type="button" className="sign-out" onClick={click} disabled={busy}>
        Sign out
      </button>
      {failure && (
        <p role="alert" className="sign-out-failure">
          {failure}
        </p>
      )}
    </>
  );
}
