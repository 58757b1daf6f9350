import { NavLink } from 'react-router';
import './settings.css';

/** The settings pages, one link each; the current one is marked for screen readers by NavLink. */
export function SettingsNav() {
  return (
    <nav aria-label="Settings" className="settings-nav">
      <NavLink to="/settings/keys">API keys</NavLink>
      <NavLink to="/settings/github">GitHub</NavLink>
    </nav>
  );
}
