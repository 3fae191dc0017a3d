// The limits each of a project's commands runs under, and their defaults: a project stores its
// own or null for the default (projectCommandLimits in service.ts), and the sandbox
// (src/sandbox/) enforces them. Here, below both, so projects need not load the sandbox.

export interface SandboxLimits {
  /** Wall time; the command and every process it started are killed after it. */
  timeoutSeconds: number;
  /** RLIMIT_CPU, per process. */
  cpuSeconds: number;
  /**
   * Memory of one run: of all its processes together (with its scratch files) where a memory
   * cgroup can be made, past which the run is stopped; and RLIMIT_DATA per process (heap and
   * private writable mappings) everywhere.
   */
  memoryMb: number;
  /** Processes and threads the command may have at once. */
  processes: number;
  /** RLIMIT_FSIZE: no file is written larger (it bounds one file, not the checkout's disk). */
  fileSizeMb: number;
  /**
   * How much the checkout (with an engine's state directory) may grow in one run: past it the
   * run is stopped. The disk all files together take, which fileSizeMb does not bound.
   */
  diskMb: number;
}

export const DEFAULT_LIMITS: SandboxLimits = Object.freeze({
  timeoutSeconds: 300,
  cpuSeconds: 300,
  memoryMb: 2048,
  processes: 256,
  fileSizeMb: 1024,
  diskMb: 4096,
});
