/** What a visitor without a session sees: how to get one. */
export function SignedOutPage() {
  return (
    <section aria-labelledby="signed-out-title" className="page">
      <h1 id="signed-out-title">Sign in to Threadwork</h1>
      <p>
        You are not signed in. The console signs you in from a login link made for you by whoever runs this Threadwork:
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
