// What a route takes from a request, checked: its caller, its path ids, the shape a service answered.
import { SubjectTokenError, subjectToken } from '@threadwork/contracts';
import { AppError, notFound } from '@threadwork/platform';
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';

/** The caller every handler acts for; authentication (http/auth.ts) has refused anyone else already. */
export function ownerOf(req: FastifyRequest): string {
  if (!req.user) throw new AppError('unauthorized', 'Unauthorized');
  return req.user._id;
}

/**
 * A path id that can also be one NATS subject token. Ids we hand out always can; anything else
 * (a `.`, a wildcard, whitespace) names nothing that exists, which the contract calls 404.
 */
export function pathId(id: string): string {
  try {
    return subjectToken(id, 'id');
  } catch (err) {
    if (err instanceof SubjectTokenError) throw notFound('resource');
    throw err;
  }
}

/**
 * Services answer one vocabulary's shape for each view, but the endpoints are typed with the union
 * of both; parsing with the one the route promises narrows the type (and a wrong shape is a 500).
 */
export function asShape<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  return schema.parse(value) as z.output<S>;
}
