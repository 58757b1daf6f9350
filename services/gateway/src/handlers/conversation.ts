import {
  ControlList,
  ControlListQuery,
  ControlSubmission,
  IdParam,
  MessageAccepted,
  MessagePage,
  MessagePageQuery,
  QueueBody,
  SendMessageBody,
  SteerBody,
  TaskControlList,
  View,
  rpc,
} from '@threadwork/contracts';
import type { App, HandlerDeps, RoutePlugin } from './deps.js';
import { conflictingWriteErrors, readErrors } from './error-responses.js';
import { asShape, ownerOf, pathId } from './parse.js';

/** Follow-ups to a thread: send, queue and steer, and reading its messages and controls back. */
export const conversationRoutes: RoutePlugin = async (app, deps) => {
  app.post(
    '/v1/threads/:id/messages',
    {
      schema: {
        summary: 'Send a message to an idle thread, admitting a new run',
        description: 'While a run is active this is 409 `thread_busy`: queue or steer instead.',
        tags: ['threads'],
        params: IdParam,
        body: SendMessageBody,
        response: { 202: MessageAccepted.describe('Message accepted, run admitted'), ...conflictingWriteErrors },
      },
    },
    async (request, reply) => {
      const accepted = await deps.services.request(rpc.threads.message, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        body: request.body,
      });
      return reply.code(202).send(accepted);
    },
  );

  app.post(
    '/v1/threads/:id/queue',
    {
      schema: {
        summary: 'Queue a message behind the current run',
        description:
          'On an idle thread the control is applied at once and `run` is the admitted run; otherwise it stays `pending` until the active run ends.',
        tags: ['threads'],
        params: IdParam,
        body: QueueBody,
        response: { 202: ControlSubmission.describe('Control recorded'), ...conflictingWriteErrors },
      },
    },
    async (request, reply) => {
      const submission = await deps.services.request(rpc.threads.queue, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        body: request.body,
      });
      return reply.code(202).send(submission);
    },
  );

  app.post(
    '/v1/threads/:id/steer',
    {
      schema: {
        summary: 'Add an instruction to the active run',
        description: 'Creates no run; without an active run this is 409 `no_active_run`.',
        tags: ['threads'],
        params: IdParam,
        body: SteerBody,
        response: { 202: ControlSubmission.describe('Control recorded'), ...conflictingWriteErrors },
      },
    },
    async (request, reply) => {
      const submission = await deps.services.request(rpc.threads.steer, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        body: request.body,
      });
      return reply.code(202).send(submission);
    },
  );

  for (const view of View.options) messageAndControlReads(app, deps, view);
};

/** The same reads exist in both vocabularies; only the controls' owner field differs. */
function messageAndControlReads(app: App, deps: HandlerDeps, view: View): void {
  const base = view === 'thread' ? '/v1/threads' : '/v1/tasks';
  const tag = view === 'thread' ? 'threads' : 'tasks';

  app.get(
    `${base}/:id/messages`,
    {
      schema: {
        summary: `Page through the ${view}'s messages, oldest first`,
        tags: [tag],
        params: IdParam,
        querystring: MessagePageQuery,
        response: { 200: MessagePage, ...readErrors },
      },
    },
    async (request) =>
      deps.services.request(rpc.threads.messages, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        limit: request.query.limit,
        ...(request.query.cursor === undefined ? {} : { cursor: request.query.cursor }),
      }),
  );

  const controlsPath = `${base}/:id/controls`;
  const controlsSchema = {
    summary: `List the ${view}'s run controls (queued and steering messages)`,
    tags: [tag],
    params: IdParam,
    querystring: ControlListQuery,
  };
  const controlsRequest = (owner: string, id: string, status: ControlListQuery['status']) => ({
    owner_id: owner,
    thread_id: pathId(id),
    view,
    ...(status === undefined ? {} : { status }),
  });

  if (view === 'thread') {
    app.get(
      controlsPath,
      { schema: { ...controlsSchema, response: { 200: ControlList, ...readErrors } } },
      async (request) =>
        asShape(
          ControlList,
          await deps.services.request(
            rpc.threads.controls,
            controlsRequest(ownerOf(request), request.params.id, request.query.status),
          ),
        ),
    );
  } else {
    app.get(
      controlsPath,
      { schema: { ...controlsSchema, response: { 200: TaskControlList, ...readErrors } } },
      async (request) =>
        asShape(
          TaskControlList,
          await deps.services.request(
            rpc.threads.controls,
            controlsRequest(ownerOf(request), request.params.id, request.query.status),
          ),
        ),
    );
  }
}
