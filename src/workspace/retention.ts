// Keeps a worker machine's workspaces from growing with every job. A janitor in each worker
// process deletes the clones of archived, deleted and idle jobs, repacks the project mirrors
// without ever dropping an object a clone may borrow, evicts the least recently used mirrors
// beyond a limit, and measures what is left (workspaceUsage, for the metrics). An archived
// job's clone goes at once, not at the next pass: the process that runs it is told (reclaim,
// noticed; service.ts says by whom).

import { lstat, readdir, readFile, realpath, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Db } from '../db/database.ts';
import { type JobState, jobStates } from '../jobs/states.ts';
import type { Logger } from '../log.ts';
import { discardDir, removeTrash } from './discard.ts';
import { runGit } from './git.ts';
import {
  attemptWorkspaceId,
  engineStateDir,
  exists,
  jobDir,
  MIRROR_USED_STAMP,
  STAGING_PREFIX,
  TRASH_PREFIX,
  workspaceJob,
} from './layout.ts';
import { BUSY, tryJobLock, tryMirrorLock } from './lock.ts';
import { checkId } from './refs.ts';
import type { WorkspaceConfig } from './types.ts';

export interface RetentionSettings {
  /** A job with no turn queued or running, unchanged for this long, loses its clone. */
  idleSeconds: number;
  /** Mirrors kept on this machine; beyond it, least recently used ones no clone needs go. */
  maxMirrors: number;
  /** Each mirror is repacked at most this often (when it has more than one pack or loose objects). */
  gcIntervalSeconds: number;
  janitorIntervalMs: number;
}

/** Disk use of this machine's workspaces, as of the janitor's last pass. */
export interface WorkspaceUsage {
  /** Bytes allocated on disk under `workspaces/jobs` (clones, and any being deleted). */
  jobsBytes: number;
  /** Job clones. */
  jobsCount: number;
  /** Bytes allocated on disk under `workspaces/mirrors`. */
  mirrorsBytes: number;
  mirrorsCount: number;
  /** When it was measured; null before the first pass of a janitor in this process. */
  measuredAt: Date | null;
}

let lastUsage: WorkspaceUsage = {
  jobsBytes: 0,
  jobsCount: 0,
  mirrorsBytes: 0,
  mirrorsCount: 0,
  measuredAt: null,
};

/** The workspace disk use the janitor measured last: cached, never a walk of the disk. */
export function workspaceUsage(): WorkspaceUsage {
  return { ...lastUsage };
}

export interface JanitorDeps {
  workspace: WorkspaceConfig;
  db: Db;
  log: Logger;
  settings: RetentionSettings;
  /** Whether a turn of the job runs in this process now (its end will call reclaim). */
  running?: (jobId: string) => boolean;
}

export interface Janitor {
  /** Runs a pass now (after any pass under way) and resolves when it is done. */
  runOnce(): Promise<void>;
  /**
   * The job may be over here: a turn of it stopped, or this process archived it. If its clone
   * is on this machine and the job is archived (or gone), the clone goes now; a clone a turn
   * still holds is kept, and goes when that turn stops.
   */
  reclaim(jobId: string): void;
  /**
   * Some process committed an event of the job (the database's notification): the same check
   * as reclaim, for a clone on this machine that no turn of this process is using, gathered
   * over a moment into one query.
   */
  noticed(jobId: string): void;
  stop(): Promise<void>;
}

/** The numbers a best-of-N turn's attempts may have (src/jobs/best-of.ts allows 1 to 4). */
const ATTEMPT_NUMBERS = [1, 2, 3, 4];

/** How long noticed jobs are gathered before their one query. */
const NOTICED_BATCH_MS = 100;

/** Starts the janitor: one pass now, then one every `janitorIntervalMs`. */
export function startJanitor(deps: JanitorDeps): Janitor {
  const log = deps.log.child({ component: 'workspace-janitor' });
  const ctx = { ...deps, log };
  let current: Promise<void> | undefined;
  let stopped = false;
  const pending = new Set<Promise<void>>();

  const start = (): Promise<void> => {
    const run = runPass(ctx);
    const settled = run.then(
      () => {},
      () => {},
    );
    current = settled;
    void settled.then(() => {
      if (current === settled) current = undefined;
    });
    return run;
  };
  const tick = () => {
    if (current || stopped) return;
    start().catch((err: unknown) => log.error({ err }, 'workspace janitor pass failed'));
  };
  const timer = setInterval(tick, deps.settings.janitorIntervalMs);
  timer.unref();
  tick();

  const reclaim = (jobIds: string[]) => {
    const job = (async () => {
      // Most jobs have no clone here, or one of a job that goes on: look only at clones.
      const here: string[] = [];
      for (const jobId of jobIds) {
        // The job's clone, and its best-of-N attempts' (at most MAX_ATTEMPTS of them).
        const ids = [jobId, ...ATTEMPT_NUMBERS.map((n) => attemptWorkspaceId(jobId, n))];
        for (const id of ids) if (await exists(jobDir(deps.workspace, id))) here.push(id);
      }
      await deleteFinishedClones(ctx, here);
    })().catch((err: unknown) =>
      log.warn({ err, jobIds }, 'could not delete the clone of a finished job'),
    );
    pending.add(job);
    void job.then(() => pending.delete(job));
  };
  const noticed = new Set<string>();
  let gathering: NodeJS.Timeout | undefined;

  return {
    async runOnce() {
      while (current) await current;
      await start();
    },
    reclaim(jobId) {
      if (!stopped) reclaim([jobId]);
    },
    noticed(jobId) {
      if (stopped || deps.running?.(jobId)) return;
      noticed.add(jobId);
      gathering ??= setTimeout(() => {
        gathering = undefined;
        const jobIds = [...noticed];
        noticed.clear();
        if (!stopped) reclaim(jobIds);
      }, NOTICED_BATCH_MS);
      gathering.unref();
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(gathering);
      while (current) await current;
      await Promise.all(pending);
    },
  };
}

type Reason = 'archived' | 'deleted' | 'idle';

async function runPass(ctx: JanitorDeps): Promise<void> {
  const cfg = ctx.workspace;
  await removeLeftovers(ctx);
  await deleteFinishedClones(ctx, await listClones(cfg));
  await maintainMirrors(ctx);
  lastUsage = await measure(cfg);
}

/**
 * Deletes the clones of jobs that are archived, gone from the database, or idle. The database
 * is only the policy: the job's lock is what keeps a clone a turn is using (a turn holds it
 * from prepare to push), so a clone whose job was followed up meanwhile is either skipped or
 * deleted before its turn starts, and then made again from the pushed branch.
 */
async function deleteFinishedClones(ctx: JanitorDeps, jobIds: string[]): Promise<void> {
  if (jobIds.length === 0) return;
  // An attempt's clone (a best-of-N turn's) lives and goes with its job's.
  const owners = [...new Set(jobIds.map(workspaceJob))];
  const states = await jobStates(ctx.db, owners, ctx.settings.idleSeconds);
  for (const jobId of jobIds) {
    const reason = verdict(states.get(workspaceJob(jobId)));
    if (reason === null) continue;
    try {
      // An engine's state (its sessions) goes with the clone: a later turn starts afresh.
      const removed = await tryJobLock(ctx.workspace, jobId, async () => {
        await discardDir(engineStateDir(ctx.workspace, jobId));
        return discardDir(jobDir(ctx.workspace, jobId));
      });
      if (removed === BUSY) ctx.log.debug({ jobId, reason }, 'job clone in use, kept');
      else if (removed) ctx.log.info({ jobId, reason }, 'deleted a job clone');
    } catch (err) {
      ctx.log.warn({ err, jobId, reason }, 'could not delete a job clone');
    }
  }
}

function verdict(state: JobState | undefined): Reason | null {
  if (state === undefined) return 'deleted';
  if (state.status === 'archived') return 'archived';
  if (!state.busy && state.stale) return 'idle';
  return null;
}

function isWorkspaceId(name: string): boolean {
  try {
    checkId('jobId', name);
    return true;
  } catch {
    return false;
  }
}

async function entries(dir: string) {
  return readdir(dir, { withFileTypes: true }).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  });
}

/** Job ids with a clone on this machine (folders in `jobs/`; lock files sit beside them). */
async function listClones(cfg: WorkspaceConfig): Promise<string[]> {
  const found = await entries(join(cfg.rootDir, 'jobs'));
  return found.filter((e) => e.isDirectory() && isWorkspaceId(e.name)).map((e) => e.name);
}

/** What a crash left: folders renamed aside for deletion, and clones never finished. */
async function removeLeftovers(ctx: JanitorDeps): Promise<void> {
  const cfg = ctx.workspace;
  for (const area of ['jobs', 'mirrors', 'engine-state']) {
    for (const entry of await entries(join(cfg.rootDir, area))) {
      if (!entry.isDirectory()) continue;
      const path = join(cfg.rootDir, area, entry.name);
      try {
        if (entry.name.startsWith(TRASH_PREFIX)) {
          await removeTrash(path);
        } else if (area === 'jobs' && entry.name.startsWith(STAGING_PREFIX)) {
          // `.staging-<job>-<uuid>`: made under the job's lock, so free to go when that is free.
          const jobId = entry.name.slice(STAGING_PREFIX.length, -37);
          if (isWorkspaceId(jobId)) await tryJobLock(cfg, jobId, () => discardDir(path));
        }
      } catch (err) {
        ctx.log.warn({ err, path }, 'could not remove a workspace leftover');
      }
    }
  }
}

interface Mirror {
  path: string;
  /** When a turn last used it (ms since the epoch). */
  usedAt: number;
}

async function listMirrors(cfg: WorkspaceConfig): Promise<Mirror[]> {
  const root = join(cfg.rootDir, 'mirrors');
  const mirrors: Mirror[] = [];
  for (const entry of await entries(root)) {
    if (!entry.isDirectory() || !entry.name.endsWith('.git') || entry.name.startsWith('.')) {
      continue;
    }
    const path = join(root, entry.name);
    // A mirror no turn has stamped yet counts as used when it was made.
    const used =
      (await stat(join(path, MIRROR_USED_STAMP)).catch(() => null)) ??
      (await stat(path).catch(() => null));
    if (used) mirrors.push({ path, usedAt: used.mtimeMs });
  }
  return mirrors;
}

/**
 * The mirrors this machine's clones borrow objects from (each clone's `alternates`), as real
 * paths. A clone is made under its mirror's lock, so under that lock this answer holds.
 */
async function borrowedMirrors(cfg: WorkspaceConfig): Promise<Set<string>> {
  const borrowed = new Set<string>();
  const jobs = join(cfg.rootDir, 'jobs');
  for (const entry of await entries(jobs)) {
    if (!entry.isDirectory()) continue;
    const objects = join(jobs, entry.name, '.git', 'objects');
    const text = await readFile(join(objects, 'info', 'alternates'), 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (line.trim() === '' || line.startsWith('#')) continue;
      const alternate = resolve(objects, line.trim());
      borrowed.add(await realpath(resolve(alternate, '..')).catch(() => resolve(alternate, '..')));
    }
  }
  return borrowed;
}

async function isBorrowed(cfg: WorkspaceConfig, mirror: string): Promise<boolean> {
  const real = await realpath(mirror).catch(() => mirror);
  return (await borrowedMirrors(cfg)).has(real);
}

async function maintainMirrors(ctx: JanitorDeps): Promise<void> {
  const cfg = ctx.workspace;
  let mirrors = await listMirrors(cfg);
  if (mirrors.length > ctx.settings.maxMirrors) mirrors = await evictMirrors(ctx, mirrors);
  for (const mirror of mirrors) {
    try {
      if (!(await gcDue(mirror.path, ctx.settings.gcIntervalSeconds))) continue;
      const done = await tryMirrorLock(mirror.path, async () => {
        if (!(await exists(join(mirror.path, 'HEAD')))) return false;
        await gcMirror(cfg, mirror.path, await isBorrowed(cfg, mirror.path));
        return true;
      });
      if (done === true) ctx.log.info({ mirror: mirror.path }, 'repacked a mirror');
    } catch (err) {
      ctx.log.warn({ err, mirror: mirror.path }, 'could not repack a mirror');
    }
  }
}

/** Evicts least recently used mirrors no clone borrows from; returns the ones kept. */
async function evictMirrors(ctx: JanitorDeps, mirrors: Mirror[]): Promise<Mirror[]> {
  const cfg = ctx.workspace;
  const borrowed = await borrowedMirrors(cfg);
  const real = async (m: Mirror) => realpath(m.path).catch(() => m.path);
  const kept = new Set(mirrors);
  const candidates: Mirror[] = [];
  for (const m of mirrors) if (!borrowed.has(await real(m))) candidates.push(m);
  candidates.sort((a, b) => a.usedAt - b.usedAt);
  for (const mirror of candidates) {
    if (kept.size <= ctx.settings.maxMirrors) break;
    try {
      const evicted = await tryMirrorLock(mirror.path, async () => {
        // A clone made since the listing borrows from it now.
        if (await isBorrowed(cfg, mirror.path)) return false;
        return discardDir(mirror.path);
      });
      if (evicted === true) {
        kept.delete(mirror);
        ctx.log.info({ mirror: mirror.path }, 'evicted a mirror');
      }
    } catch (err) {
      ctx.log.warn({ err, mirror: mirror.path }, 'could not evict a mirror');
    }
  }
  if (kept.size > ctx.settings.maxMirrors) {
    ctx.log.warn(
      { mirrors: kept.size, maxMirrors: ctx.settings.maxMirrors },
      'more mirrors than ERRAND_WORKSPACE_MAX_MIRRORS: the others are in use by job clones',
    );
  }
  return [...kept];
}

const GC_STAMP = 'errand-gc';

/** Not repacked within the interval, and something to repack: several packs or loose objects. */
async function gcDue(mirror: string, intervalSeconds: number): Promise<boolean> {
  const stamp = await stat(join(mirror, GC_STAMP)).catch(() => null);
  if (stamp && Date.now() - stamp.mtimeMs < intervalSeconds * 1000) return false;
  const objects = join(mirror, 'objects');
  const packs = (await entries(join(objects, 'pack'))).filter((e) => e.name.endsWith('.pack'));
  if (packs.length > 1) return true;
  for (const entry of await entries(objects)) {
    if (!entry.isDirectory() || !/^[0-9a-f]{2}$/.test(entry.name)) continue;
    if ((await readdir(join(objects, entry.name))).length > 0) return true;
  }
  return false;
}

/**
 * Repacks a mirror into one pack and packs its refs, under the mirror's lock (no fetch and no
 * new clone meanwhile). Job clones borrow the mirror's objects through `alternates`, and a
 * clone's commits may be ones the mirror no longer reaches (a branch force-pushed or deleted
 * upstream, then pruned by the next fetch). So while a clone borrows from it nothing may be
 * dropped: `repack -a -d --keep-unreachable` puts unreachable objects into the new pack,
 * where plain `gc` would prune them after two weeks and `repack -a -d` drops them at once.
 * A mirror no clone borrows from has no such reader, and is pruned of them. Git in a clone
 * reading meanwhile is safe: it looks again for packs when an object is not where it was.
 */
async function gcMirror(cfg: WorkspaceConfig, mirror: string, borrowed: boolean): Promise<void> {
  const repo = { gitDir: mirror, cwd: mirror, action: 'repack of a project mirror' };
  await runGit(cfg, ['pack-refs', '--all', '--prune'], repo);
  if (borrowed) {
    await runGit(cfg, ['repack', '-a', '-d', '--keep-unreachable', '-q'], repo);
  } else {
    await runGit(cfg, ['repack', '-a', '-d', '-q'], repo);
    await runGit(cfg, ['prune', '--expire=now'], repo);
  }
  await writeFile(join(mirror, GC_STAMP), '');
}

async function measure(cfg: WorkspaceConfig): Promise<WorkspaceUsage> {
  const jobs = join(cfg.rootDir, 'jobs');
  const mirrors = join(cfg.rootDir, 'mirrors');
  return {
    jobsBytes: await diskBytes(jobs),
    jobsCount: (await listClones(cfg)).length,
    mirrorsBytes: await diskBytes(mirrors),
    mirrorsCount: (await listMirrors(cfg)).length,
    measuredAt: new Date(),
  };
}

/** Bytes allocated under `dir` (like `du`), walked without recursion; vanished entries count 0. */
async function diskBytes(dir: string): Promise<number> {
  let total = 0;
  const pending = [dir];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const found = await readdir(next, { withFileTypes: true }).catch(() => []);
    const sizes = await Promise.all(
      found.map(async (entry) => {
        const path = join(next, entry.name);
        if (entry.isDirectory()) pending.push(path);
        const info = await lstat(path).catch(() => null);
        return info ? info.blocks * 512 : 0;
      }),
    );
    for (const size of sizes) total += size;
  }
  return total;
}
