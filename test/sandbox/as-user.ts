// Run by limits.test.ts as an ordinary user (not a test file itself): the sandbox's checks
// where RLIMIT_NPROC, not a cgroup, bounds processes, and the setup network, which pasta gives
// (and the egress filter is loaded into) a sandbox of a non-root user differently. Prints one
// JSON report on stdout.
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
    network: 'none',
    signal: new AbortController().signal,
  });

const write = await run('id -u | sed s/^/uid=/; echo written > f.txt; echo x >> .git/config');
// As in limits.test.ts: once the bomb runs the shell never forks again (a failed fork would end
// it before the count), so the wait starts first and the count is a glob and a builtin.
const bomb = await run(
  'sleep 1 & waiter=$!; (bomb() { bomb | bomb & }; bomb) & wait $waiter; ' +
    'set -- /proc/[0-9]*; echo "alive: $#"',
  64,
);
const alive = Number(/alive: (\d+)/.exec(bomb.output)?.[1] ?? 'NaN');
const tag = `${2000 + process.pid}`;
await run(`sleep ${tag} & echo`);

const leftBehind: string[] = [];
for (const pid of await readdir('/proc')) {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (cmdline.includes(`sleep\0${tag}`)) leftBehind.push(pid);
}

/** A server of the sandbox on its own loopback, answering `loopback`, started in the background. */
const OWN_SERVER =
  'perl -MIO::Socket::IP -e \'my $s = IO::Socket::IP->new(LocalHost => "127.0.0.1", LocalPort => 7781, ' +
  'Listen => 5) or die "listen: $@"; open my $f, ">", "/tmp/up"; close $f; ' +
  'while (my $c = $s->accept) { print $c "loopback\\n"; close $c }\' & ' +
  'while [ ! -e /tmp/up ]; do sleep 0.05; done';

// A setup command's network as an ordinary user: pasta enters the sandbox's one user namespace.
const networked =
  status.available && status.network.available
    ? await runSandboxed({
        checkout,
        cwd: checkout,
        command: [
          'id -u',
          `awk '$2 == "00000000" { print "default-route" }' /proc/net/route`,
          "bash -c 'echo > /dev/tcp/127.0.0.1/5432' 2>/dev/null && echo postgres-connected",
          'echo x > /dev/null && echo dev-null-writable',
          // The egress filter, loaded by this non-root sandbox itself, leaves the sandbox its own
          // loopback (a server of its own answers there), and the command has no capability to
          // undo it. What it refuses, as nobody too: egress.test.ts, from a network of its own.
          `${OWN_SERVER} && bash -c 'exec 3<>/dev/tcp/127.0.0.1/7781 && read -r line <&3 && echo "own-$line"'`,
          "grep -q '^CapBnd:\\s*0*$' /proc/self/status && grep -q '^CapEff:\\s*0*$' /proc/self/status && echo no-capabilities",
          'nft flush ruleset 2>/dev/null || echo flush-refused',
          // What it reaches beyond the machine, names resolved through the resolver pasta maps
          // included, is shown as nobody too from a network of the test's own (egress.test.ts,
          // resolver.test.ts): nothing here sends a packet off the machine.
          // A secret, on the descriptor after the network's and the filter's.
          '[ "$SETUP_SECRET" = as-user-secret-0123 ] && echo secret-read',
        ].join('; '),
        limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20 },
        network: 'open',
        secretEnv: { SETUP_SECRET: 'as-user-secret-0123' },
        signal: new AbortController().signal,
      })
    : null;

process.stdout.write(
  JSON.stringify({
    network: networked?.output ?? 'unavailable',
    available: status.available,
    processLimit: status.available ? status.processLimit : null,
    memoryLimit: status.available ? status.memoryLimit : null,
    uid: write.output.split('\n')[0],
    wrote: await readFile(`${checkout}/f.txt`, 'utf8'),
    forkBombStopped: !bomb.timedOut && /Cannot fork/.test(bomb.output),
    forkBombAlive: alive <= 65,
    leftBehind,
    gitConfigRefused: /Read-only file system/.test(write.output),
  }),
);
