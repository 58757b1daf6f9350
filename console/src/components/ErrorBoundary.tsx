import { Component, type ReactNode } from 'react';
import { Routes, useLocation } from 'react-router';

interface Props {
  children: ReactNode;
  /** What stands in for the children once rendering them threw. */
  fallback: ReactNode;
  /** When this changes, the children are tried again (new text streamed in, another page). */
  resetKey?: unknown;
}

/**
 * Keeps one part of the page from taking the rest down with it: what the agent writes is
 * untrusted, and an item that fails to render shows `fallback` instead of blanking the console.
 */
export class ErrorBoundary extends Component<Props, { failed: boolean }> {
  override state = { failed: false };

  static getDerivedStateFromError(): { failed: boolean } {
    return { failed: true };
  }

  override componentDidUpdate(previous: Props) {
    if (this.state.failed && previous.resetKey !== this.props.resetKey) this.setState({ failed: false });
  }

  override render() {
    return this.state.failed ? this.props.fallback : this.props.children;
  }
}

/** One item of what an agent wrote (a message, a plan): on failure, says so in its place. */
export function ItemBoundary({ children, resetKey }: { children: ReactNode; resetKey?: unknown }) {
  return (
    <ErrorBoundary
      resetKey={resetKey}
      fallback={
        <p className="muted" role="status">
          This item could not be shown.
        </p>
      }
    >
      {children}
    </ErrorBoundary>
  );
}

/** The current page: on failure, says so and keeps the header; another page is tried afresh. */
export function PageBoundary({ children }: { children: ReactNode }) {
  const { pathname } = useLocation();
  return (
    <ErrorBoundary
      resetKey={pathname}
      fallback={<p role="alert">This page could not be shown. Reload to try again.</p>}
    >
      {children}
    </ErrorBoundary>
  );
}

/** The console's routes, each page inside a PageBoundary. */
export function PageRoutes({ children }: { children: ReactNode }) {
  return (
    <PageBoundary>
      <Routes>{children}</Routes>
    </PageBoundary>
  );
}
