import { Link } from 'react-router';
import type { Session } from '../api/session.js';
import { SignOutButton } from './SignOutButton.js';

export function Header({ session, onSignedOut }: { session: Session; onSignedOut: () => void }) {
  return (
    <header className="header">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <Link to="/" className="brand">
        Threadwork
      </Link>
      {session.state === 'signed-in' && (
        <>
          <nav aria-label="Main">
            <Link to="/">Work</Link>
            <Link to="/new">New thread</Link>
            <Link to="/settings/keys">Settings</Link>
          </nav>
          <span className="user" data-testid="user">
            {`Signed in as ${session.login}`}
          </span>
          <SignOutButton onSignedOut={onSignedOut} />
        </>
      )}
    </header>
  );
}
