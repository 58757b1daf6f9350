import { z } from 'zod';
import type { Harness } from './api/harnesses.js';
import { Id } from './common.js';
import { harnessList, subjects } from './subjects.js';
import { COLLABORATION_MODES } from './values.js';

// The harness catalog: per harness a deployment serves, the models a thread may name (empty: any)
// and the reasoning efforts it may name, with the defaults a thread that names none gets. Threads
// checks a new thread against it and runs takes a run's defaults from it, so both read it from the
// same environment with the schema below.

/** What Threadwork knows of a harness before any configuration. */
export interface HarnessDefaults {
  default_model: string;
  reasoning_efforts: readonly string[];
  default_reasoning_effort: string;
}

export const KNOWN_HARNESSES = {
  /** Codex CLI: its `model_reasoning_effort` values. */
  codex: {
    default_model: 'gpt-5-codex',
    reasoning_efforts: ['minimal', 'low', 'medium', 'high', 'xhigh'],
    default_reasoning_effort: 'medium',
  },
  /**
   * Claude Code through the Claude Agent SDK: its `EffortLevel` values. `high` is what the Claude
   * API applies when no effort is asked for.
   */
  'claude-code': {
    default_model: 'claude-sonnet-4-5',
    reasoning_efforts: ['low', 'medium', 'high', 'xhigh', 'max'],
    default_reasoning_effort: 'high',
  },
} as const satisfies Record<string, HarnessDefaults>;

/** One harness as a deployment serves it. */
export interface HarnessEntry {
  id: string;
  default_model: string;
  /** Empty: any model is accepted. */
  models: readonly string[];
  reasoning_efforts: readonly string[];
  default_reasoning_effort: string;
}

export interface HarnessCatalog {
  default_harness: string;
  /** In the order HARNESSES names them. */
  harnesses: readonly HarnessEntry[];
}

/** A comma-separated list of ids; empty or unset: none. */
const idList = z
  .string()
  .default('')
  .transform((value) =>
    value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(Id));

/**
 * An optional id where an empty value counts as unset, as deployment files write a variable they
 * pass on without a value (`CODEX_MODEL: ${CODEX_MODEL:-}`).
 */
const setting = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (value === '' ? undefined : value), schema);

const subjectToken = Id.refine((value) => {
  try {
    subjects.runJobs(value);
    return true;
  } catch {
    return false;
  }
}, 'must be usable as one NATS subject token');

/**
 * The catalog's environment, spread into the config of every service that reads it (threads and
 * runs): give both the same values.
 */
export const harnessCatalogShape = {
  /** The harnesses this deployment's runners serve: a thread or run asking for another is refused. */
  HARNESSES: harnessList,
  /** Harness of a thread or run that names none; one of HARNESSES. */
  DEFAULT_HARNESS: setting(subjectToken.default('codex')),
  /** Default model of `codex` (gpt-5-codex). Unset: DEFAULT_MODEL. */
  CODEX_MODEL: setting(Id.optional()),
  /** Models a `codex` thread may name, comma-separated; unset or empty: any. */
  CODEX_MODELS: idList,
  /** Default reasoning effort of `codex` (medium), one of its efforts. Unset: DEFAULT_REASONING_EFFORT. */
  CODEX_REASONING_EFFORT: setting(Id.optional()),
  /** Default model of `claude-code` (claude-sonnet-4-5). */
  CLAUDE_MODEL: setting(Id.default(KNOWN_HARNESSES['claude-code'].default_model)),
  /** Models a `claude-code` thread may name, comma-separated; unset or empty: any. */
  CLAUDE_MODELS: idList,
  /** Default reasoning effort of `claude-code` (high), one of its efforts. */
  CLAUDE_REASONING_EFFORT: setting(Id.default(KNOWN_HARNESSES['claude-code'].default_reasoning_effort)),
  /**
   * Deprecated: CODEX_MODEL's former name, still read when CODEX_MODEL is unset (it was the model
   * of every run when codex was the only harness). Never applies to claude-code.
   */
  DEFAULT_MODEL: setting(Id.default(KNOWN_HARNESSES.codex.default_model)),
  /** Deprecated: CODEX_REASONING_EFFORT's former name, read when that is unset. */
  DEFAULT_REASONING_EFFORT: setting(Id.default(KNOWN_HARNESSES.codex.default_reasoning_effort)),
};
export type HarnessCatalogConfig = z.output<z.ZodObject<typeof harnessCatalogShape>>;

interface Settings {
  entry: Omit<HarnessEntry, 'id'>;
  /** The variables each setting comes from, for a configuration error. */
  vars: { model: string; models: string; effort: string };
}

function knownSettings(config: HarnessCatalogConfig): Record<keyof typeof KNOWN_HARNESSES, Settings> {
  return {
    codex: {
      entry: {
        default_model: config.CODEX_MODEL ?? config.DEFAULT_MODEL,
        models: config.CODEX_MODELS,
        reasoning_efforts: KNOWN_HARNESSES.codex.reasoning_efforts,
        default_reasoning_effort: config.CODEX_REASONING_EFFORT ?? config.DEFAULT_REASONING_EFFORT,
      },
      vars: { model: 'CODEX_MODEL', models: 'CODEX_MODELS', effort: 'CODEX_REASONING_EFFORT' },
    },
    'claude-code': {
      entry: {
        default_model: config.CLAUDE_MODEL,
        models: config.CLAUDE_MODELS,
        reasoning_efforts: KNOWN_HARNESSES['claude-code'].reasoning_efforts,
        default_reasoning_effort: config.CLAUDE_REASONING_EFFORT,
      },
      vars: { model: 'CLAUDE_MODEL', models: 'CLAUDE_MODELS', effort: 'CLAUDE_REASONING_EFFORT' },
    },
  };
}

const isKnown = (name: string): name is keyof typeof KNOWN_HARNESSES => Object.hasOwn(KNOWN_HARNESSES, name);

/**
 * The catalog a configuration describes. A harness the catalog does not know (another pool of
 * runners under a name of its own) is served like `codex`, with codex's settings.
 */
export function harnessCatalog(config: HarnessCatalogConfig): HarnessCatalog {
  const known = knownSettings(config);
  return {
    default_harness: config.DEFAULT_HARNESS,
    harnesses: config.HARNESSES.map((name) => ({ id: name, ...known[isKnown(name) ? name : 'codex'].entry })),
  };
}

/** What is wrong with a catalog's configuration, one issue per variable (for a zod superRefine). */
export function harnessCatalogIssues(config: HarnessCatalogConfig): { path: string; message: string }[] {
  const issues: { path: string; message: string }[] = [];
  if (!config.HARNESSES.includes(config.DEFAULT_HARNESS)) {
    issues.push({ path: 'DEFAULT_HARNESS', message: 'must be one of HARNESSES' });
  }
  for (const [name, { entry, vars }] of Object.entries(knownSettings(config))) {
    if (entry.models.length > 0 && !entry.models.includes(entry.default_model)) {
      issues.push({
        path: vars.model,
        message: `the default model of ${name} (${entry.default_model}) must be one of ${vars.models} (${entry.models.join(', ')})`,
      });
    }
    if (!entry.reasoning_efforts.includes(entry.default_reasoning_effort)) {
      issues.push({
        path: vars.effort,
        message: `the default reasoning effort of ${name} (${entry.default_reasoning_effort}) must be one of ${entry.reasoning_efforts.join(', ')}`,
      });
    }
  }
  return issues;
}

/** The entry of a served harness; undefined for one this deployment does not serve. */
export function findHarness(catalog: HarnessCatalog, name: string): HarnessEntry | undefined {
  return catalog.harnesses.find((h) => h.id === name);
}

/** Why a harness is refused, naming the ones served. */
export function unservedHarness(catalog: HarnessCatalog, prefix = ''): string {
  return `${prefix}harness: not a harness this deployment serves (${catalog.harnesses.map((h) => h.id).join(', ')})`;
}

/** A thread's or run's choice of harness, model and effort; unset fields take the defaults. */
export interface HarnessChoice {
  harness?: string | undefined;
  model?: string | undefined;
  reasoning_effort?: string | undefined;
}

/**
 * Why the catalog refuses a choice, naming what it would take, or null when it takes it. `prefix`
 * is where the fields sit in the caller's request (`body.` in a public one).
 */
export function harnessChoiceProblem(catalog: HarnessCatalog, choice: HarnessChoice, prefix = ''): string | null {
  const name = choice.harness ?? catalog.default_harness;
  const entry = findHarness(catalog, name);
  if (!entry) return unservedHarness(catalog, prefix);
  if (choice.model !== undefined && entry.models.length > 0 && !entry.models.includes(choice.model)) {
    return `${prefix}model: not a model harness ${name} takes (${entry.models.join(', ')})`;
  }
  if (choice.reasoning_effort !== undefined && !entry.reasoning_efforts.includes(choice.reasoning_effort)) {
    return `${prefix}reasoning_effort: not a reasoning effort harness ${name} takes (${entry.reasoning_efforts.join(', ')})`;
  }
  return null;
}

/** The entry of a served harness, as GET /v1/harnesses shows it. */
export function harnessView(catalog: HarnessCatalog, entry: HarnessEntry): Harness {
  return {
    id: entry.id,
    default: entry.id === catalog.default_harness,
    default_model: entry.default_model,
    models: [...entry.models],
    reasoning_efforts: [...entry.reasoning_efforts],
    default_reasoning_effort: entry.default_reasoning_effort,
    collaboration_modes: [...COLLABORATION_MODES],
  };
}
