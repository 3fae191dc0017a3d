// One lock file per protected folder, shared by everything that must not run twice at once
// across processes: the embedded database's data directory (src/db/embedded) and the
// workspace's mirrors and clones (src/workspace). The file is created with O_EXCL, names its
// owner (pid, host, a token, and on Linux the boot and the process's start time) and is touched
// while held; a lock whose owner died on this host, or that nobody touched for `staleMs`, is
// taken over. An owner is dead when its pid is, and also when the machine has booted since or
// the pid now names another process: after a power loss, the new `serve` may well get the pid
// the old one had.

import { randomUUID } from 'node:crypto';
import { link, open, readFile, rename, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';

export interface FileLockOptions {
  signal?: AbortSignal;
  /** A lock whose heartbeat is older than this is taken over. */
  staleMs?: number;
  heartbeatMs?: number;
  /** Give up waiting after this long. */
  timeoutMs?: number;
}

export interface LockOwner {
  pid: number;
  host: string;
  token: string;
  /** The kernel's boot id when the lock was taken (Linux). */
  boot?: string;
  /** The owner process's start time, in clock ticks since boot (Linux). */
  started?: string;
}

/** Tokens of the locks this process holds: a lock naming this pid with another is stale. */
const heldTokens = new Set<string>();

export interface HeldLock {
  release(): Promise<void>;
}

/** Why a waiting acquire stopped: the caller's signal, or its time limit. */
export class LockWaitError extends Error {
  override name = 'LockWaitError';
  readonly reason: 'aborted' | 'timeout';
  constructor(reason: 'aborted' | 'timeout', message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The kernel's boot id, or undefined off Linux. */
async function bootId(): Promise<string | undefined> {
  return (
    (await readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => '')).trim() || undefined
  );
}

/** When process `pid` started, in clock ticks since boot, or undefined when unknown. */
async function startTime(pid: number): Promise<string | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its end.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields?.[19];
}

/** Whether the process that wrote `owner` on this host still runs and may hold the lock. */
async function ownerAlive(owner: LockOwner): Promise<boolean> {
  if (owner.boot !== undefined && owner.boot !== (await bootId())) return false;
  if (owner.pid === process.pid) {
    // Another process that had this pid (a restarted container's pid 1) started at another
    // time. This process's own lock is alive even when its holder has just let go: judging it
    // dead then would move aside the lock another caller took in the meantime. A lock this
    // process failed to delete stops being touched and goes stale by silence.
    if (owner.started !== undefined) return owner.started === (await startTime(process.pid));
    return heldTokens.has(owner.token);
  }
  if (!pidAlive(owner.pid)) return false;
  return owner.started === undefined || owner.started === (await startTime(owner.pid));
}

/** The owner written in the lock file; null while it is being written or when unreadable. */
export async function readLockOwner(path: string): Promise<LockOwner | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return null;
  }
  // Lock files of the data directory written before this module held only the pid.
  if (/^\d+\n?$/.test(text)) return { pid: Number(text.trim()), host: hostname(), token: '' };
  try {
    const data: unknown = JSON.parse(text);
    if (typeof data !== 'object' || data === null) return null;
    const { pid, host, token, boot, started } = data as Record<string, unknown>;
    if (typeof pid !== 'number' || typeof host !== 'string' || typeof token !== 'string') {
      return null;
    }
    return {
      pid,
      host,
      token,
      ...(typeof boot === 'string' ? { boot } : {}),
      ...(typeof started === 'string' ? { started } : {}),
    };
  } catch {
    return null;
  }
}

function isErrno(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === code;
}

/**
 * Moves a stale lock aside. Two waiters may both judge it stale; rename lets only one move
 * a given file, and the inode check puts back a fresh lock moved by mistake.
 */
async function takeOver(path: string, stale: StaleLock): Promise<void> {
  const aside = `${path}.stale-${randomUUID()}`;
  try {
    await rename(path, aside);
  } catch {
    return;
  }
  // A file system may give a new lock the inode number of one just deleted: the owner's token
  // tells them apart too.
  const moved = await stat(aside).catch(() => null);
  const token = (await readLockOwner(aside))?.token;
  const same = moved?.ino === stale.ino && (stale.token === undefined || token === stale.token);
  if (moved && !same) await link(aside, path).catch(() => {});
  await unlink(aside).catch(() => {});
}

/** The lock file judged stale: its inode, and its owner's token when it names one. */
interface StaleLock {
  ino: number;
  token: string | undefined;
}

async function isStale(path: string, staleMs: number): Promise<StaleLock | null> {
  const info = await stat(path).catch(() => null);
  if (!info) return null;
  const owner = await readLockOwner(path);
  const deadOwner = owner !== null && owner.host === hostname() && !(await ownerAlive(owner));
  const silent = Date.now() - info.mtimeMs > staleMs;
  // A half-written lock (no owner yet) is only stale once it stops being fresh.
  return deadOwner || silent ? { ino: info.ino, token: owner?.token } : null;
}

function sleep(ms: number, signal: AbortSignal | undefined, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = () =>
      new LockWaitError('aborted', `stopped waiting for the lock ${path}`, {
        cause: signal?.reason,
      });
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Creates the lock file at `path`. With `wait`, waits (with backoff) for a live owner to let
 * go, throwing LockWaitError on abort or timeout; without, returns undefined at once.
 */
export async function acquireFileLock(
  path: string,
  opts: FileLockOptions,
  wait: boolean,
): Promise<HeldLock | undefined> {
  const staleMs = opts.staleMs ?? 60_000;
  const heartbeatMs = opts.heartbeatMs ?? Math.max(10, Math.floor(staleMs / 6));
  const deadline = Date.now() + (opts.timeoutMs ?? 15 * 60_000);
  const boot = await bootId();
  const started = await startTime(process.pid);
  const owner: LockOwner = {
    pid: process.pid,
    host: hostname(),
    token: randomUUID(),
    ...(boot ? { boot } : {}),
    ...(started ? { started } : {}),
  };

  for (let attempt = 0; ; attempt++) {
    // Known before the file names it: another acquire in this process must not judge it stale.
    heldTokens.add(owner.token);
    try {
      const handle = await open(path, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(owner));
      } finally {
        await handle.close();
      }
      break;
    } catch (err) {
      heldTokens.delete(owner.token);
      if (!isErrno(err, 'EEXIST')) throw err;
    }
    const stale = await isStale(path, staleMs);
    if (stale !== null) {
      await takeOver(path, stale);
      continue;
    }
    if (!wait) return undefined;
    if (Date.now() > deadline) {
      throw new LockWaitError('timeout', `timed out waiting for the lock ${path}`);
    }
    const backoff = Math.min(500, 20 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random());
    await sleep(backoff, opts.signal, path);
  }

  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(path, now, now).catch(() => {});
  }, heartbeatMs);
  heartbeat.unref();
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      clearInterval(heartbeat);
      const current = await readLockOwner(path);
      if (current?.token === owner.token) await unlink(path).catch(() => {});
      heldTokens.delete(owner.token);
    },
  };
}
