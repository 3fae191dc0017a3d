// Whether the sandbox can run here: bwrap and prlimit found, the control groups it may make, a
// trivial confined run that works (or why not and how to fix it), and the same for the
// user-mode network setup commands get with its egress filter.
import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LIMITS } from '../projects/limits.ts';
import { SANDBOX_PATH } from './args.ts';
import { findCgroupPlaces } from './cgroup.ts';
import { HOW_TO_INSTALL_NFT } from './egress.ts';
import { execute, isRoot, type Ready } from './execute.ts';
import { HOW_TO_INSTALL_PASTA, type NetworkTools } from './network.ts';
import type { SandboxStatus } from './types.ts';

const HOW_TO_INSTALL =
  'install the bubblewrap package (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)';
const HOW_TO_PROC =
  'in a container, let bubblewrap mount its own /proc: podman or docker run ' +
  "--security-opt systempaths=unconfined; Kubernetes: the container's securityContext " +
  'procMount: Unmasked, in a pod with hostUsers: false (docs/deploy.md)';
const HOW_TO_USERNS =
  'enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 (Debian), ' +
  'sysctl kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04+), ' +
  "and user.max_user_namespaces above 0; in a container, whose runtime's default seccomp and " +
  "AppArmor profiles refuse the namespaces and mounts bubblewrap makes, run it with Errand's " +
  'profiles: podman or docker run --security-opt seccomp=deploy/security/seccomp-errand.json ' +
  '(and --security-opt apparmor=errand-sandbox on AppArmor hosts); Kubernetes: the ' +
  "container's seccompProfile Localhost errand/seccomp-errand.json and appArmorProfile " +
  'Localhost errand-sandbox (docs/deploy.md#the-sandbox-in-a-container)';

export async function probe(
  searchPath: string | undefined,
): Promise<{ status: SandboxStatus; ready: Ready | null }> {
  const unavailable = (reason: string, howToFix: string) => ({
    status: { available: false as const, reason, howToFix },
    ready: null,
  });
  const bwrap = await lookUp('bwrap', searchPath);
  if (bwrap === null) return unavailable('bwrap not found on PATH', HOW_TO_INSTALL);
  const versionOut = await capture(bwrap, ['--version'], { PATH: SANDBOX_PATH });
  const version = /(\d+)\.(\d+)\.(\d+)/.exec(versionOut.stdout);
  if (versionOut.code !== 0 || version === null) {
    return unavailable(`${bwrap} --version failed`, HOW_TO_INSTALL);
  }
  const prlimit = await firstExecutable(['/usr/bin/prlimit', '/bin/prlimit']);
  if (prlimit === null) {
    return unavailable('prlimit not found', 'install util-linux (it provides prlimit)');
  }
  const ready: Ready = {
    bwrap,
    version: version.slice(1).map(Number),
    prlimit,
    cgroups: await findCgroupPlaces(),
    network: {
      status: { available: false, reason: 'not checked yet', howToFix: HOW_TO_INSTALL_PASTA },
      tools: null,
    },
  };
  const trial = await trialRun(ready, 'none');
  if (trial !== null) {
    // A run that started and failed points at the namespaces; one that could not start says.
    const { message, started } = trial;
    const proc = /Can't mount proc/i.test(message);
    const userns = /namespace|uid map|Operation not permitted|Permission denied/i.test(message);
    return unavailable(
      `a trivial confined run failed: ${message}`,
      started ? HOW_TO_USERNS : proc ? HOW_TO_PROC : userns ? HOW_TO_USERNS : HOW_TO_INSTALL,
    );
  }
  ready.network = await probeNetwork(ready, searchPath);
  const processLimit = ready.cgroups.pids !== null ? 'cgroup' : isRoot() ? 'none' : 'rlimit';
  return {
    status: {
      available: true,
      bwrap,
      version: version[0],
      processLimit,
      memoryLimit: ready.cgroups.memory !== null ? 'cgroup' : 'watch',
      network: ready.network.status,
    },
    ready,
  };
}

/**
 * pasta on the same PATH as bwrap, nft (for the egress filter) on it or the sandbox's own, and
 * util-linux's setpriv and nsenter, proven by a trivial run on the user-mode network. Without
 * any of them setup commands get no network at all, never an unfiltered one.
 */
async function probeNetwork(
  ready: Ready,
  searchPath: string | undefined,
): Promise<Ready['network']> {
  const missing = (reason: string, howToFix: string) => ({
    status: { available: false as const, reason, howToFix },
    tools: null,
  });
  const pasta = await lookUp('pasta', searchPath);
  if (pasta === null) return missing('pasta not found on PATH', HOW_TO_INSTALL_PASTA);
  // The sandbox of a non-root run runs nft itself: it must be among the system's programs.
  const found = await lookUp('nft', searchPath ?? SANDBOX_PATH);
  const nft = found === null ? null : await realpath(found).catch(() => null);
  if (nft === null) return missing('nft not found on PATH', HOW_TO_INSTALL_NFT);
  if (!/^\/(usr|bin|sbin)\//.test(nft)) {
    return missing(
      `nft is at ${nft}, outside /usr, /bin and /sbin, where the sandbox cannot run it`,
      HOW_TO_INSTALL_NFT,
    );
  }
  const setpriv = await firstExecutable(['/usr/bin/setpriv', '/bin/setpriv']);
  const nsenter = await firstExecutable(['/usr/bin/nsenter', '/bin/nsenter']);
  if (setpriv === null || nsenter === null) {
    return missing('setpriv or nsenter not found', 'install util-linux (it provides both)');
  }
  const tools: NetworkTools = { pasta, setpriv, nsenter, nft };
  const failed = await trialRun(
    { ...ready, network: { status: { available: true, pasta }, tools } },
    'open',
  );
  if (failed !== null) {
    return {
      status: {
        available: false,
        reason: `a trivial run on the user-mode network failed: ${failed.message}`,
        howToFix: HOW_TO_INSTALL_PASTA,
      },
      tools: null,
    };
  }
  return { status: { available: true, pasta }, tools };
}

/** A trivial confined run: null when it worked, else what went wrong and whether it started. */
async function trialRun(
  ready: Ready,
  network: 'none' | 'open',
): Promise<{ message: string; started: boolean } | null> {
  const dir = await mkdtemp(join(tmpdir(), 'errand-sandbox-probe-'));
  try {
    await mkdir(join(dir, '.git'));
    const result = await execute(ready, {
      checkout: dir,
      cwd: dir,
      command: 'echo confined',
      limits: { ...DEFAULT_LIMITS, timeoutSeconds: 30 },
      network,
      signal: new AbortController().signal,
    });
    if (result.exitCode !== 0 || result.output.trim() !== 'confined') {
      return { message: result.output.trim() || `exit code ${result.exitCode}`, started: true };
    }
    return null;
  } catch (err) {
    return { message: err instanceof Error ? err.message : String(err), started: false };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Where the shell's own lookup finds `name` (this module never reads the environment itself). */
async function lookUp(name: string, searchPath: string | undefined): Promise<string | null> {
  const found = await capture(
    '/bin/sh',
    ['-c', `command -v ${name}`],
    searchPath === undefined ? undefined : { PATH: searchPath },
  );
  const path = found.stdout.trim();
  return found.code === 0 && path.startsWith('/') ? path : null;
}

async function firstExecutable(paths: readonly string[]): Promise<string | null> {
  for (const path of paths) {
    if (
      await access(path, 1 /* X_OK */).then(
        () => true,
        () => false,
      )
    ) {
      return path;
    }
  }
  return null;
}

/** A short helper program's exit code and output (bounded: these print a line). */
function capture(
  file: string,
  args: readonly string[],
  env: Record<string, string> | undefined,
): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'ignore'],
      ...(env === undefined ? {} : { env }),
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdout.length < 4_000) stdout += chunk.toString('utf8');
    });
    child.once('error', () => resolve({ code: null, stdout: '' }));
    child.once('close', (code) => resolve({ code, stdout }));
  });
}
