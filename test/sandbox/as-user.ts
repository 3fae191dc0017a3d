// Run by limits.test.ts as an ordinary user (not a test file itself): the sandbox's checks
// where RLIMIT_NPROC, not a cgroup, bounds processes. Prints one JSON report on stdout.
import { readdir, readFile } from 'node:fs/promises';
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { runSandboxed, sandboxStatus } from '../../src/sandbox/sandbox.ts';

const checkout = process.argv[2];
if (checkout === undefined) throw new Error('usage: as-user.ts <checkout>');

const status = await sandboxStatus();
const run = (command: string, processes = DEFAULT_LIMITS.processes) =>
  runSandboxed({
    checkout,
    cwd: checkout,
    command,
    limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20, processes },
    network: false,
    signal: new AbortController().signal,
  });

const write = await run('id -u | sed s/^/uid=/; echo written > f.txt; echo x >> .git/config');
const bomb = await run(
  'bomb() { bomb | bomb & }; bomb; sleep 1; echo "alive $(ls /proc | grep -c "^[0-9]")"',
  64,
);
const alive = Number(/alive (\d+)/.exec(bomb.output)?.[1] ?? 'NaN');
const tag = `${2000 + process.pid}`;
await run(`sleep ${tag} & echo`);

const leftBehind: string[] = [];
for (const pid of await readdir('/proc')) {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (cmdline.includes(`sleep\0${tag}`)) leftBehind.push(pid);
}

process.stdout.write(
  JSON.stringify({
    available: status.available,
    processLimit: status.available ? status.processLimit : null,
    uid: write.output.split('\n')[0],
    wrote: await readFile(`${checkout}/f.txt`, 'utf8'),
    forkBombStopped: !bomb.timedOut && /Cannot fork/.test(bomb.output),
    forkBombAlive: alive <= 65,
    leftBehind,
    gitConfigRefused: /Read-only file system/.test(write.output),
  }),
);
