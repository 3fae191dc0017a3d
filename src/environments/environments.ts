// Environments (issue 30): a project's setup runs once per key on a worker, and later turns of
// any of its jobs restore what it made instead. The turn pipeline asks for an environment
// (restore or build); the build worker asks for one ahead of the first job. Snapshots are this
// worker's alone (cache.ts), listed in the environments table (store.ts), and bounded: least
// recently used first, rows and files together.
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import type { SetupNote, SetupRun } from '../agent/prompt.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { errorMessage } from '../errors.ts';
import { notKeptReason } from '../events/declare.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import { diskUsage } from '../sandbox/disk.ts';
import { secretForms } from '../secrets/scrub.ts';
import type { WorkspaceConfig } from '../workspace/index.ts';
import type { SecretNeedles } from '../workspace/secret-scan.ts';
import { listUntracked } from '../workspace/untracked.ts';
import { SnapshotCache, type SnapshotRef } from './cache.ts';
import { type CommandRun, runEnvironmentCommand } from './commands.ts';
import { environmentKey } from './key.ts';
import {
  forgetSnapshot,
  recordSnapshot,
  snapshotRecorded,
  touchSnapshot,
  workerSnapshots,
} from './store.ts';

export interface EnvironmentsDeps {
  config: Config;
  db: Db;
  log: Logger;
  metrics: Metrics;
  workspace: WorkspaceConfig;
}

/** A checkout to make the project's environment in: a turn's, or a build's of its own. */
export interface EnvironmentRun extends CommandRun {
  /** The commit the checkout is on (recorded with a snapshot made from it). */
  baseCommit: string;
}

/** The default bound: a tenth of the data directory's disk, at most 20 GiB. */
const DEFAULT_SHARE = 0.1;
const DEFAULT_MAX_BYTES = 20 * 1024 ** 3;
/** Folders being made that are older than this were left by a crash. */
const LEFTOVER_MS = 6 * 3600 * 1000;

export class Environments {
  readonly #deps: EnvironmentsDeps;
  readonly #cache: SnapshotCache;
  readonly #worker: string;
  #limit: Promise<number> | undefined;
  /** Snapshots this process is keeping now: on disk before their row is written. */
  readonly #keeping = new Set<string>();
  #enforcing: Promise<unknown> = Promise.resolve();

  constructor(deps: EnvironmentsDeps) {
    this.#deps = deps;
    this.#worker = deps.config.environments.worker;
    this.#cache = new SnapshotCache({
      root: join(deps.config.dataDir, 'environments'),
      makeRoom: (bytes, keep) => this.#serially(() => this.#enforce(keep, bytes)),
      onError: (err, what) => deps.log.warn({ err: errorMessage(err) }, `${what} failed`),
    });
  }

  /**
   * The project's environment in a turn's checkout, fresh from git: its snapshot restored when
   * this worker has one for the checkout's key (then the maintenance command runs, if any),
   * else its setup command run, and what it made kept as a snapshot. Undefined without a setup
   * command. The turn's events tell which.
   */
  async prepare(run: EnvironmentRun): Promise<SetupNote | undefined> {
    const command = run.project.setup_command;
    if (!command) return undefined;
    const ref = await this.#ref(run);
    const restored = await this.#restore(ref, command, run);
    this.#deps.metrics.environmentRestores.inc({ result: restored ? 'hit' : 'miss' });
    if (restored) return restored;
    return this.#build(ref, command, run);
  }

  /**
   * Builds the project's environment in a checkout of its own (the build worker), unless this
   * worker has its snapshot already. Says which.
   */
  async prebuild(run: EnvironmentRun): Promise<'present' | 'built' | 'not kept'> {
    const command = run.project.setup_command;
    if (!command) return 'not kept';
    const ref = await this.#ref(run);
    if (
      (await this.#cache.manifest(ref)) &&
      (await snapshotRecorded(this.#deps.db, this.#row(ref)))
    )
      return 'present';
    const setup = await this.#build(ref, command, run);
    return setup.exitCode === 0 && !setup.timedOut && (await this.#cache.manifest(ref))
      ? 'built'
      : 'not kept';
  }

  /**
   * Brings disk and table into agreement (files whose row was deleted go, rows whose files are
   * gone go), removes what a crash left, and evicts down to the bound. Run periodically.
   */
  async reconcile(): Promise<void> {
    await this.#cache.removeLeftovers(LEFTOVER_MS);
    await this.#serially(() => this.#enforce(undefined, 0));
  }

  /** Resolves when the background copies asked for so far are made (tests, benchmarks). */
  async settled(): Promise<void> {
    await this.#enforcing.catch(() => {});
    await this.#cache.settled();
    await this.#enforcing.catch(() => {});
  }

  async #ref(run: EnvironmentRun): Promise<SnapshotRef> {
    const key = await environmentKey(this.#deps.workspace, {
      dir: run.dir,
      project: run.project,
      secrets: run.secrets,
      signal: run.signal,
    });
    return { projectId: run.project.id, key };
  }

  #row(ref: SnapshotRef) {
    return { ...ref, worker: this.#worker };
  }

  async #restore(
    ref: SnapshotRef,
    command: string,
    run: EnvironmentRun,
  ): Promise<SetupNote | undefined> {
    const manifest = await this.#cache.manifest(ref);
    if (!manifest) return undefined;
    // No row: an admin dropped it (or another process evicted it). Its files go, not restored.
    if (!(await touchSnapshot(this.#deps.db, this.#row(ref)))) {
      await this.#cache.drop(ref);
      return undefined;
    }
    const restored = await this.#cache.restore(manifest, run.dir, run.signal);
    this.#deps.metrics.environmentRestoreDuration.observe(
      { from: restored.from },
      restored.ms / 1000,
    );
    await run.emit('environment.restored', {
      key: ref.key,
      ms: restored.ms,
      from: restored.from,
      files: manifest.files,
      bytes: manifest.bytes,
      builtAt: manifest.baseCommit,
      ...(restored.skipped > 0 ? { skipped: restored.skipped } : {}),
    });
    const maintenance = run.project.maintenance_command;
    if (!maintenance) return { restored: true, command };
    const home = await this.#cache.home(ref.projectId);
    const ran = await runEnvironmentCommand('maintenance', maintenance, run, home);
    return { restored: true, command, maintenance: note(ran) };
  }

  async #build(ref: SnapshotRef, command: string, run: EnvironmentRun): Promise<SetupRun> {
    const { metrics } = this.#deps;
    const home = await this.#cache.home(ref.projectId);
    const setup = await runEnvironmentCommand('setup', command, run, home);
    if (setup.exitCode !== 0 || setup.timedOut) {
      metrics.environmentBuilds.inc({ outcome: 'failed' });
      const cause = { cause: 'setup_failed' } as const;
      await run.emit('environment.not_kept', {
        key: ref.key,
        ...cause,
        reason: notKeptReason(cause),
      });
      return note(setup);
    }
    const id = `${ref.projectId}/${ref.key}`;
    this.#keeping.add(id);
    try {
      const kept = await this.#cache.keep({
        ref,
        checkout: run.dir,
        entries: await listUntracked(this.#deps.workspace, run.dir, run.signal),
        secrets: setupOnly(run.secrets),
        baseCommit: run.baseCommit,
        buildMs: setup.durationMs,
        maxBytes: await this.#maxBytes(),
        signal: run.signal,
      });
      if (!kept.kept) {
        metrics.environmentBuilds.inc({ outcome: 'not_kept' });
        // The facts, and the catalog's words for them as `reason`, kept for the API's readers.
        const cause =
          kept.reason === 'secret'
            ? { cause: 'secret' as const, secret: kept.secret }
            : { cause: 'too_large' as const, bytes: kept.bytes, limitBytes: kept.limitBytes };
        await run.emit('environment.not_kept', {
          key: ref.key,
          ...cause,
          reason: notKeptReason(cause),
        });
        return note(setup);
      }
      const { manifest } = kept;
      await recordSnapshot(this.#deps.db, {
        ...this.#row(ref),
        bytes: manifest.bytes,
        files: manifest.files,
        buildMs: manifest.buildMs,
        baseCommit: manifest.baseCommit,
      });
      metrics.environmentBuilds.inc({ outcome: 'kept' });
      await run.emit('environment.built', {
        key: ref.key,
        ms: setup.durationMs + kept.copyMs,
        setupMs: setup.durationMs,
        files: manifest.files,
        bytes: manifest.bytes,
      });
    } finally {
      this.#keeping.delete(id);
    }
    // In the background: the bound, then the spare the next restore renames in.
    this.#enforcing = this.#serially(() => this.#enforce(ref, 0)).then(
      () => this.#cache.refill(ref),
      (err: unknown) =>
        this.#deps.log.warn({ err: errorMessage(err) }, 'bounding the environment cache failed'),
    );
    return note(setup);
  }

  /** One eviction pass at a time in this process. */
  #serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#enforcing.catch(() => {}).then(work);
    this.#enforcing = next;
    return next;
  }

  /**
   * Deletes what has no row (dropped), forgets rows with no files, and evicts the least
   * recently used snapshots (never `keep`), then package caches of projects without one, until
   * `extra` more bytes fit under the bound. Whether they do.
   */
  async #enforce(keep: SnapshotRef | undefined, extra: number): Promise<boolean> {
    const { db, metrics } = this.#deps;
    const limit = await this.#maxBytes();
    const disk = await this.#cache.onDisk();
    const rows = await workerSnapshots(db, this.#worker);
    const used = new Map(rows.map((r) => [`${r.projectId}/${r.key}`, r.lastUsedMs]));
    const isKeep = (ref: SnapshotRef) =>
      keep !== undefined && ref.projectId === keep.projectId && ref.key === keep.key;
    const onDisk = new Set(disk.snapshots.map((s) => `${s.projectId}/${s.key}`));
    for (const row of rows) {
      const id = `${row.projectId}/${row.key}`;
      if (!onDisk.has(id) && !this.#keeping.has(id)) await forgetSnapshot(db, this.#row(row));
    }
    const live = [];
    for (const snapshot of disk.snapshots) {
      const id = `${snapshot.projectId}/${snapshot.key}`;
      if (used.has(id) || this.#keeping.has(id) || isKeep(snapshot)) live.push(snapshot);
      else await this.#cache.drop(snapshot);
    }
    const homes = await Promise.all(
      disk.homes.map(async (home) => ({ ...home, bytes: await diskUsage([home.dir]) })),
    );
    const footprint = (s: { bytes: number; spares: number }) => s.bytes * (1 + s.spares);
    let total =
      live.reduce((sum, s) => sum + footprint(s), 0) + homes.reduce((sum, h) => sum + h.bytes, 0);
    // Oldest first; one being kept or used now counts as used now.
    live.sort(
      (a, b) =>
        (used.get(`${a.projectId}/${a.key}`) ?? Date.now()) -
        (used.get(`${b.projectId}/${b.key}`) ?? Date.now()),
    );
    const kept = [];
    for (const snapshot of live) {
      if (
        total + extra > limit &&
        !isKeep(snapshot) &&
        !this.#keeping.has(`${snapshot.projectId}/${snapshot.key}`)
      ) {
        await forgetSnapshot(db, this.#row(snapshot));
        await this.#cache.drop(snapshot);
        total -= footprint(snapshot);
      } else kept.push(snapshot);
    }
    const withSnapshot = new Set(kept.map((s) => s.projectId));
    for (const home of homes) {
      if (total + extra <= limit) break;
      if (withSnapshot.has(home.projectId) || home.projectId === keep?.projectId) continue;
      await this.#cache.dropHome(home.projectId);
      total -= home.bytes;
    }
    metrics.environmentSnapshots.set(kept.length);
    metrics.environmentBytes.set({ kind: 'snapshots' }, sum(kept.map((s) => s.bytes)));
    metrics.environmentBytes.set({ kind: 'spares' }, sum(kept.map((s) => s.bytes * s.spares)));
    metrics.environmentBytes.set(
      { kind: 'homes' },
      sum(
        homes
          .filter((h) => withSnapshot.has(h.projectId) || h.projectId === keep?.projectId)
          .map((h) => h.bytes),
      ),
    );
    return total + extra <= limit;
  }

  /** ERRAND_ENVIRONMENT_CACHE_MB, else a tenth of the data directory's disk, at most 20 GiB. */
  #maxBytes(): Promise<number> {
    const { dataDir, environments } = this.#deps.config;
    this.#limit ??=
      environments.cacheMb !== undefined
        ? Promise.resolve(environments.cacheMb * 1024 * 1024)
        : statfs(dataDir).then((fs) =>
            Math.min(DEFAULT_MAX_BYTES, Math.floor(fs.blocks * fs.bsize * DEFAULT_SHARE)),
          );
    return this.#limit;
  }
}

/** The values the agent must never see: secrets of exposure "setup", in every form. */
function setupOnly(secrets: readonly TurnSecret[]): SecretNeedles[] {
  return secrets
    .filter((s) => s.exposure === 'setup')
    .map((s) => ({
      name: s.name,
      forms: secretForms(s.value).map((form) => Buffer.from(form, 'utf8')),
    }));
}

function note(run: SetupRun): SetupRun {
  return {
    command: run.command,
    exitCode: run.exitCode,
    timedOut: run.timedOut,
    outputTail: run.outputTail,
  };
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
