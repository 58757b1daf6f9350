import { pathUnderBase, type ModelDialect } from './dialect.js';

// What a jailed harness (Claude Code) may ask of Anthropic's Messages API through the runner's
// proxy (../model-proxy.ts), and what each request it forwards is billed as. The endpoint's base
// is the host (`https://api.anthropic.com`), as ANTHROPIC_BASE_URL names it; the paths carry `/v1`.

/**
 * The requests Claude Code makes: a turn (`?beta=true` when it uses betas, which it always does),
 * a token count, the model list. Not the rest of the API the key opens: files, batches, skills,
 * the organisation's administration.
 */
const ALLOWED: readonly { method: string; path: RegExp; query: Record<string, RegExp> }[] = [
  { method: 'POST', path: /^\/v1\/messages(\/count_tokens)?$/, query: { beta: /^true$/ } },
  {
    method: 'GET',
    path: /^\/v1\/models(\/[A-Za-z0-9._:-]+)?$/,
    query: { beta: /^true$/, limit: /^\d{1,4}$/, after_id: /^[A-Za-z0-9._:-]+$/, before_id: /^[A-Za-z0-9._:-]+$/ },
  },
];

function allowed(method: string, url: string, basePath: string): boolean {
  const at = url.indexOf('?');
  const rest = pathUnderBase(at < 0 ? url : url.slice(0, at), basePath);
  if (rest === null) return false;
  const rule = ALLOWED.find((r) => r.method === method && r.path.test(rest));
  if (!rule) return false;
  // The query is forwarded as written, so it holds only what the rule names, once each, unencoded.
  const query = at < 0 ? '' : url.slice(at + 1);
  if (query === '') return true;
  const seen = new Set<string>();
  return query.split('&').every((pair) => {
    const [name = '', value = '', extra] = pair.split('=');
    if (extra !== undefined || seen.has(name) || !Object.hasOwn(rule.query, name)) return false;
    seen.add(name);
    return rule.query[name]!.test(value);
  });
}

/**
 * The betas forwarded; the others are removed from `anthropic-beta`. A beta can switch on what the
 * provider does for the account beyond the turn: read its files (`files-api-*`), call servers
 * (`mcp-*`), run code or skills, search or fetch the web, run another model (`advisor-tool-*`,
 * `server-side-fallback-*`), or bill more per token (`fast-mode-*`, `context-1m-*`,
 * `extended-cache-ttl-*`). The body checks refuse most of these by their fields, but a new beta
 * brings new fields; so this is the list of those Claude Code 2.1.328 sends on every turn
 * (measured), and the token count's and structured output's, which only shape the answer. A beta
 * a newer CLI needs is added here once read.
 */
const BETAS = new Set([
  'claude-code-20250219',
  'interleaved-thinking-2025-05-14',
  'context-management-2025-06-27',
  'mid-conversation-tool-changes-2026-07-01',
  'thinking-token-count-2026-05-13',
  'advanced-tool-use-2025-11-20',
  'effort-2025-11-24',
  'thinking-display-updates-2026-08-18',
  'token-counting-2024-11-01',
  'structured-outputs-2025-12-15',
]);

function screenHeaders(headers: Record<string, string | string[]>): string[] {
  const asked = headers['anthropic-beta'];
  if (asked === undefined) return [];
  const betas = (Array.isArray(asked) ? asked.join(',') : asked)
    .split(',')
    .map((beta) => beta.trim())
    .filter((beta) => beta !== '');
  const kept = betas.filter((beta) => BETAS.has(beta));
  if (kept.length > 0) headers['anthropic-beta'] = kept.join(',');
  else delete headers['anthropic-beta'];
  return betas.filter((beta) => !BETAS.has(beta));
}

/** Server tools (web search and fetch, code execution, MCP toolsets…) have a type; a harness's own have none, or `custom`. */
const HARNESS_TOOL_TYPES = new Set([undefined, 'custom']);

/** Blocks a harness that runs its own tools never sends: the provider's tool calls and their results, uploads to its container. */
function refusedBlock(type: string): string | null {
  if (type === 'container_upload') return 'container_upload puts a file of the account in a container';
  if (
    type === 'server_tool_use' ||
    type === 'mcp_tool_use' ||
    (type.endsWith('_tool_result') && type !== 'tool_result')
  )
    return `${type} is a block of the provider’s tools`;
  return null;
}

/**
 * Why a Messages request (a turn or a token count) is not one a harness makes, or null. It must not
 * make the provider fetch a URL (an image or document by URL, an MCP server: a way out past the
 * egress policy), read what the key's account stores (files, a container's state), or run tools
 * of the provider's. The messages and the system prompt are checked throughout (a tool's result
 * nests blocks as a message does), but not the input of the model's own tool calls, which the
 * provider does not act on.
 */
export function messagesRequestProblem(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the body is not a JSON object';
  const request = body as Record<string, unknown>;
  if (request.mcp_servers !== undefined && request.mcp_servers !== null)
    return 'mcp_servers makes the provider call a server';
  if (request.container !== undefined && request.container !== null)
    return 'container runs code with the account’s state';
  if (request.tools !== undefined && request.tools !== null) {
    if (!Array.isArray(request.tools)) return 'tools is not a list';
    for (const tool of request.tools as { type?: unknown }[]) {
      if (typeof tool !== 'object' || tool === null) return 'a tool is not an object';
      if (!HARNESS_TOOL_TYPES.has(tool.type as string | undefined))
        return `tool type ${JSON.stringify(tool.type)} is the provider’s`;
    }
  }
  return valueProblem(request.system) ?? valueProblem(request.messages);
}

function valueProblem(value: unknown): string | null {
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = valueProblem(item);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const node = value as Record<string, unknown>;
  if (typeof node.type === 'string') {
    const problem = refusedBlock(node.type);
    if (problem) return problem;
  }
  for (const [key, child] of Object.entries(node)) {
    if (child === undefined || child === null) continue;
    if (key === 'file_id') return 'file_id reads a file of the account';
    // An image's or a document's source: inline (base64, text, content) is the body's own; a
    // `url` is fetched by the provider and a `file` read from the account. A search result's
    // source is a string that names where its text came from, fetched by no one.
    if (key === 'source' && typeof child === 'object') {
      const kind = (child as { type?: unknown }).type;
      if (kind === 'url') return 'a source of type url makes the provider fetch it';
      if (kind === 'file') return 'a source of type file reads a file of the account';
    }
    if (key === 'input' && node.type === 'tool_use') continue;
    const problem = valueProblem(child);
    if (problem) return problem;
  }
  return null;
}

export const messagesApi: ModelDialect = {
  allowed,
  bodyProblem: messagesRequestProblem,
  // `service_tier`: `auto` draws on the account's Priority Tier commitment; `speed`: fast mode bills
  // more per token; `inference_geo`: inference kept in one region bills more. Each is the
  // operator's to choose, not the agent's. `max_tokens`, `thinking` and effort are the harness's
  // loop's, as the number of turns is.
  billingFields: ['model', 'service_tier', 'speed', 'inference_geo'],
  billingRewritten:
    'a sandbox request asked for another model, service tier, speed or inference region; forwarded as the run’s model with the account’s defaults',
  keyHeaders: ['authorization', 'x-api-key'],
  keyHeader: (apiKey) => ['x-api-key', apiKey],
  screenHeaders,
};
