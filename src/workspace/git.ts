// The one place that spawns git: fixed hardening flags, a sealed environment, credentials
// only as URL-scoped config in the environment, AbortSignal support and error mapping.

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { GitAuth } from '../repository/auth.ts';
import { abortError, classifyGitFailure, GitError, makeScrubber, stderrSummary } from './errors.ts';
import type { WorkspaceConfig } from './types.ts';

export interface GitRunOptions {
  cwd?: string;
  /** Runs inside this repository: `--git-dir`, so git never searches parent folders. */
  gitDir?: string;
  workTree?: string;
  /** For Errand's own local paths (the mirror); never for a user-supplied URL. */
  allowFile?: boolean;
  auth?: GitAuth;
  env?: Readonly<Record<string, string>>;
  signal?: AbortSignal;
  input?: string;
  /** Exit codes that are answers, not failures (`diff --quiet` returns 1). */
  okCodes?: readonly number[];
  maxStdoutBytes?: number;
  /** Hands stdout on as it arrives instead of keeping it (the result's stdout is then empty). */
  onStdout?: (chunk: Buffer) => void;
  /** Names the operation in errors, e.g. `fetch from https://host/repo.git`. */
  action?: string;
  /** Also classify stdout (push --porcelain reports rejections there). */
  classifyStdout?: boolean;
}

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
}

const KILL_GRACE_MS = 2000;
const STDERR_KEEP_BYTES = 64 * 1024;
const DEFAULT_MAX_STDOUT = 64 * 1024 * 1024;

const SSH_COMMAND =
  'ssh -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4';

// Command-line config outranks every config file, so a repository cannot undo these.
const HARDENING = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'protocol.allow=never',
  'protocol.https.allow=always',
  'protocol.ssh.allow=always',
  'http.followRedirects=false',
  // A helper could prompt, or hand a token stored for one host to another.
  'credential.helper=',
  // An embedded bare repository in a checkout must never be picked up implicitly.
  'safe.bareRepository=explicit',
  'submodule.recurse=false',
  'fetch.recurseSubmodules=false',
  // The mirror lends objects to job clones; a prune would pull them out from under them.
  'gc.auto=0',
  'maintenance.auto=false',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
  'push.gpgSign=false',
  // A stalled transfer fails instead of holding a worker forever.
  'http.lowSpeedLimit=1000',
  'http.lowSpeedTime=60',
  'init.defaultBranch=main',
  'advice.detachedHead=false',
];

/** The argv git gets (after `git`), hardening first. */
export function gitArgv(
  cfg: WorkspaceConfig,
  args: readonly string[],
  opts: GitRunOptions = {},
): string[] {
  const config = [...HARDENING];
  if (cfg.allowLocalRepos || opts.allowFile) config.push('protocol.file.allow=always');
  if (cfg.allowLocalRepos) config.push('protocol.http.allow=always');
  const argv = config.flatMap((c) => ['-c', c]);
  if (opts.gitDir !== undefined) argv.push(`--git-dir=${opts.gitDir}`);
  if (opts.workTree !== undefined) argv.push(`--work-tree=${opts.workTree}`);
  argv.push(...args);
  return argv;
}

const madeHomes = new Set<string>();

function gitHome(cfg: WorkspaceConfig): string {
  const home = join(cfg.rootDir, 'home');
  if (!madeHomes.has(home)) {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    madeHomes.add(home);
  }
  return home;
}

export function gitEnv(cfg: WorkspaceConfig, opts: GitRunOptions = {}): Record<string, string> {
  // Nothing of this process's environment but what the config chose (see gitInheritedEnv).
  const env: Record<string, string> = { ...cfg.inheritedEnv };
  const home = gitHome(cfg);
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    // Empty, not unset: git then skips core.askPass and SSH_ASKPASS too.
    GIT_ASKPASS: '',
    SSH_ASKPASS: '',
    SSH_ASKPASS_REQUIRE: 'never',
    GCM_INTERACTIVE: 'never',
    GIT_SSH_COMMAND: SSH_COMMAND,
    GIT_EDITOR: 'true',
    GIT_PAGER: 'cat',
    // Messages are matched in English to classify failures.
    LC_ALL: 'C',
  });
  if (opts.auth) {
    env.GIT_CONFIG_COUNT = '1';
    env.GIT_CONFIG_KEY_0 = `http.${opts.auth.urlPrefix}.extraHeader`;
    env.GIT_CONFIG_VALUE_0 = opts.auth.header;
  }
  if (opts.env) Object.assign(env, opts.env);
  return env;
}

export function runGit(
  cfg: WorkspaceConfig,
  args: readonly string[],
  opts: GitRunOptions = {},
): Promise<GitResult> {
  const action = opts.action ?? `git ${args.find((a) => !a.startsWith('-')) ?? ''}`.trim();
  const { signal } = opts;
  if (signal?.aborted) return Promise.reject(abortError(action, signal.reason));

  const argv = gitArgv(cfg, args, opts);
  const env = gitEnv(cfg, opts);
  cfg.onSpawn?.({ args: ['git', ...argv], envKeys: Object.keys(env), cwd: opts.cwd });

  return new Promise<GitResult>((resolve, reject) => {
    const child = spawn('git', argv, {
      cwd: opts.cwd,
      env,
      shell: false,
      // Its own process group, so an abort also stops git's helpers (remote-https, ssh).
      detached: true,
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });

    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stdoutTruncated = false;
    const maxStdout = opts.maxStdoutBytes ?? DEFAULT_MAX_STDOUT;
    let stderr = Buffer.alloc(0);
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    let spawnError: Error | undefined;

    child.stdout?.on('data', (chunk: Buffer) => {
      if (opts.onStdout) {
        opts.onStdout(chunk);
        return;
      }
      if (stdoutBytes >= maxStdout) {
        stdoutTruncated = true;
        return;
      }
      const room = maxStdout - stdoutBytes;
      if (chunk.length > room) stdoutTruncated = true;
      const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
      stdout.push(kept);
      stdoutBytes += kept.length;
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > STDERR_KEEP_BYTES) stderr = stderr.subarray(-STDERR_KEEP_BYTES);
    });
    if (opts.input !== undefined && child.stdin) {
      child.stdin.on('error', () => {}); // git may exit before reading everything
      child.stdin.end(opts.input);
    }

    const killGroup = (sig: NodeJS.Signals) => {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        child.kill(sig);
      }
    };
    const onAbort = () => {
      aborted = true;
      killGroup('SIGTERM');
      killTimer = setTimeout(() => killGroup('SIGKILL'), cfg.killGraceMs ?? KILL_GRACE_MS);
      killTimer.unref();
    };
    signal?.addEventListener('abort', onAbort, { once: true });

    child.on('error', (err) => {
      spawnError = err;
    });
    child.on('close', (code, sig) => {
      signal?.removeEventListener('abort', onAbort);
      if (killTimer) clearTimeout(killTimer);
      if (aborted) {
        // Helpers left in the group (rare: they ignore SIGTERM) must not outlive the abort.
        killGroup('SIGKILL');
        reject(abortError(action, signal?.reason));
        return;
      }
      const scrub = makeScrubber(opts.auth);
      const errText = stderr.toString('utf8');
      const outText = Buffer.concat(stdout).toString('utf8');
      if (spawnError) {
        const reason =
          (spawnError as NodeJS.ErrnoException).code === 'ENOENT'
            ? 'git is not installed'
            : spawnError.message;
        reject(new GitError('failed', `${action} failed: ${reason}`, { transient: false }));
        return;
      }
      const exitCode = code ?? 128;
      if (sig === null && (exitCode === 0 || opts.okCodes?.includes(exitCode))) {
        resolve({ code: exitCode, stdout: outText, stderr: errText, stdoutTruncated });
        return;
      }
      const evidence = opts.classifyStdout ? `${errText}\n${outText}` : errText;
      const { code: errCode, transient, explanation } = classifyGitFailure(evidence);
      const summary =
        stderrSummary(evidence) || (sig ? `killed by ${sig}` : `exit code ${exitCode}`);
      reject(
        new GitError(errCode, scrub(`${action} failed: ${explanation} (${summary})`), {
          transient,
          stderr: scrub(errText),
          exitCode: code,
        }),
      );
    });
  });
}

/** stdout of a successful git call, without the trailing newline. */
export async function gitOut(
  cfg: WorkspaceConfig,
  args: readonly string[],
  opts: GitRunOptions = {},
): Promise<string> {
  const { stdout } = await runGit(cfg, args, opts);
  return stdout.replace(/\n$/, '');
}
