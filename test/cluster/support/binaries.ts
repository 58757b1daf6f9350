// The control plane's binaries for a cluster test file, built (and cached) on first use; without
// Go to build them the file is skipped, saying why.
import type { ControlPlaneBinaries } from '@threadwork/testing';
import { CONTROL_PLANE_TOOLS, ensureTool } from '../../../deploy/local/tools.mjs';

export type Binaries = ControlPlaneBinaries | Error;

function build(): Binaries {
  try {
    return Object.fromEntries(
      CONTROL_PLANE_TOOLS.map((name) => [name, ensureTool(name)]),
    ) as unknown as ControlPlaneBinaries;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

export const binaries: Binaries = build();

/** No Go toolchain to build what is not cached: the file's tests are skipped. */
export const missingGo = binaries instanceof Error && /no Go toolchain/.test(binaries.message);
if (missingGo) process.stderr.write(`test/cluster: skipped — ${(binaries as Error).message}\n`);

/** The binaries, or the build's failure (any other than a missing Go) thrown. */
export function controlPlaneBinaries(): ControlPlaneBinaries {
  if (binaries instanceof Error) throw binaries;
  return binaries;
}
