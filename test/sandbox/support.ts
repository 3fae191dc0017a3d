// Shared by the sandbox tests: whether real bubblewrap runs here (the tests skip with its
// reason when not), and a run of one command in a checkout with test-sized limits.
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DEFAULT_LIMITS, type SandboxLimits } from '../../src/projects/limits.ts';
import { descendants } from '../../src/sandbox/processes.ts';
import { runSandboxed, sandboxStatus } from '../../src/sandbox/sandbox.ts';
import type { SandboxResult, SandboxRun } from '../../src/sandbox/types.ts';

const status = await sandboxStatus();
/** false where the sandbox works; otherwise why not, printed as the tests' skip reason. */
export const skip: false | string = status.available
  ? false
  : `sandbox unavailable: ${status.reason} (${status.howToFix})`;
if (skip) console.log(`# ${skip}`);
/** As `skip`, for the tests of setup commands' network (pasta): why it does not run here. */
export const skipNetwork: false | string =
  skip ||
  (status.available && !status.network.available
    ? `setup network unavailable: ${status.network.reason} (${status.network.howToFix})`
    : false);
export const sandbox = status;

/**
 * A Perl script (Perl is part of every Debian system) that asks the proxy in $HTTPS_PROXY to
 * CONNECT to each `host:port` of its arguments and prints `host:port` and the proxy's status line.
 */
export const CONNECT = [
  'use IO::Socket::IP;',
  'my ($ph, $pp) = $ENV{HTTPS_PROXY} =~ m{^http://([^:/]+):(\\d+)$} or die "no HTTPS_PROXY\\n";',
  'for (@ARGV) {',
  '  my $s = IO::Socket::IP->new(PeerHost => $ph, PeerPort => $pp, Timeout => 5)',
  '    or do { print "$_ $@\\n"; next };',
  '  print $s "CONNECT $_ HTTP/1.1\\r\\nHost: $_\\r\\n\\r\\n";',
  '  my $line = <$s> // "no answer"; $line =~ s/\\r?\\n$//; print "$_ $line\\n";',
  '}',
].join(' ');

export const TEST_LIMITS: SandboxLimits = { ...DEFAULT_LIMITS, timeoutSeconds: 20 };

export function run(
  checkout: string,
  command: string,
  extra: Partial<Omit<SandboxRun, 'checkout' | 'command'>> = {},
): Promise<SandboxResult> {
  return runSandboxed({
    checkout,
    cwd: checkout,
    command,
    limits: TEST_LIMITS,
    network: 'none',
    signal: new AbortController().signal,
    ...extra,
  });
}

/** This test process's descendants whose command line contains `needle`. */
/**
 * A command that says it runs, then waits until the test lets it end: pass `command` and
 * `onStdoutLine` to run(); `running` resolves once it has said so, `release()` lets it end
 * (it removes the file it waited for: the checkout is left as it was).
 */
export function heldCommand(checkout: string) {
  let started = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  return {
    command: 'echo running; while [ ! -e .release ]; do sleep 0.05; done; rm -f .release',
    onStdoutLine: (line: string) => {
      if (line === 'running') started();
    },
    running,
    release: () => writeFile(join(checkout, '.release'), ''),
  };
}

export async function childrenRunning(needle: string): Promise<number[]> {
  const out: number[] = [];
  for (const pid of await descendants(process.pid)) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) out.push(pid);
  }
  return out;
}

/** Every live process on the host (any parent) whose argv is exactly `argv`. */
export async function hostProcesses(...argv: string[]): Promise<number[]> {
  const want = `${argv.join('\0')}\0`;
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => null);
    if (stat === null || stat[stat.lastIndexOf(')') + 2] === 'Z') continue;
    if ((await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')) === want) {
      out.push(Number(name));
    }
  }
  return out;
}

/**
 * Whether a user other than the owner may read the clone once it is reachable: its root and
 * test files world-readable and its directories world-searchable (a umask of 077 makes none).
 */
export async function readableByOthers(repo: string): Promise<boolean> {
  const checks: [string, number][] = [
    [repo, 0o005],
    [join(repo, 'test/sandbox'), 0o005],
    [join(repo, 'test/sandbox/as-user.ts'), 0o004],
    [join(repo, 'test/sandbox/outside-run.ts'), 0o004],
    [join(repo, 'src/sandbox/sandbox.ts'), 0o004],
    [join(repo, 'node_modules'), 0o005],
  ];
  for (const [file, bits] of checks) {
    const info = await stat(file).catch(() => undefined);
    if (!info || (info.mode & bits) !== bits) return false;
  }
  return true;
}
