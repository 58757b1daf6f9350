import { jsonSchemaTransformObject } from 'fastify-type-provider-zod';

type SwaggerTransformObject = typeof jsonSchemaTransformObject;
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const REF_PREFIX = '#/components/schemas/';
const INPUT_SUFFIX = 'Input';

/** Every component name a `$ref` in `node` points at. */
function refsIn(node: unknown, into: Set<string>): Set<string> {
  if (Array.isArray(node)) {
    for (const item of node) refsIn(item, into);
  } else if (typeof node === 'object' && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith(REF_PREFIX)) {
        into.add(value.slice(REF_PREFIX.length));
      } else {
        refsIn(value, into);
      }
    }
  }
  return into;
}

/** `node` with `$ref`s to renamed components pointing at their new names. */
function renameRefs(node: Json, renames: Map<string, string>): Json {
  if (Array.isArray(node)) return node.map((item) => renameRefs(item, renames));
  if (typeof node !== 'object' || node === null) return node;
  const out: { [key: string]: Json } = {};
  for (const [key, value] of Object.entries(node)) {
    const target =
      key === '$ref' && typeof value === 'string' ? renames.get(value.slice(REF_PREFIX.length)) : undefined;
    out[key] = target === undefined ? renameRefs(value, renames) : `${REF_PREFIX}${target}`;
  }
  return out;
}

/**
 * zod's named schemas become components in two variants, as read (`XInput`, for request bodies
 * and parameters) and as written (`X`, for responses), whether or not both are used. Clients want
 * one name per shape: an `XInput` whose `X` is not used takes the plain name, and components that
 * nothing refers to (directly or through another component) are left out.
 */
export function tidyComponents(document: { paths?: unknown; components?: { schemas?: Record<string, Json> } }) {
  const schemas = document.components?.schemas;
  if (!schemas) return document;

  const reachable = (): Set<string> => {
    const seen = refsIn(document.paths, new Set());
    for (let frontier = [...seen]; frontier.length > 0;) {
      const next = [
        ...refsIn(
          frontier.map((name) => schemas[name]),
          new Set(),
        ),
      ].filter((name) => !seen.has(name));
      for (const name of next) seen.add(name);
      frontier = next;
    }
    return seen;
  };

  const used = reachable();
  const renames = new Map<string, string>();
  for (const name of used) {
    const plain = name.slice(0, -INPUT_SUFFIX.length);
    if (name.endsWith(INPUT_SUFFIX) && !used.has(plain)) renames.set(name, plain);
  }
  const kept: Record<string, Json> = {};
  for (const name of Object.keys(schemas).sort()) {
    if (!used.has(name)) continue;
    kept[renames.get(name) ?? name] = renameRefs(schemas[name]!, renames);
  }
  return {
    ...document,
    paths: renameRefs(document.paths as Json, renames),
    components: { ...document.components, schemas: kept },
  };
}

/** `jsonSchemaTransformObject`, then one name per shape and no unused components. */
export const componentsTransform: SwaggerTransformObject = (document) =>
  tidyComponents(
    jsonSchemaTransformObject(document) as Parameters<typeof tidyComponents>[0],
  ) as ReturnType<SwaggerTransformObject>;
