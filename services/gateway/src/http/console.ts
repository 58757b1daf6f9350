import { existsSync } from 'node:fs';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

export interface ConsoleOptions {
  /** The built console (console/dist): index.html and its hashed assets under assets/. */
  dir: string;
}

/**
 * Same origin as the API, so the console needs no CORS and its session cookie is first-party. No
 * inline script or style anywhere (Vite emits files), so the policy needs no 'unsafe-inline' and an
 * injected script has nowhere to run; no framing (clickjacking).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Vite names every asset by its content's hash: a changed file is a new URL, so they never go stale. */
const HASHED_ASSETS = '/assets/';
const ONE_YEAR_S = 365 * 24 * 3600;

function secure(reply: FastifyReply, cacheControl: string) {
  reply.header('content-security-policy', CONSOLE_CSP);
  reply.header('x-content-type-options', 'nosniff');
  // A login link's token is in the address: no other site learns it from a Referer.
  reply.header('referrer-policy', 'no-referrer');
  reply.header('cache-control', cacheControl);
}

/** Whether `dir` holds a built console. */
export function consoleBuilt(dir: string): boolean {
  return dir !== '' && existsSync(join(dir, 'index.html'));
}

/**
 * The web console at `/`: its files, and index.html for every other GET outside /v1 (the console
 * routes in the browser). index.html is revalidated on every load so a deploy is picked up at once.
 */
export const consoleRoutes: FastifyPluginAsync<ConsoleOptions> = async (app, options) => {
  await app.register(fastifyStatic, {
    root: options.dir,
    // Routes for the files there at start, not a wildcard: the fallback below owns every other path.
    wildcard: false,
    index: false,
    serveDotFiles: false,
    cacheControl: false,
    setHeaders: (reply, path) => {
      const hashed = path.startsWith(join(options.dir, HASHED_ASSETS));
      secure(reply, hashed ? `public, max-age=${ONE_YEAR_S}, immutable` : 'no-cache');
    },
  });

  const sendIndex = (reply: FastifyReply) => {
    secure(reply, 'no-cache');
    return reply.type('text/html; charset=utf-8').sendFile('index.html');
  };
  app.get('/', { schema: { hide: true } }, (_request, reply) => sendIndex(reply));
  app.get('/*', { schema: { hide: true } }, (request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    // The API's unknown paths stay the API's 404, and a missing asset is not answered with a page.
    if (path === '/v1' || path.startsWith('/v1/') || path.startsWith(HASHED_ASSETS)) return reply.callNotFound();
    return sendIndex(reply);
  });
};
