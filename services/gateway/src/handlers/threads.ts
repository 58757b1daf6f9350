import {
  CreateTaskBody,
  CreateThreadBody,
  IdParam,
  ResumableRun,
  Task,
  TaskList,
  TaskWithRun,
  Thread,
  ThreadPageQuery,
  ThreadWithRun,
  WorkList,
  THREAD_PAGE_BYTES_MAX,
  THREAD_PAGE_LIMIT_DEFAULT,
  THREAD_PAGE_LIMIT_MAX,
  rpc,
} from '@threadwork/contracts';
import { z } from 'zod';
import type { RoutePlugin } from './deps.js';
import { conflictingWriteErrors, readErrors } from './error-responses.js';
import { asShape, ownerOf, pathId } from './parse.js';

const PAGING = [
  `Paged: \`limit\` threads a page (default ${THREAD_PAGE_LIMIT_DEFAULT}, at most ${THREAD_PAGE_LIMIT_MAX}), newest first;`,
  `a page also ends early once it holds ${THREAD_PAGE_BYTES_MAX / 1024} KiB.`,
  'Pass `next_cursor` back as `cursor` for the next page; it is null on the last one. A caller that sends',
  'neither gets the first page.',
].join(' ');

/** The page a list request asks for, as threads takes it. */
function pageOf(request: { query: ThreadPageQuery }, ownerId: string) {
  return {
    owner_id: ownerId,
    limit: request.query.limit,
    ...(request.query.cursor === undefined ? {} : { cursor: request.query.cursor }),
  };
}

const createDescription = [
  'Retrying with the same `client_request_id` and body returns the original answer; a different body is 409 `idempotency_conflict`.',
  'Per-user limits, checked before anything is written: 409 `too_many_runs` when the caller already has',
  'MAX_LIVE_RUNS_PER_USER runs live (queued, starting, running, waiting for input or cancelling);',
  '429 `rate_limited` with `Retry-After` past THREADS_PER_MINUTE_PER_USER creations in any minute.',
].join(' ');

/** Threads and tasks themselves: the work list, creation, reads and the resumable run. */
export const threadRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/work',
    {
      schema: {
        summary: 'List projects with their repositories, threads and latest runs',
        description: [
          PAGING,
          'Paged by thread: each page holds its threads under their projects, and a project whose threads',
          "span pages is on each of them with that page's threads (merge by `id`).",
        ].join(' '),
        tags: ['work'],
        querystring: ThreadPageQuery,
        response: { 200: WorkList, ...readErrors },
      },
    },
    async (request) => deps.services.request(rpc.threads.work, pageOf(request, ownerOf(request))),
  );

  app.post(
    '/v1/tasks',
    {
      schema: {
        summary: 'Create a task (a thread in the task vocabulary) and admit its first run',
        description: createDescription,
        tags: ['tasks'],
        body: CreateTaskBody,
        response: { 202: TaskWithRun.describe('Task created, first run admitted'), ...conflictingWriteErrors },
      },
    },
    async (request, reply) => {
      const created = await deps.services.request(rpc.threads.create, {
        owner_id: ownerOf(request),
        view: 'task',
        body: request.body,
      });
      return reply.code(202).send(asShape(TaskWithRun, created));
    },
  );

  app.get(
    '/v1/tasks',
    {
      schema: {
        summary: "List the caller's tasks",
        description: PAGING,
        tags: ['tasks'],
        querystring: ThreadPageQuery,
        response: { 200: TaskList, ...readErrors },
      },
    },
    async (request) => deps.services.request(rpc.threads.list, pageOf(request, ownerOf(request))),
  );

  app.get(
    '/v1/tasks/:id',
    {
      schema: {
        summary: 'Read a task',
        tags: ['tasks'],
        params: IdParam,
        response: { 200: Task, ...readErrors },
      },
    },
    async (request) => {
      const task = await deps.services.request(rpc.threads.get, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        view: 'task',
      });
      return asShape(Task, task);
    },
  );

  app.get(
    '/v1/tasks/:id/runs/resumable',
    {
      schema: {
        summary: "The task's active run to resume, if any",
        tags: ['tasks'],
        params: IdParam,
        response: {
          200: ResumableRun.describe('The active run'),
          204: z.null().describe('No active run'),
          ...readErrors,
        },
      },
    },
    async (request, reply) => {
      const { run } = await deps.services.request(rpc.threads.resumable, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
      });
      if (!run) return reply.code(204).send(null);
      return reply.code(200).send(run);
    },
  );

  app.post(
    '/v1/threads',
    {
      schema: {
        summary: 'Create a thread and admit its first run',
        description: createDescription,
        tags: ['threads'],
        body: CreateThreadBody,
        response: { 202: ThreadWithRun.describe('Thread created, first run admitted'), ...conflictingWriteErrors },
      },
    },
    async (request, reply) => {
      const created = await deps.services.request(rpc.threads.create, {
        owner_id: ownerOf(request),
        view: 'thread',
        body: request.body,
      });
      return reply.code(202).send(asShape(ThreadWithRun, created));
    },
  );

  app.get(
    '/v1/threads/:id',
    {
      schema: {
        summary: 'Read a thread',
        tags: ['threads'],
        params: IdParam,
        response: { 200: Thread, ...readErrors },
      },
    },
    async (request) => {
      const thread = await deps.services.request(rpc.threads.get, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        view: 'thread',
      });
      return asShape(Thread, thread);
    },
  );
};
