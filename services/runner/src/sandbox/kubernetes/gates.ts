import { join } from 'node:path';
import { openGates } from '../gates.js';
import { BRIDGE_PORT, EGRESS_PORT, egressEnv, EGRESS_SOCKET, MODEL_SOCKET } from '../jail.js';
import { openPodBridge } from './bridge.js';
import type { PodExec } from './exec.js';
import type { OpenPodGates } from './process.js';

// A pod's ways out, as a jail's: the runner's model proxy (the key added outside) and egress proxy
// (the policy enforced outside) on unix sockets of the runner's, reached from the pod through a
// bridge carried over exec (bridge.ts) on the same loopback ports a jail's bridge uses. The pod has
// no network of its own (its NetworkPolicy denies it all), so these are its only ways out.

/** The loopback ports in the pod the bridge listens on: a jail's by default. */
export interface GatePorts {
  model: number;
  egress: number;
}

/** Opens the gates for one harness process of a pod of `exec`'s. */
export function bridgedGates(
  exec: PodExec,
  ports: GatePorts = { model: BRIDGE_PORT, egress: EGRESS_PORT },
): OpenPodGates {
  return async (options) => {
    const gates = await openGates(options);
    try {
      const bridge = await openPodBridge(
        exec,
        [
          { port: ports.model, socketPath: join(gates.runDir, MODEL_SOCKET) },
          { port: ports.egress, socketPath: join(gates.runDir, EGRESS_SOCKET) },
        ],
        {
          logger: options.logger,
          // The pod broke the bridge's protocol: the agent at work on the pod's side of it. The
          // bridge is closed; the harness loses its model and the turn fails.
          refused: (reason) =>
            options.logger.error({ reason }, 'the pod bridge was cut off: a frame broke its protocol'),
        },
      );
      return {
        modelBaseUrl: `http://127.0.0.1:${ports.model}${gates.modelBasePath}`,
        env: egressEnv(ports.egress),
        processes: bridge.identity ? [bridge.identity] : [],
        pinModel: (pin) => gates.pinModel(pin),
        close: async () => {
          await bridge.close();
          await gates.close();
        },
      };
    } catch (err) {
      await gates.close();
      throw err;
    }
  };
}
