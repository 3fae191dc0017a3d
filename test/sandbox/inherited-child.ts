// Run by escape.test.ts as a child process (not a test file itself), started with a pipe on
// descriptor 40 that it inherits without close-on-exec, as Errand inherits whatever its
// supervisor leaves open (Node marks only 0 to 15 and those right after them close-on-exec):
// a sandboxed command tries to write into that descriptor and says what it is. Prints the
// command's output.
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { runSandboxed } from '../../src/sandbox/sandbox.ts';

const checkout = process.argv[2];
if (checkout === undefined) throw new Error('usage: inherited-child.ts <checkout>');

const result = await runSandboxed({
  checkout,
  cwd: checkout,
  command: "bash -c 'echo leaked >&40' 2>/dev/null && echo wrote-40; readlink /proc/self/fd/40",
  limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20 },
  network: 'none',
  signal: new AbortController().signal,
});
process.stdout.write(result.output);
