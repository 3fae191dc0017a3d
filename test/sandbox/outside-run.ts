// Run by outside-host.ts in the outside's namespaces, as root or as nobody (not a test file
// itself): one setup command with network in the checkout given, its output printed.
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { runSandboxed } from '../../src/sandbox/sandbox.ts';

const [checkout, command] = process.argv.slice(2);
if (checkout === undefined || command === undefined) {
  throw new Error('usage: outside-run.ts <checkout> <command>');
}
const r = await runSandboxed({
  checkout,
  cwd: checkout,
  command,
  limits: { ...DEFAULT_LIMITS, timeoutSeconds: 60 },
  network: true,
  signal: new AbortController().signal,
});
process.stdout.write(r.output);
