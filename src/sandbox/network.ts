// The user-mode network a setup command gets (SandboxRun.network): pasta (Debian's `passt`)
// joins the sandbox's own network namespace from outside and gives it an interface whose
// traffic pasta carries out through ordinary sockets of the host. Nothing maps to the host's
// loopback: no port forwarding either way, and not the gateway-to-host mapping, so Errand's
// API and a trust-auth PostgreSQL on 127.0.0.1 stay out of reach while the internet is not.
// Only DNS is mapped: queries to SANDBOX_RESOLVER go to the host's own resolver, wherever it is.
// What the namespace may reach through it is filtered (egress.ts) before the command starts.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SANDBOX_PATH } from './args.ts';
import { egressRuleset, loadEgressRules } from './egress.ts';

export const HOW_TO_INSTALL_PASTA =
  'install the passt package, which provides pasta (Debian/Ubuntu: apt-get install passt; Fedora: dnf install passt)';

/** How long pasta may take to join and configure the namespace (it takes tens of ms). */
const READY_TIMEOUT_MS = 10_000;
const STDERR_CAP = 2_000;

/**
 * The resolver a setup command is given: pasta maps it to the host's first resolver, which may
 * sit on the host's loopback (systemd-resolved's 127.0.0.53), out of the sandbox's reach. The
 * address podman's pasta networks use too.
 */
const SANDBOX_RESOLVER = '169.254.1.1';

/** A network run's /etc/resolv.conf: the host's search domains and options, the mapped resolver. */
export async function sandboxResolvConf(): Promise<string> {
  // A host without one has no search domains or options to keep, and pasta no resolver to map.
  const host = await readFile('/etc/resolv.conf', 'utf8').catch(() => '');
  const kept = host.split('\n').filter((line) => /^(search|domain|options)\s/.test(line));
  return [...kept, `nameserver ${SANDBOX_RESOLVER}`, ''].join('\n');
}

export interface NetworkTools {
  pasta: string;
  /**
   * util-linux's setpriv: gives pasta a parent-death signal (it never outlives Errand), and
   * drops the capabilities a non-root run's sandbox held to load its filter (args.ts).
   */
  setpriv: string;
  /** util-linux's nsenter, with which root loads the filter from outside. */
  nsenter: string;
  /** nftables' nft, under /usr: a non-root run's sandbox runs it too. */
  nft: string;
}

/** The egress filter of one run, with what it refuses read now (egress.ts). */
export function runEgressRuleset(): string {
  return egressRuleset(SANDBOX_RESOLVER);
}

/** pasta's arguments: join `pid`'s namespaces, configure them, forward nothing to the host. */
function pastaArgs(pid: number, pidFile: string): string[] {
  return [
    '--config-net',
    '--quiet',
    '--foreground',
    '--pid',
    pidFile,
    // No port forwarding in either direction: nothing of the host's is reachable by a port of
    // the namespace's loopback, and nothing of the namespace's is published on the host.
    '--tcp-ports',
    'none',
    '--udp-ports',
    'none',
    '--tcp-ns',
    'none',
    '--udp-ns',
    'none',
    // Without it, connections to the gateway's address go to the host's loopback.
    '--no-map-gw',
    // DNS to this address (UDP, port 53) goes to the host's resolver, and nothing else does.
    '--dns-forward',
    SANDBOX_RESOLVER,
    // Root may enter the network namespace directly, whichever user namespace owns it (bwrap
    // nests a second one for --disable-userns); it stays root, since nobody, whom pasta would
    // switch to, may not. Another user enters the sandbox's user namespace first, which then
    // must own the network namespace (flatUserns in args.ts).
    ...(process.getuid?.() === 0
      ? ['--runas', '0:0', '--netns', `/proc/${pid}/ns/net`]
      : [String(pid)]),
  ];
}

/**
 * pasta attached to the namespaces of `pid` (the sandbox's init, held before the command by
 * bwrap's --block-fd), and `ruleset` loaded there from outside when given (root; another user's
 * sandbox loads its own, args.ts). Resolves once the namespace's interface is up and filtered;
 * the returned stop() ends pasta. Rejects with pasta's or nft's own message if either fails.
 */
export async function attachNetwork(
  tools: NetworkTools,
  pid: number,
  ruleset: string | null,
): Promise<{ stop: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'errand-net-'));
  const pidFile = join(dir, 'pasta.pid');
  const args = pastaArgs(pid, pidFile);
  const argv = ['--pdeathsig', 'KILL', '--', tools.pasta, ...args];
  let child: ChildProcess;
  try {
    child = spawn(tools.setpriv, argv, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: SANDBOX_PATH },
      cwd: '/',
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < STDERR_CAP) stderr += chunk.toString('utf8');
  });
  const exited = new Promise<string>((resolve) => {
    child.once('error', (err) => resolve(err.message));
    child.once('close', (code, signal) => resolve(`pasta exited with ${code ?? signal}`));
  });
  let over = false;
  void exited.then(() => {
    over = true;
  });
  const stop = async () => {
    if (!over) child.kill('SIGKILL');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  // pasta writes its pid file once the namespace is configured.
  const deadline = performance.now() + READY_TIMEOUT_MS;
  while (!over) {
    const text = await readFile(pidFile, 'utf8').catch(() => '');
    if (/^\d+\n/.test(text)) {
      if (ruleset === null) return { stop };
      try {
        await loadEgressRules(tools, pid, ruleset);
        return { stop };
      } catch (err) {
        await stop();
        throw err;
      }
    }
    if (performance.now() > deadline) break;
    await sleep(5);
  }
  const why = over ? await exited : `pasta was not ready after ${READY_TIMEOUT_MS / 1000} s`;
  await stop();
  throw new Error(`${why}: ${quietNoise(stderr) || 'no message'}`);
}

/** pasta's stderr without its complaints about a missing syslog. */
function quietNoise(text: string): string {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '' && !/to syslog$/.test(line))
    .join('; ')
    .trim();
}
