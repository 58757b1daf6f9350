import fp from 'fastify-plugin';

/**
 * An empty body with `content-type: application/json` is "no body" (a bodiless POST from a client
 * that always sets the header); routes that need one then say `body: …` is missing.
 */
export const jsonBody = fp(
  async (app) => {
    const parseJson = app.getDefaultJsonParser('error', 'error');
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      if (text === '') return done(null, undefined);
      parseJson(request, text, done);
    });
  },
  { name: 'json-body' },
);
