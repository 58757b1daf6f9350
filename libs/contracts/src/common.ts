import { z } from 'zod';

/** Every identifier-like string of the contract (ids, model, harness, client_request_id, …) is 1..256 long. */
export const Id = z.string().min(1).max(256);
export type Id = z.infer<typeof Id>;

/**
 * ISO 8601 date-time. The contract promises UTC, and every producer writes `Date#toISOString()`,
 * so only the `Z` form is accepted: an offset here would mean a producer forgot to normalise.
 */
export const Timestamp = z.iso.datetime();
export type Timestamp = z.infer<typeof Timestamp>;

/**
 * Any JSON value. Deliberately not `z.json()`: that schema is recursive and renders as
 * `$ref`s into local `$defs`, which break once the schema is embedded in an OpenAPI document.
 * Whatever reaches us came out of `JSON.parse`, so it is JSON already.
 */
export const JsonValue = z.unknown().describe('Any JSON value');
export type JsonValue = z.infer<typeof JsonValue>;

/**
 * Why `name` is not a branch name git would accept (`git check-ref-format --branch`), or null.
 * Also refused: a leading `-`, which a command line would read as an option.
 */
export function branchNameProblem(name: string): string | null {
  if (name.startsWith('-')) return 'must not start with "-"';
  if (name === '@') return 'must not be "@"';
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name))
    return 'must not contain spaces, control characters or any of ~ ^ : ? * [ \\';
  if (name.includes('..')) return 'must not contain ".."';
  if (name.includes('@{')) return 'must not contain "@{"';
  if (name.startsWith('/') || name.endsWith('/') || name.includes('//'))
    return 'must not start or end with "/" or contain "//"';
  if (name.endsWith('.')) return 'must not end with "."';
  for (const part of name.split('/')) {
    if (part.startsWith('.')) return 'no part of it may start with "."';
    if (part.endsWith('.lock')) return 'no part of it may end with ".lock"';
  }
  return null;
}

/** A branch name: what git accepts as one, never anything a command line could take for an option. */
export const BranchName = z
  .string()
  .min(1)
  .max(255)
  .superRefine((name, ctx) => {
    const problem = branchNameProblem(name);
    if (problem) ctx.addIssue({ code: 'custom', message: `not a branch name: ${problem}` });
  })
  .describe('A branch name as `git check-ref-format --branch` accepts it, not starting with "-"');

/** Prompts and other caller text that ends up in a model's context. */
export const PROMPT_MAX_LENGTH = 4096;
export const Prompt = z.string().min(1).max(PROMPT_MAX_LENGTH);
export type Prompt = z.infer<typeof Prompt>;

/** Path parameter `{id}` of every `/v1/<resource>/{id}` route. */
export const IdParam = z.object({ id: Id });
export type IdParam = z.infer<typeof IdParam>;

/**
 * Query strings arrive as strings, and forms and hand-written URLs send `?limit=` for "not set";
 * treating an empty value as absent lets the default apply instead of failing on `Number('') === 0`.
 */
export function optionalQueryParam<T extends z.ZodType>(schema: T) {
  return z.preprocess((value) => (value === '' ? undefined : value), schema);
}

/** An integer query parameter in `min..max`, coerced from its string form, with a default. */
export function queryInt({ min, max, defaultValue }: { min: number; max: number; defaultValue: number }) {
  return optionalQueryParam(z.coerce.number().int().min(min).max(max).default(defaultValue));
}

/** The `limit` of a paged read: bounded so one request costs a bounded amount of work. */
export function pageLimit({ defaultValue, max }: { defaultValue: number; max: number }) {
  return queryInt({ min: 1, max, defaultValue });
}

/** An opaque continuation cursor; in a query an empty `?cursor=` reads as absent, i.e. "from the start". */
export const Cursor = z.string().min(1).max(256);
export type Cursor = z.infer<typeof Cursor>;
