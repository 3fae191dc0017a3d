// Run by resolver.test.ts in a mount namespace of its own whose /etc/resolv.conf names a
// resolver on the host's loopback (not a test file itself): one setup command with the network,
// which prints the sandbox's resolv.conf and resolves a name. Prints the run's output.
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { runSandboxed } from '../../src/sandbox/sandbox.ts';

const [checkout, name] = process.argv.slice(2);
if (checkout === undefined || name === undefined) {
  throw new Error('usage: resolver-child.ts <checkout> <name>');
}
const r = await runSandboxed({
  checkout,
  cwd: checkout,
  command: `cat /etc/resolv.conf; getent ahostsv4 ${name} | head -1 || echo not-resolved`,
  limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20 },
  network: true,
  signal: new AbortController().signal,
});
process.stdout.write(r.output);
