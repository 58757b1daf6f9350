import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

/** First load of the console: the JS and CSS index.html references, gzipped as a server would send them. */
export const PAGE_WEIGHT_BUDGET_BYTES = 150 * 1024;

export interface PageWeight {
  files: { path: string; bytes: number; gzipBytes: number }[];
  gzipBytes: number;
}

/** The gzip sizes of the scripts, module preloads and style sheets `dist/index.html` names. */
export function measurePageWeight(dist: string): PageWeight {
  const html = readFileSync(join(dist, 'index.html'), 'utf8');
  const referenced = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="(\/assets\/[^"]+\.(?:js|css))"/g)];
  const files = [...new Set(referenced.map((match) => match[1]!))].map((path) => {
    const content = readFileSync(join(dist, path));
    return { path, bytes: content.length, gzipBytes: gzipSync(content).length };
  });
  return { files, gzipBytes: files.reduce((sum, file) => sum + file.gzipBytes, 0) };
}
