import { pathUnderBase, type ModelDialect } from './dialect.js';

// What a jailed harness (Codex) may ask of OpenAI's Responses API through the runner's proxy
// (../model-proxy.ts), and what each request it forwards is billed as: with the key added, a
// request's path and body are the agent's to write, so they are checked, and the billing fields
// set, here.

/** Tools a harness declares: its own, run in the jail. The provider's (web search, MCP servers, file search, code interpreter) reach places of the agent's choosing on the key's account. */
const HARNESS_TOOLS = new Set(['function', 'custom', 'namespace', 'local_shell']);

/** Types of content or items that make the provider read the account's storage, or fetch a URL. */
const REFUSED_TYPES: Record<string, string> = {
  item_reference: 'item_reference reads what the account stores',
  input_file: 'input_file reads a file of the account or a URL',
};

/** Fields that name something the provider fetches or reads on the account, wherever they appear. */
const REFUSED_FIELDS: Record<string, string> = {
  file_id: 'file_id reads a file of the account',
  file_url: 'file_url makes the provider fetch a URL',
  server_url: 'server_url makes the provider call a server',
  vector_store_ids: 'vector_store_ids reads what the account stores',
};

/**
 * Why a Responses request is not one a harness makes, or null. With the key added, the request's
 * body is the agent's to write: it must not make the provider fetch a URL (an image, a file, an MCP
 * server: a way out past the egress policy), read what the key's account stores (files, stored
 * responses, prompts, conversations), or run on past the turn (background). The input is checked
 * throughout (a tool's output carries content as a message does), and so are the tools a namespace
 * nests.
 */
export function responsesRequestProblem(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the body is not a JSON object';
  const request = body as Record<string, unknown>;
  for (const field of ['previous_response_id', 'conversation', 'prompt']) {
    if (request[field] !== undefined && request[field] !== null) return `${field} reads what the account stores`;
  }
  if (request.background === true) return 'background runs outlive the turn';
  if (request.store === true) return 'store keeps the conversation on the account';
  if (request.tools !== undefined) {
    if (!Array.isArray(request.tools)) return 'tools is not a list';
    const problem = toolsProblem(request.tools);
    if (problem) return problem;
  }
  return valueProblem(request.input);
}

/** The tools declared, and those nested in a namespace; not their parameters, which are JSON Schemas. */
function toolsProblem(tools: unknown[]): string | null {
  for (const tool of tools as { type?: unknown; tools?: unknown }[]) {
    if (!HARNESS_TOOLS.has(String(tool?.type))) return `tool type ${JSON.stringify(tool?.type)} is the provider's`;
    if (tool.tools !== undefined) {
      if (!Array.isArray(tool.tools)) return 'tools is not a list';
      const problem = toolsProblem(tool.tools);
      if (problem) return problem;
    }
  }
  return null;
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
  if (typeof node.type === 'string' && REFUSED_TYPES[node.type]) return REFUSED_TYPES[node.type]!;
  for (const [key, child] of Object.entries(node)) {
    if (child === undefined || child === null) continue;
    if (REFUSED_FIELDS[key]) return REFUSED_FIELDS[key]!;
    if (key === 'image_url') {
      const url = typeof child === 'string' ? child : (child as { url?: unknown }).url;
      if (typeof url !== 'string' || !url.startsWith('data:'))
        return 'images must be inline (a data: URL), not fetched';
      continue;
    }
    const problem = valueProblem(child);
    if (problem) return problem;
  }
  return null;
}

/** The requests a harness makes of a Responses API: a turn, its compaction, the model list. */
const ALLOWED: readonly { method: string; path: RegExp }[] = [
  { method: 'POST', path: /^\/responses(\/compact)?$/ },
  { method: 'GET', path: /^\/models(\/[A-Za-z0-9._:-]+)?$/ },
];

function allowed(method: string, url: string, basePath: string): boolean {
  const [pathname = ''] = url.split('?');
  const rest = pathUnderBase(pathname, basePath);
  return rest !== null && ALLOWED.some((rule) => rule.method === method && rule.path.test(rest));
}

export const responsesApi: ModelDialect = {
  allowed,
  bodyProblem: responsesRequestProblem,
  // `service_tier`: the account's default tier (`priority` bills more per token, and `flex` or
  // `scale` are the operator's to choose).
  billingFields: ['model', 'service_tier'],
  billingRewritten:
    'a sandbox request asked for another model or service tier; forwarded as the run’s model, default tier',
  keyHeaders: ['authorization'],
  keyHeader: (apiKey) => ['authorization', `Bearer ${apiKey}`],
};
