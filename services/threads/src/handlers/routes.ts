import { rpc } from '@threadwork/contracts';
import { route, type RpcRoute } from '@threadwork/platform';
import { createThread } from '../flows/create.js';
import type { Deps } from '../flows/deps.js';
import { queueMessage, sendMessage, steerRun } from '../flows/followups.js';
import {
  getThread,
  listControls,
  listMessages,
  listTasks,
  resumableRun,
  threadProject,
  workList,
} from '../flows/reads.js';
import { readSteer } from '../flows/steer-read.js';

/** Every `rpc.threads.*` endpoint; the request is parsed against its schema before it gets here. */
export function threadsRoutes(deps: Deps): RpcRoute[] {
  return [
    route(rpc.threads.create, (req) => createThread(deps, req)),
    route(rpc.threads.get, (req) => getThread(deps, req)),
    route(rpc.threads.list, (req) => listTasks(deps, req)),
    route(rpc.threads.work, (req) => workList(deps, req)),
    route(rpc.threads.project, (req) => threadProject(deps, req)),
    route(rpc.threads.resumable, (req) => resumableRun(deps, req)),
    route(rpc.threads.message, (req) => sendMessage(deps, req)),
    route(rpc.threads.queue, (req) => queueMessage(deps, req)),
    route(rpc.threads.steer, (req) => steerRun(deps, req)),
    route(rpc.threads.messages, (req) => listMessages(deps, req)),
    route(rpc.threads.controls, (req) => listControls(deps, req)),
    route(rpc.threads.steerRead, (req) => readSteer(deps, req)),
  ];
}
