import { join, resolve } from 'node:path';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

/** An optional setting: unset and empty both mean "not given" (compose files pass `VAR=`). */
const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (value === '' ? undefined : value), schema.optional());

export const RepohostConfig = z
  .object({
    ...baseConfigShape,
    /**
     * Folder of bare repositories (`*.git`) served by the `local` provider;
     * `<THREADWORK_DATA_DIR>/repos` when unset. Created at start if missing.
     */
    REPOHOST_LOCAL_DIR: z.string().min(1).optional(),
    /** Data folder of the local stack (default `./.data`); only used to place the default REPOHOST_LOCAL_DIR. */
    THREADWORK_DATA_DIR: z.string().min(1).optional(),

    /** The GitHub App's id. With GITHUB_APP_PRIVATE_KEY it turns the GitHub provider on. */
    GITHUB_APP_ID: optional(z.coerce.number().int().positive()),
    /**
     * The app's private key (PEM, PKCS#1 as GitHub issues it, or PKCS#8). Newlines may be written
     * as `\n` so it fits on one line of an env file.
     */
    GITHUB_APP_PRIVATE_KEY: optional(z.string().transform((pem) => pem.replace(/\\n/g, '\n'))),
    /** Secret of the app's webhook: every delivery's `X-Hub-Signature-256` is checked with it. */
    GITHUB_WEBHOOK_SECRET: optional(z.string().min(1)),
    /** The app's URL name (`https://github.com/apps/<slug>`), for install URLs. */
    GITHUB_APP_SLUG: optional(z.string().regex(/^[a-z0-9][a-z0-9-]*$/i)),
    /**
     * OAuth client of the app. When set, the setup callback must carry the `code` GitHub adds when
     * the app requests user authorization during installation, the installation is linked only if
     * that user can see it, and only to the Threadwork user that GitHub user is verified as.
     * Required when NODE_ENV=production: without it the setup callback's installation id is
     * whatever the browser sends.
     */
    GITHUB_CLIENT_ID: optional(z.string().min(1)),
    GITHUB_CLIENT_SECRET: optional(z.string().min(1)),
    /** REST API root: GitHub Enterprise Server uses `https://<host>/api/v3`. */
    GITHUB_API_URL: z.url().default('https://api.github.com'),
    /** Web root, for install, manage and OAuth URLs. */
    GITHUB_WEB_URL: z.url().default('https://github.com'),
    /** The native app's URL scheme: install sessions only return to `<APP_SCHEME>://repohost/setup`. */
    APP_SCHEME: z
      .string()
      .regex(/^[a-z][a-z0-9+.-]*$/i)
      .default('threadwork'),
    /** How long an install session (its `state`) can be used. */
    INSTALL_SESSION_TTL_MS: env.duration(10 * 60_000),
    /**
     * How long the one-time code the setup callback hands to `return_to` can be redeemed
     * (POST /v1/repohost/installations). The app redeems it as it comes back, within seconds.
     */
    INSTALL_LINK_CODE_TTL_MS: env.duration(5 * 60_000),
    /** `production` makes the OAuth client (GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET) mandatory with a GitHub App. */
    NODE_ENV: z.string().default('development'),
    /**
     * Where browsers and GitHub reach the gateway (and the console it serves at `/`): an origin,
     * `https://threadwork.example.com`, no path. Install sessions may return to the console's
     * `<PUBLIC_BASE_URL>/settings/github`; sign-in with GitHub sends users back to
     * `<PUBLIC_BASE_URL>/v1/auth/github/callback` (unset: sign-in with GitHub is off). Also logged
     * at start as the app's Setup URL and Webhook URL.
     */
    PUBLIC_BASE_URL: optional(
      z
        .url()
        .refine((value) => {
          const url = new URL(value);
          return (
            (url.protocol === 'https:' || url.protocol === 'http:') && url.pathname === '/' && !url.search && !url.hash
          );
        }, 'must be an http(s) origin with no path, query or fragment (https://threadwork.example.com)')
        .transform((value) => new URL(value).origin),
    ),
    /** Open pull requests as drafts. */
    PR_DRAFT: env.bool(true),
    /** A cached repository list or installation older than this is read again from GitHub. */
    GITHUB_CACHE_TTL_MS: env.duration(5 * 60_000),
    /** A publication older than this is synced from GitHub when it is read. */
    PUBLICATION_SYNC_MS: env.duration(60_000),
  })
  .superRefine((config, ctx) => {
    const app = config.GITHUB_APP_ID !== undefined || config.GITHUB_APP_PRIVATE_KEY !== undefined;
    if (!app) return;
    for (const name of [
      'GITHUB_APP_ID',
      'GITHUB_APP_PRIVATE_KEY',
      'GITHUB_WEBHOOK_SECRET',
      'GITHUB_APP_SLUG',
    ] as const) {
      if (config[name] === undefined) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'required when a GitHub App is configured' });
      }
    }
    if ((config.GITHUB_CLIENT_ID === undefined) !== (config.GITHUB_CLIENT_SECRET === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['GITHUB_CLIENT_SECRET'],
        message: 'GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET go together',
      });
    } else if (config.NODE_ENV === 'production' && config.GITHUB_CLIENT_ID === undefined) {
      // Without the OAuth client nothing proves who installed: an id sent to the setup callback
      // would be linked on its creation time alone.
      ctx.addIssue({
        code: 'custom',
        path: ['GITHUB_CLIENT_ID'],
        message:
          'required with a GitHub App when NODE_ENV=production (with GITHUB_CLIENT_SECRET): the setup callback must prove which GitHub user installed',
      });
    }
  });
export type RepohostConfig = z.output<typeof RepohostConfig>;

/** Where the `local` provider looks for bare repositories, as an absolute path (it ends up in clone URLs). */
export function localRepositoriesDir(
  config: Pick<RepohostConfig, 'REPOHOST_LOCAL_DIR' | 'THREADWORK_DATA_DIR'>,
): string {
  return resolve(config.REPOHOST_LOCAL_DIR ?? join(config.THREADWORK_DATA_DIR ?? '.data', 'repos'));
}

/** The GitHub App settings, when one is configured. */
export interface GitHubAppConfig {
  appId: number;
  privateKey: string;
  webhookSecret: string;
  slug: string;
  oauth: { clientId: string; clientSecret: string } | null;
  apiUrl: string;
  webUrl: string;
  appScheme: string;
  /** The gateway's public origin (PUBLIC_BASE_URL), or null when not configured. */
  publicBaseUrl: string | null;
  installSessionTtlMs: number;
  linkCodeTtlMs: number;
  prDraft: boolean;
  cacheTtlMs: number;
  publicationSyncMs: number;
}

export function githubAppConfig(config: RepohostConfig): GitHubAppConfig | null {
  const { GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET, GITHUB_APP_SLUG } = config;
  if (!GITHUB_APP_ID || !GITHUB_APP_PRIVATE_KEY || !GITHUB_WEBHOOK_SECRET || !GITHUB_APP_SLUG) return null;
  return {
    appId: GITHUB_APP_ID,
    privateKey: GITHUB_APP_PRIVATE_KEY,
    webhookSecret: GITHUB_WEBHOOK_SECRET,
    slug: GITHUB_APP_SLUG,
    oauth:
      config.GITHUB_CLIENT_ID && config.GITHUB_CLIENT_SECRET
        ? { clientId: config.GITHUB_CLIENT_ID, clientSecret: config.GITHUB_CLIENT_SECRET }
        : null,
    apiUrl: config.GITHUB_API_URL.replace(/\/+$/, ''),
    webUrl: config.GITHUB_WEB_URL.replace(/\/+$/, ''),
    appScheme: config.APP_SCHEME,
    publicBaseUrl: config.PUBLIC_BASE_URL ?? null,
    installSessionTtlMs: config.INSTALL_SESSION_TTL_MS,
    linkCodeTtlMs: config.INSTALL_LINK_CODE_TTL_MS,
    prDraft: config.PR_DRAFT,
    cacheTtlMs: config.GITHUB_CACHE_TTL_MS,
    publicationSyncMs: config.PUBLICATION_SYNC_MS,
  };
}
