// Which run each Claude Code session is in now. Claude Code tells the model nothing of the
// client's but its session (the `x-claude-code-session-id` header); the runner's Claude harness
// reports each turn's run here (`onTurn`), and the demo model reads it back per request.

export class DemoRuns {
  private readonly bySession = new Map<string, string>();

  /** A turn of `sessionId` starts in `runId`, or ends (null). */
  readonly onTurn = (sessionId: string, runId: string | null): void => {
    if (runId === null) this.bySession.delete(sessionId);
    else this.bySession.set(sessionId, runId);
  };

  runOf(sessionId: string | null): string | null {
    return sessionId === null ? null : (this.bySession.get(sessionId) ?? null);
  }
}
