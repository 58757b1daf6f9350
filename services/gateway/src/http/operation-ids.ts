/**
 * The `operationId` of every documented route, by `METHOD path` as fastify registers it. Client
 * generators name their methods after these, so they are part of the API: never rename one. A
 * documented route missing from this table stops the gateway at start (see `server.ts`).
 */
export const OPERATION_IDS: Readonly<Record<string, string>> = {
  'GET /v1/work': 'listWork',
  'POST /v1/tasks': 'createTask',
  'GET /v1/tasks': 'listTasks',
  'GET /v1/tasks/:id': 'getTask',
  'GET /v1/tasks/:id/runs/resumable': 'getResumableTaskRun',
  'GET /v1/tasks/:id/messages': 'listTaskMessages',
  'GET /v1/tasks/:id/controls': 'listTaskControls',
  'POST /v1/threads': 'createThread',
  'GET /v1/threads/:id': 'getThread',
  'POST /v1/threads/:id/messages': 'sendThreadMessage',
  'GET /v1/threads/:id/messages': 'listThreadMessages',
  'POST /v1/threads/:id/queue': 'queueThreadMessage',
  'POST /v1/threads/:id/steer': 'steerThreadRun',
  'GET /v1/threads/:id/controls': 'listThreadControls',
  'GET /v1/threads/:id/interactions': 'listThreadInteractions',
  'GET /v1/threads/:id/review': 'getThreadReview',
  'GET /v1/runs/:id': 'getRun',
  'POST /v1/runs/:id/cancel': 'cancelRun',
  'GET /v1/runs/:id/events': 'listRunEvents',
  'GET /v1/runs/:id/events/stream': 'streamRunEvents',
  'GET /v1/interactions/:id': 'getInteraction',
  'POST /v1/interactions/:id/answer': 'answerInteraction',
  'GET /v1/repohost/connection': 'getRepohostConnection',
  'GET /v1/repohost/repositories': 'listRepositories',
  'POST /v1/repohost/install-session': 'createInstallSession',
  'GET /v1/repohost/setup': 'completeRepohostSetup',
  'POST /v1/repohost/installations': 'linkRepohostInstallation',
  'POST /v1/repohost/webhooks': 'receiveGithubWebhook',
  'GET /v1/harnesses': 'listHarnesses',
  'GET /v1/openapi.json': 'getOpenApiDocument',
  'GET /healthz': 'getLiveness',
  'GET /readyz': 'getReadiness',
};
