// glibc's malloc keeps memory that V8 frees. While the embedded database warms up, V8
// compiles PGlite's WebAssembly with its optimizing tier, in buffers of up to hundreds of MiB
// on background threads; when one of those is freed, glibc raises its trim threshold (by
// default it follows the largest freed mmap, up to 64 MiB), and the freed pages stay in the
// process. Measured on `serve` with the embedded database: 290–340 MiB idle with the default,
// 200–265 MiB with the threshold fixed at its initial 128 KiB (docs: README, Benchmarks).
// The threshold is read from the environment when the process starts, so `serve` starts itself
// again once with it set. The variable itself marks the second start; a value set by the user
// is kept (an empty one counts as unset).

const TRIM_THRESHOLD = 'MALLOC_TRIM_THRESHOLD_';
const TRIM_THRESHOLD_BYTES = String(128 * 1024);

/**
 * Replaces this process (same pid, same arguments) by one whose malloc returns freed memory,
 * when that can help: Linux, the embedded database, and a Node that has `process.execve`.
 * Returns only when it does nothing.
 */
export function fixMallocTrimThreshold(env: NodeJS.ProcessEnv, embedded: boolean): void {
  if (process.platform !== 'linux' || !embedded || env[TRIM_THRESHOLD]) return;
  if (typeof process.execve !== 'function') return;
  process.execve(
    process.execPath,
    [process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    {
      ...env,
      [TRIM_THRESHOLD]: TRIM_THRESHOLD_BYTES,
    },
  );
}
