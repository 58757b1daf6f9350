import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { git, GitError } from './git.js';

// The token for a repository goes to that repository's origin only: not to a host its server
// redirects to, nor to any other host git might be asked to authenticate to.

const TOKEN = 'ghs_only-for-the-repository-origin';

function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Server> {
  const server = createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

describe('the runner’s git and a token', () => {
  const elsewhere: { url: string; authorization: string | undefined }[] = [];
  let other: Server;
  let origin: Server;

  beforeAll(async () => {
    // Another host that asks for credentials, and records what it was given.
    other = await listen((req, res) => {
      elsewhere.push({ url: req.url ?? '', authorization: req.headers.authorization });
      res.writeHead(401, { 'www-authenticate': 'Basic realm="x"' }).end();
    });
    // The repository's origin sends git elsewhere.
    origin = await listen((req, res) => {
      res.writeHead(302, { location: `${urlOf(other)}${req.url ?? '/'}` }).end();
    });
  });
  afterAll(() => {
    other?.close();
    origin?.close();
  });

  it('is not handed to the host the repository’s server redirects to', async () => {
    const url = `${urlOf(origin)}/acme/app.git`;
    const attempt = git(tmpdir(), ['ls-remote', '--', url], { remote: { url, token: TOKEN } });
    await expect(attempt).rejects.toBeInstanceOf(GitError);
    expect(elsewhere.filter((r) => r.authorization !== undefined)).toEqual([]);
    expect(JSON.stringify(elsewhere)).not.toContain(Buffer.from(`x-access-token:${TOKEN}`).toString('base64'));
  });
});
