import { randomBytes, verify, type KeyObject } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http.js';
import type { Shapes } from './shapes.js';
import type { GitHubState, IssuedToken } from './state.js';
import type { FakeInstallation, FakeRepository } from './types.js';

// Who may call the API: the app with its JWT, an installation with a token the app was issued for
// it (seeing only its repositories), a user with an OAuth token.

function base64url(input: string): Buffer {
  return Buffer.from(input.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

export type Auth = ReturnType<typeof createAuth>;

export function createAuth(
  state: GitHubState,
  shapes: Shapes,
  app: { appId: number; publicKey: KeyObject; tokenTtlMs: number },
) {
  const { publicKey, tokenTtlMs } = app;

  function credential(req: IncomingMessage): { scheme: string; value: string } | null {
    const header = req.headers.authorization;
    if (!header) return null;
    const match = /^(bearer|token)\s+(\S+)$/i.exec(header);
    return match ? { scheme: match[1]!.toLowerCase(), value: match[2]! } : null;
  }

  /** The app JWT: RS256 by the app's key, issued by the app, alive, and at most ten minutes long. */
  function requireJwt(req: IncomingMessage): void {
    const cred = credential(req);
    if (!cred) throw new HttpError(401, 'Requires authentication');
    const parts = cred.value.split('.');
    if (parts.length !== 3) throw new HttpError(401, 'A JSON web token could not be decoded');
    const [h, p, s] = parts as [string, string, string];
    let header: { alg?: string };
    let payload: { iss?: unknown; iat?: number; exp?: number };
    try {
      header = JSON.parse(base64url(h).toString('utf8')) as typeof header;
      payload = JSON.parse(base64url(p).toString('utf8')) as typeof payload;
    } catch {
      throw new HttpError(401, 'A JSON web token could not be decoded');
    }
    if (header.alg !== 'RS256') throw new HttpError(401, 'JWT algorithm must be RS256');
    if (!verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, base64url(s))) {
      throw new HttpError(401, 'A JSON web token could not be decoded');
    }
    const now = Math.floor(Date.now() / 1000);
    if (String(payload.iss) !== String(app.appId)) throw new HttpError(401, "'Issuer' claim ('iss') must match");
    if (typeof payload.iat !== 'number' || payload.iat > now + 60) {
      throw new HttpError(401, "'Issued at' claim ('iat') must be an Integer representing a time in the past");
    }
    if (typeof payload.exp !== 'number' || payload.exp <= now) {
      throw new HttpError(401, "'Expiration time' claim ('exp') is too far in the future or has passed");
    }
    if (payload.exp - payload.iat > 660)
      throw new HttpError(401, "'Expiration time' claim ('exp') is too far in the future");
    state.jwtsSeen.add(cred.value);
  }

  function requireToken(req: IncomingMessage, kind: IssuedToken['kind']): IssuedToken {
    const cred = credential(req);
    const token = cred ? state.tokens.get(cred.value) : undefined;
    if (!token || token.kind !== kind || token.expires_at <= Date.now()) throw new HttpError(401, 'Bad credentials');
    return token;
  }

  /** The repository, if the installation token may see it (else 404, as GitHub answers). */
  function repoFor(req: IncomingMessage, owner: string, name: string): FakeRepository {
    const token = requireToken(req, 'installation');
    const repo = [...state.repositories.values()].find(
      (r) => r.full_name.toLowerCase() === `${owner}/${name}`.toLowerCase(),
    );
    if (!repo || !state.tokenRepositoryIds(token).includes(repo.id)) throw new HttpError(404, 'Not Found');
    return repo;
  }

  function issueToken(installation: FakeInstallation, body: Record<string, unknown>) {
    if (installation.suspended_at) throw new HttpError(403, 'This installation has been suspended');
    const available = state.installationRepositoryIds(installation);
    let repositoryIds: number[] | null = null;
    if (Array.isArray(body.repository_ids)) {
      repositoryIds = body.repository_ids.map(Number);
      if (repositoryIds.some((rid) => !available.includes(rid))) {
        throw new HttpError(
          422,
          'There is at least one repository that does not exist or is not accessible to the parent installation.',
        );
      }
    }
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    const permissions = (body.permissions as Record<string, string> | undefined) ?? {
      contents: 'write',
      pull_requests: 'write',
    };
    const issued: IssuedToken = {
      kind: 'installation',
      installation_id: installation.id,
      login: null,
      repository_ids: repositoryIds,
      permissions,
      expires_at: Date.now() + tokenTtlMs,
    };
    state.tokens.set(token, issued);
    state.tokensIssued.set(installation.id, (state.tokensIssued.get(installation.id) ?? 0) + 1);
    return {
      token,
      expires_at: new Date(issued.expires_at).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      permissions,
      repository_selection: repositoryIds === null ? installation.repository_selection : 'selected',
      ...(repositoryIds === null
        ? {}
        : { repositories: repositoryIds.map((rid) => shapes.repositoryJson(state.repositories.get(rid)!)) }),
    };
  }

  return { requireJwt, requireToken, repoFor, issueToken };
}
