import createClient from 'openapi-fetch';
import type { components, paths } from './generated/schema.js';

/**
 * The public API, typed from the gateway's OpenAPI document. Same origin as the console, so the
 * `tw_session` cookie goes with every request and no other site's page can use it.
 */
export const api = createClient<paths>({ baseUrl: window.location.origin, credentials: 'same-origin' });

export type WorkList = components['schemas']['WorkList'];
export type Project = WorkList['projects'][number];
export type WorkThread = Project['threads'][number];
