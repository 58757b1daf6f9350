import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A seccomp filter for everything in a jail (bubblewrap loads it, `--seccomp`): the system calls an
// agent could use against the harness beside it, or against the kernel, fail. The harness and the
// agent share a uid inside the jail, so without this (and with no Yama on the host) the agent could
// ptrace Codex or take its file descriptors (`pidfd_getfd`): its channel to the runner, where it
// could forge the turn's events. New user namespaces stay allowed: Codex's own sandbox, the second
// layer around each command, is made of them.
// A classic BPF program, written by hand: check the architecture, then the call's number.

interface Denied {
  /** System call numbers by architecture (Node's `process.arch`). */
  x64: number;
  arm64: number;
  errno: number;
}

const EPERM = 1;
const ENOSYS = 38;

/** What the filter refuses, and with which error (ENOSYS where callers fall back, as libuv for io_uring). */
const DENIED: Record<string, Denied> = {
  ptrace: { x64: 101, arm64: 117, errno: EPERM },
  process_vm_readv: { x64: 310, arm64: 270, errno: EPERM },
  process_vm_writev: { x64: 311, arm64: 271, errno: EPERM },
  pidfd_getfd: { x64: 438, arm64: 438, errno: EPERM },
  kcmp: { x64: 312, arm64: 272, errno: EPERM },
  bpf: { x64: 321, arm64: 280, errno: EPERM },
  perf_event_open: { x64: 298, arm64: 241, errno: EPERM },
  userfaultfd: { x64: 323, arm64: 282, errno: EPERM },
  keyctl: { x64: 250, arm64: 219, errno: EPERM },
  add_key: { x64: 248, arm64: 217, errno: EPERM },
  request_key: { x64: 249, arm64: 218, errno: EPERM },
  io_uring_setup: { x64: 425, arm64: 425, errno: ENOSYS },
  io_uring_enter: { x64: 426, arm64: 426, errno: ENOSYS },
  io_uring_register: { x64: 427, arm64: 427, errno: ENOSYS },
};

/** `AUDIT_ARCH_*` of the architectures the filter knows. */
const AUDIT_ARCH = { x64: 0xc000003e, arm64: 0xc00000b7 } as const;
/** x86_64's x32 ABI: numbers with this bit set, which would bypass a filter on the plain ones. */
const X32_SYSCALL_BIT = 0x40000000;

const BPF_LD_W_ABS = 0x20;
const BPF_JMP_JEQ_K = 0x15;
const BPF_JMP_JGE_K = 0x35;
const BPF_RET_K = 0x06;
const SECCOMP_RET_KILL_PROCESS = 0x80000000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_ALLOW = 0x7fff0000;
/** Offsets in `struct seccomp_data`. */
const NR = 0;
const ARCH = 4;

type Insn = [code: number, jt: number, jf: number, k: number];

/** The filter for this machine's architecture, as bubblewrap reads it; null where it has none. */
export function seccompProgram(arch: string = process.arch): Buffer | null {
  if (arch !== 'x64' && arch !== 'arm64') return null;
  const program: Insn[] = [
    [BPF_LD_W_ABS, 0, 0, ARCH],
    // Another architecture's calls (x86's 32-bit ones) have other numbers: none may pass.
    [BPF_JMP_JEQ_K, 1, 0, AUDIT_ARCH[arch]],
    [BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS],
    [BPF_LD_W_ABS, 0, 0, NR],
  ];
  if (arch === 'x64') {
    program.push([BPF_JMP_JGE_K, 0, 1, X32_SYSCALL_BIT], [BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS]);
  }
  for (const denied of Object.values(DENIED)) {
    program.push([BPF_JMP_JEQ_K, 0, 1, denied[arch]], [BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | denied.errno]);
  }
  program.push([BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW]);
  const out = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}

let written: string | null | undefined;

/** The filter in a file of the runner's own (written once), for bubblewrap to read; null where there is none. */
export function seccompFile(): string | null {
  if (written !== undefined) return written;
  const program = seccompProgram();
  if (!program) return (written = null);
  const file = join(mkdtempSync(join(tmpdir(), 'threadwork-seccomp-')), 'jail.bpf');
  writeFileSync(file, program, { mode: 0o400 });
  return (written = file);
}
