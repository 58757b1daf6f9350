import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import ajvModule, { type ValidateFunction } from 'ajv';
import ajv2020Module from 'ajv/dist/2020.js';
import formatsModule from 'ajv-formats';

// GitHub's own OpenAPI descriptions — REST (`@octokit/openapi`, OpenAPI 3.0) and webhooks
// (`@octokit/openapi-webhooks`, OpenAPI 3.1) — as validators for what the fake GitHub answers and
// sends, so the fake cannot drift from the real service. Stricter than the descriptions in one way:
// a property a schema does not declare is a problem (GitHub's schemas leave objects open, and an
// invented field — `merged` on the pull-request list — is exactly how a fake lies).

const Ajv = ajvModule.default;
const Ajv2020 = ajv2020Module.default;
const addFormats = formatsModule.default;

type Schema = Record<string, unknown>;

const require = createRequire(import.meta.url);

function readSpec(name: string): Schema {
  return JSON.parse(readFileSync(require.resolve(name), 'utf8')) as Schema;
}

function isObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * One schema made strict and plain JSON Schema: OpenAPI 3.0's `nullable: true` becomes a `null`
 * alternative, and an object schema that lists its properties admits no others (except as a
 * branch of `allOf`, whose branches each see only part of the object).
 */
function normalise(schema: unknown, inAllOf = false): unknown {
  if (!isObject(schema)) return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'properties' || key === 'patternProperties') {
      out[key] = Object.fromEntries(Object.entries(value as Schema).map(([name, sub]) => [name, normalise(sub)]));
    } else if (key === 'anyOf' || key === 'oneOf') {
      out[key] = (value as unknown[]).map((sub) => normalise(sub));
    } else if (key === 'allOf') {
      out[key] = (value as unknown[]).map((sub) => normalise(sub, true));
    } else if (key === 'items' || key === 'additionalProperties' || key === 'not') {
      out[key] = normalise(value);
    } else if (key !== 'nullable' && key !== 'example' && key !== 'examples') {
      out[key] = value;
    }
  }
  if (out.properties !== undefined && out.additionalProperties === undefined && !inAllOf && out.allOf === undefined) {
    out.additionalProperties = false;
  }
  if (schema.nullable === true) return { anyOf: [{ type: 'null' }, out] };
  return out;
}

function normaliseComponents(spec: Schema): Schema {
  const components = spec.components as { schemas: Record<string, unknown> };
  const schemas = Object.fromEntries(Object.entries(components.schemas).map(([name, s]) => [name, normalise(s)]));
  return { components: { schemas } };
}

function describe(validate: ValidateFunction): string[] {
  return (validate.errors ?? []).map(
    (e) =>
      `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}${
        e.keyword === 'additionalProperties' ? `: ${String(e.params.additionalProperty)}` : ''
      }`,
  );
}

export interface GitHubSchemas {
  /**
   * Problems of a REST answer (`GET`, `/repos/{owner}/{repo}/pulls`, 200) against its operation's
   * response schema; an operation or status GitHub does not describe is a problem too.
   */
  response(method: string, path: string, status: number, body: unknown): string[];
  /** Problems of a webhook payload against the description of `<event>-<action>` (or `<event>`). */
  webhook(event: string, payload: unknown): string[];
  /**
   * An object of a component schema of the REST description: `ours` laid over placeholders for
   * every other required property (null where the schema allows it, else the first enum value, an
   * empty string or list, 1, false), so a fake models the fields that matter and stays whole.
   */
  restShape(component: string, ours: Record<string, unknown>): Record<string, unknown>;
  /** The same from the webhooks description (its objects differ from the REST ones). */
  webhookShape(component: string, ours: Record<string, unknown>): Record<string, unknown>;
}

let loaded: GitHubSchemas | undefined;

/** The validators, loaded once per process (the descriptions are large; schemas compile on first use). */
export function githubSchemas(): GitHubSchemas {
  loaded ??= load();
  return loaded;
}

function load(): GitHubSchemas {
  const rest = readSpec('@octokit/openapi/generated/api.github.com.json');
  const hooks = readSpec('@octokit/openapi-webhooks/generated/api.github.com.json');
  const options = { strict: false, allErrors: true, validateSchema: false, logger: false } as const;
  const restAjv = new Ajv(options);
  const hookAjv = new Ajv2020(options);
  addFormats(restAjv);
  addFormats(hookAjv);
  // Normalised once: the validators and the placeholders of the shapes read the same schemas.
  const restComponents = normaliseComponents(rest);
  const hookComponents = normaliseComponents(hooks);
  restAjv.addSchema(restComponents, 'rest');
  hookAjv.addSchema(hookComponents, 'webhooks');

  const restPaths = rest.paths as Record<string, Record<string, { responses?: Record<string, Schema> }>>;
  const webhooks = hooks.webhooks as Record<string, { post: { requestBody: { content: Record<string, Schema> } } }>;
  const compiled = new Map<string, ValidateFunction>();

  function restValidator(method: string, path: string, status: number): ValidateFunction | string {
    const key = `${method} ${path} ${status}`;
    const cached = compiled.get(key);
    if (cached) return cached;
    const response = restPaths[path]?.[method.toLowerCase()]?.responses?.[String(status)];
    if (!response) return `GitHub describes no ${status} answer to ${method} ${path}`;
    const schema = (response.content as Record<string, Schema> | undefined)?.['application/json']?.schema;
    if (!schema) return `GitHub describes no JSON body for ${status} to ${method} ${path}`;
    // Operation schemas are inline or refer to components: normalised, their refs resolved in 'rest'.
    const validate = restAjv.compile(rebase(schema, 'rest'));
    compiled.set(key, validate);
    return validate;
  }

  function hookValidator(event: string, action: unknown): ValidateFunction | string {
    const specific = typeof action === 'string' ? `${event}-${action.replaceAll('_', '-')}` : event;
    const name = webhooks[specific] ? specific : event;
    const cached = compiled.get(`webhook ${name}`);
    if (cached) return cached;
    const schema = webhooks[name]?.post.requestBody.content['application/json']?.schema;
    if (!schema) return `GitHub describes no webhook ${event} (action ${String(action)})`;
    const validate = hookAjv.compile(rebase(schema, 'webhooks'));
    compiled.set(`webhook ${name}`, validate);
    return validate;
  }

  const restSchemas = (restComponents.components as { schemas: Record<string, Schema> }).schemas;
  const hookSchemas = (hookComponents.components as { schemas: Record<string, Schema> }).schemas;

  return {
    restShape: (component, ours) => shape(restSchemas, component, ours),
    webhookShape: (component, ours) => shape(hookSchemas, component, ours),
    response(method, path, status, body) {
      const validate = restValidator(method, path, status);
      if (typeof validate === 'string') return [validate];
      return validate(body) ? [] : describe(validate);
    },
    webhook(event, payload) {
      // The event header says `check_run`; the description names it `check-run`.
      const validate = hookValidator(event.replaceAll('_', '-'), isObject(payload) ? payload.action : undefined);
      if (typeof validate === 'string') return [validate];
      return validate(payload) ? [] : describe(validate);
    },
  };
}

/** Local `#/components/...` references of an operation's schema, pointed at the loaded document. */
function rebase(schema: unknown, id: string): Schema {
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(walk);
    if (!isObject(value)) return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, sub]) => [
        key,
        key === '$ref' && typeof sub === 'string' && sub.startsWith('#/') ? `${id}${sub}` : walk(sub),
      ]),
    );
  };
  return walk(normalise(schema)) as Schema;
}

/** Marks an object built by `shape`: it is whole, and replaces a placeholder instead of merging into it. */
const WHOLE = Symbol('whole');

function shape(
  schemas: Record<string, Schema>,
  component: string,
  ours: Record<string, unknown>,
): Record<string, unknown> {
  const schema = schemas[component];
  if (!schema) throw new Error(`GitHub describes no component ${component}`);
  const base = placeholder(schemas, schema, 0);
  const whole = merge(isObject(base) ? base : {}, ours);
  Object.defineProperty(whole, WHOLE, { value: true, enumerable: false });
  return whole;
}

/**
 * `ours` over the placeholders: a partial object of ours fills in the placeholder's (the rest of a
 * nested object stays whole); a shaped one — say an enterprise where the placeholder is the first
 * alternative, a user — takes its place.
 */
function merge(base: Record<string, unknown>, ours: Record<string, unknown>): Record<string, unknown> {
  const out = { ...base };
  for (const [key, value] of Object.entries(ours)) {
    const under = out[key];
    out[key] = isObject(under) && isObject(value) && !(WHOLE in value) ? merge(under, value) : value;
  }
  return out;
}

/** The parts of an `allOf` as one schema: types intersected, properties and requirements joined. */
function mergeAllOf(schemas: Record<string, Schema>, parts: Schema[]): Schema {
  const resolved = parts.map((part) =>
    typeof part.$ref === 'string' ? (schemas[part.$ref.split('/').pop()!] ?? {}) : part,
  );
  const merged: Schema = {};
  const typeSets = resolved
    .filter((part) => part.type !== undefined)
    .map((part) => new Set(Array.isArray(part.type) ? (part.type as string[]) : [part.type as string]));
  if (typeSets.length > 0) merged.type = [...typeSets[0]!].filter((type) => typeSets.every((set) => set.has(type)));
  for (const key of ['format', 'enum', 'const'] as const) {
    const found = resolved.find((part) => part[key] !== undefined);
    if (found) merged[key] = found[key];
  }
  const names = new Set(resolved.flatMap((part) => Object.keys((part.properties ?? {}) as Schema)));
  if (names.size > 0) {
    merged.properties = Object.fromEntries(
      [...names].map((name) => {
        const subs = resolved
          .map((part) => ((part.properties ?? {}) as Record<string, Schema>)[name])
          .filter((sub): sub is Schema => sub !== undefined);
        return [name, subs.length === 1 ? subs[0]! : mergeAllOf(schemas, subs)];
      }),
    );
  }
  merged.required = [...new Set(resolved.flatMap((part) => (part.required ?? []) as string[]))];
  return merged;
}

/** The least value a schema admits, built from required properties only. */
function placeholder(schemas: Record<string, Schema>, schema: Schema, depth: number): unknown {
  if (depth > 20) throw new Error('placeholder: schema nests too deep');
  if (typeof schema.$ref === 'string') {
    return placeholder(schemas, schemas[schema.$ref.split('/').pop()!] ?? {}, depth + 1);
  }
  const alternatives = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (alternatives) {
    if (alternatives.some((alt) => alt.type === 'null')) return null;
    return placeholder(schemas, alternatives[0]!, depth + 1);
  }
  if (Array.isArray(schema.allOf))
    return placeholder(schemas, mergeAllOf(schemas, schema.allOf as Schema[]), depth + 1);
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string | undefined];
  if (types.includes('null')) return null;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (schema.const !== undefined) return schema.const;
  const type = types[0] ?? (schema.properties ? 'object' : undefined);
  switch (type) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = (schema.required ?? []) as string[];
      return Object.fromEntries(
        required.map((name) => [name, placeholder(schemas, properties[name] ?? {}, depth + 1)]),
      );
    }
    case 'array':
      return [];
    case 'integer':
    case 'number':
      // Ids and counts: GitHub's are positive.
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return false;
    case 'string':
      if (schema.format === 'date-time') return '1970-01-01T00:00:00Z';
      if (schema.format === 'uri' || schema.format === 'url') return 'https://github.invalid/';
      if (schema.format === 'email') return 'nobody@github.invalid';
      return '';
    default:
      return null;
  }
}
