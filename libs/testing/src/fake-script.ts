// How a stateless fake model picks its answer, shared by the fake Responses API (Codex) and the
// fake Messages API (Claude Code): both see only the request, so a turn's progress is the number
// of tool results since the user last spoke, and a thread's script is picked by its prompts.

/**
 * Step n of a turn answers the request that carries n tool results since the last user message.
 * Past the last step it repeats the last one.
 */
export function stepOfTurn<Step>(steps: readonly Step[], toolResultsSinceLastUser: number): Step {
  const step = steps[Math.min(toolResultsSinceLastUser, steps.length - 1)];
  if (step === undefined) throw new Error('turnScript needs at least one step');
  return step;
}

/**
 * The script of the newest user text that starts with a registered prefix (so a follow-up without
 * a prefix of its own continues its thread's script), or undefined.
 */
export function scriptOfPrompt<Script>(
  scripts: ReadonlyMap<string, Script>,
  userTexts: readonly string[],
): Script | undefined {
  for (const text of [...userTexts].reverse()) {
    for (const [prefix, script] of scripts) if (text.startsWith(prefix)) return script;
  }
  return undefined;
}
