import { Link } from 'react-router';

export function NotFoundPage() {
  return (
    <section className="page">
      <h1>Not here</h1>
      <p>
        The console has no page at this address. <Link to="/">Back to your work</Link>.
      </p>
    </section>
  );
}
