import { HTTP_STATUS_BY_CODE, SubjectTokenError } from '@threadwork/contracts';
import { AppError, retryAfterSeconds, toAppError } from '@threadwork/platform';
import type { FastifyError, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { discardBody } from './oversized-body.js';

/** What a 500 says, whatever failed: the details are in the log under the request's id. */
const INTERNAL_MESSAGE = 'internal error';

/** The contract's error body: `{error: {code, message}}`. */
export function sendError(reply: FastifyReply, status: number, code: string, message: string) {
  return reply.code(status).send({ error: { code, message } });
}

/** `/prompt` of a zod issue in `body` → `body.prompt`; the root → `body`. */
function fieldName(context: string, instancePath: string): string {
  const path = instancePath.split('/').filter(Boolean).join('.');
  return path ? `${context}.${path}` : context;
}

/** Fastify's own request errors, named after the part of the request at fault. */
const FASTIFY_REQUEST_ERRORS: Record<string, string> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'body: not valid JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'headers.content-type: unsupported media type (send application/json)',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'headers.content-length: does not match the body',
};

/**
 * The one error handler: maps the closed set of error codes (and fastify's and zod's complaints
 * about a request) to status codes and the contract's error body, and unknown routes to 404.
 */
export const errorMapping = fp<{ bodyLimit: number }>(
  async (app, { bodyLimit }) => {
    app.setErrorHandler((err: FastifyError, request, reply) => {
      if (hasZodFastifySchemaValidationErrors(err)) {
        const issue = err.validation[0];
        const context = err.validationContext ?? 'body';
        if (!issue) return sendError(reply, 400, 'invalid_request', `${context}: invalid`);
        // A strict object reports unknown properties at its own path; name the property instead.
        const unknownKey =
          issue.keyword === 'unrecognized_keys' ? (issue.params.keys as string[] | undefined)?.[0] : undefined;
        const where = fieldName(
          context,
          unknownKey === undefined ? issue.instancePath : `${issue.instancePath}/${unknownKey}`,
        );
        const message = unknownKey === undefined ? (issue.message ?? 'invalid') : 'unknown property';
        return sendError(reply, 400, 'invalid_request', `${where}: ${message}`);
      }
      if (err instanceof SubjectTokenError) return sendError(reply, 404, 'not_found', 'resource not found');
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
        const limit = request.routeOptions.bodyLimit ?? bodyLimit;
        // Fastify asks for the connection to be closed; let the client finish sending first.
        return discardBody(request.raw).then(() =>
          sendError(reply, 413, 'payload_too_large', `request body is larger than ${limit} bytes`),
        );
      }
      if (!(err instanceof AppError) && err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
        // Fastify's own complaints about the request (JSON syntax, media type, lengths).
        return sendError(reply, 400, 'invalid_request', FASTIFY_REQUEST_ERRORS[err.code] ?? `request: ${err.message}`);
      }
      const appErr = toAppError(err);
      if (appErr.code === 'internal') {
        // The failure's own text (a service's, GitHub's through repohost) is for the log only: the
        // client gets the code and the request id (X-Request-Id) to quote.
        request.log.error({ err }, 'request failed');
        return sendError(reply, 500, 'internal', INTERNAL_MESSAGE);
      }
      if (appErr.code === 'unauthorized') return reply.code(401).send({ error: 'Unauthorized' });
      // Worth retrying; say when: as the service that refused says, else soon.
      if (appErr.code === 'unavailable' || appErr.code === 'rate_limited' || appErr.code === 'too_many_streams') {
        reply.header('retry-after', String(retryAfterSeconds(appErr)));
      }
      return sendError(reply, HTTP_STATUS_BY_CODE[appErr.code], appErr.code, appErr.message);
    });

    app.setNotFoundHandler((_request, reply) => sendError(reply, 404, 'not_found', 'no such route'));
  },
  { name: 'error-mapping' },
);
