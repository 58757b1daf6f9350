import { Link } from 'react-router';
import type { Session } from '../api/session.js';

export function Header({ session }: { session: Session }) {
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
          </nav>
          <span className="user" data-testid="user">
            {session.login ? `Signed in as ${session.login}` : 'Signed in'}
          </span>
        </>
      )}
    </header>
  );
}
