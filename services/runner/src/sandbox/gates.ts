import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@threadwork/platform';
import { startEgressProxy, type EgressPolicy, type EgressProxy, type EgressRefusal } from './egress.js';
import { EGRESS_SOCKET, MODEL_SOCKET } from './jail.js';
import { startModelProxy, type ModelProxy } from './model-proxy.js';
import type { ModelApi, ModelPin } from './model-api/dialect.js';

// A jail's only ways out, served by the runner for one jailed harness process: the model proxy
// (the key added outside) and the egress proxy (the policy enforced outside), their sockets in a
// directory private to the runner that the jail sees as JAIL_RUN_DIR. A jail that runs as a uid of
// its own outside reaches them through that uid's group: the directory and the sockets are the
// runner's, of that group, and no one else's.

export interface GateOptions {
  /**
   * The API the harness speaks, the real endpoint and its key, and what the requests are billed as
   * to begin with (model-api/).
   */
  model: { api: ModelApi; baseUrl: string; apiKey: string | null; pin: ModelPin };
  egress: EgressPolicy;
  logger: Logger;
  /** Every request a gate refused: off the model API, or to a destination the policy does not allow. */
  refused(refusal: GateRefusal): void;
  /** The uid (and gid) the jail runs as outside, when not the runner's own. */
  owner?: number | null;
}

export type GateRefusal =
  ({ gate: 'egress' } & EgressRefusal) | { gate: 'model'; method: string; path: string; reason: string };

export interface JailGates {
  /** Host directory with the sockets, bound into the jail. */
  readonly runDir: string;
  /** The path prefix of the model API on the model proxy (that of the real endpoint). */
  readonly modelBasePath: string;
  /** Bills the jail's model requests from now on as the turn about to run (its model, its run). */
  pinModel(pin: ModelPin): void;
  close(): Promise<void>;
}

export async function openGates(opts: GateOptions): Promise<JailGates> {
  const runDir = await mkdtemp(join(tmpdir(), 'threadwork-jail-'));
  let model: ModelProxy | null = null;
  let egress: EgressProxy | null = null;
  const close = async () => {
    await model?.close();
    await egress?.close();
    await rm(runDir, { recursive: true, force: true });
  };
  try {
    model = await startModelProxy(join(runDir, MODEL_SOCKET), {
      ...opts.model,
      logger: opts.logger,
      refused: (r) => opts.refused({ gate: 'model', ...r }),
    });
    egress = await startEgressProxy(join(runDir, EGRESS_SOCKET), {
      policy: opts.egress,
      refused: (r) => opts.refused({ gate: 'egress', ...r }),
    });
    if (opts.owner !== undefined && opts.owner !== null) {
      // Connecting takes write permission on the socket, and search on its directory.
      for (const socket of [model.socketPath, egress.socketPath]) {
        await chown(socket, 0, opts.owner);
        await chmod(socket, 0o660);
      }
      await chown(runDir, 0, opts.owner);
      await chmod(runDir, 0o710);
    }
    const proxy = model;
    return { runDir, modelBasePath: model.basePath, pinModel: (pin) => proxy.pin(pin), close };
  } catch (err) {
    await close();
    throw err;
  }
}
