// Run by outside-host.ts in the outside's namespaces, as root or as nobody (not a test file
// itself): one command in the checkout given, with the network its options name (the setup
// network 'open' unless they say 'none' or give an allowlist), and with npm from this clone's
// node_modules where they ask for it. Prints its output and the refusals told, as JSON.
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { runNetwork, runSandboxed } from '../../src/sandbox/sandbox.ts';

interface Options {
  network?: 'none' | 'open' | { allow: string[] };
  /** npm's CLI and this Node mounted read-only, named by $NPM and $NODE. */
  npm?: boolean;
}

const [checkout, command, given = '{}'] = process.argv.slice(2);
if (checkout === undefined || command === undefined) {
  throw new Error('usage: outside-run.ts <checkout> <command> [<options as JSON>]');
}
const options = JSON.parse(given) as Options;
const denied: Record<string, unknown>[] = [];
const asked = options.network ?? 'open';
const network = runNetwork(
  typeof asked === 'object' ? 'allowlist' : asked,
  typeof asked === 'object' ? asked.allow : [],
  async (type, data) => {
    denied.push({ type, ...data });
  },
);
const npmDir = new URL('../../node_modules/npm', import.meta.url).pathname;
const r = await runSandboxed({
  checkout,
  cwd: checkout,
  command,
  limits: { ...DEFAULT_LIMITS, timeoutSeconds: 60 },
  network: network.network,
  signal: new AbortController().signal,
  ...(options.npm
    ? {
        readOnlyBinds: [process.execPath, npmDir],
        env: { NODE: process.execPath, NPM: `${npmDir}/bin/npm-cli.js` },
      }
    : {}),
});
await network.settled();
process.stdout.write(JSON.stringify({ output: r.output, denied }));
