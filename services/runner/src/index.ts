import { bootService, startRuntime, type StartedService } from '@threadwork/platform';
import type { RunnerConfig } from './config.js';

export { RunnerConfig } from './config.js';

/** The runner owns no collections: run state lives in the runs service, workspaces on disk. */
export async function startRunner(config: RunnerConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'runner', config, mongo: false });
  return bootService(runtime, async () => {});
}
