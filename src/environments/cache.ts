// This worker's snapshots on disk, under `<data-dir>/environments/`:
//
//   snapshots/<project>/<key>/manifest.json, tree/   the setup's result, never written again
//   spares/<project>/<key>/<id>/                     ready copies of tree/, one per restore
//   homes/<project>/                                 the setup's HOME: the tools' own caches
//   .staging-*, .trash-*                             being made, being deleted
//
// A restore must take well under a second for a 30,000-file tree, on ext4 (no reflinks), with
// bubblewrap 0.8 (no overlay) and no mount rights: copying 300 MB takes ~4 s here. So restores
// never copy when they can help it: a spare, made in the background after a build and after
// each restore, is claimed by one rename and its entries renamed into the checkout (O(1) each),
// after which the checkout owns those files and nothing links them to the snapshot. Only when
// no spare is ready (two restores in a row, or one right after a build) is the snapshot copied
// while the turn waits. Spares count in the cache's bound like the snapshots themselves.
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { discardLater } from '../workspace/discard.ts';
import type { SecretNeedles } from '../workspace/secret-scan.ts';
import { isPlainRelative, parentsAreDirectories } from '../workspace/untracked.ts';
import { copyEntries, copyTree, inspectTree } from './tree.ts';

const STAGING = '.staging-';
const TRASH = '.trash-';
/** Ready copies kept per snapshot: one restore at a time is instant, a second one copies. */
const SPARES = 1;
/** A project id or key as a folder name: what ids and sha-256 keys are, nothing else. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const manifestSchema = z.object({
  projectId: z.string(),
  key: z.string(),
  /** The snapshot's entries, relative to the checkout (and to tree/). */
  entries: z.array(z.string().refine(isPlainRelative)),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  baseCommit: z.string(),
  buildMs: z.number().int().nonnegative(),
});

export type Manifest = z.output<typeof manifestSchema>;

export interface SnapshotRef {
  projectId: string;
  key: string;
}

/** What keeping a checkout's setup result came to. */
export type Kept =
  | { kept: true; manifest: Manifest; copyMs: number }
  | { kept: false; reason: 'secret'; secret: string }
  | { kept: false; reason: 'too large'; bytes: number; limitBytes: number };

export interface Restored {
  ms: number;
  /** A ready spare was renamed in, or the snapshot was copied while the turn waited. */
  from: 'spare' | 'copy';
  /** Entries put in place; those whose place the checkout has taken (a tracked file now) stay out. */
  entries: number;
  skipped: number;
}

export interface OnDisk extends SnapshotRef {
  bytes: number;
  spares: number;
}

export class SnapshotCache {
  readonly root: string;
  /** Makes space for `bytes` more by evicting others; false when it cannot. */
  readonly #makeRoom: (bytes: number, keep: SnapshotRef) => Promise<boolean>;
  readonly #onError: (err: unknown, what: string) => void;
  #spareChain: Promise<void> = Promise.resolve();
  readonly #refilling = new Set<string>();

  constructor(opts: {
    root: string;
    makeRoom: (bytes: number, keep: SnapshotRef) => Promise<boolean>;
    onError: (err: unknown, what: string) => void;
  }) {
    this.root = opts.root;
    this.#makeRoom = opts.makeRoom;
    this.#onError = opts.onError;
  }

  #snapshotDir(ref: SnapshotRef): string {
    checkNames(ref);
    return join(this.root, 'snapshots', ref.projectId, ref.key);
  }

  #sparesDir(ref: SnapshotRef): string {
    checkNames(ref);
    return join(this.root, 'spares', ref.projectId, ref.key);
  }

  /** The project's package cache, mounted as HOME for its setup and maintenance commands. */
  async home(projectId: string): Promise<string> {
    checkNames({ projectId, key: 'home' });
    const dir = join(this.root, 'homes', projectId);
    await mkdir(dir, { recursive: true });
    return dir;
  }

  /** The snapshot's manifest, or undefined when this worker does not have it (whole). */
  async manifest(ref: SnapshotRef): Promise<Manifest | undefined> {
    const text = await readFile(join(this.#snapshotDir(ref), 'manifest.json'), 'utf8').catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      },
    );
    if (text === undefined) return undefined;
    const parsed = manifestSchema.safeParse(JSON.parse(text));
    // Written by this module only: one that does not parse is from another version, or torn.
    return parsed.success && parsed.data.key === ref.key ? parsed.data : undefined;
  }

  /**
   * Keeps the checkout's `entries` (what the setup made) as the snapshot `ref`: copied aside,
   * searched for the values of `secrets`, measured, and renamed into place whole. A snapshot
   * holding a value is not kept, nor one larger than `maxBytes`.
   */
  async keep(input: {
    ref: SnapshotRef;
    checkout: string;
    entries: readonly string[];
    secrets: readonly SecretNeedles[];
    baseCommit: string;
    buildMs: number;
    maxBytes: number;
    signal?: AbortSignal;
  }): Promise<Kept> {
    const { ref } = input;
    const started = performance.now();
    const staging = await this.#staging();
    try {
      const tree = join(staging, 'tree');
      const entries = await copyEntries(input.checkout, input.entries, tree, input.signal);
      const copyMs = Math.round(performance.now() - started);
      const facts = await inspectTree(tree, input.secrets);
      if (facts.secret !== undefined)
        return { kept: false, reason: 'secret', secret: facts.secret };
      if (facts.bytes > input.maxBytes)
        return { kept: false, reason: 'too large', bytes: facts.bytes, limitBytes: input.maxBytes };
      const manifest: Manifest = {
        projectId: ref.projectId,
        key: ref.key,
        entries,
        files: facts.files,
        bytes: facts.bytes,
        baseCommit: input.baseCommit,
        buildMs: input.buildMs,
      };
      await writeFile(join(staging, 'manifest.json'), JSON.stringify(manifest));
      const dir = this.#snapshotDir(ref);
      await mkdir(join(dir, '..'), { recursive: true });
      // An older copy of the same key (a rebuild) goes first; the new one takes its place whole.
      await this.#discard(dir);
      try {
        await rename(staging, dir);
      } catch (err) {
        // Another turn of the project kept the same key just now: that one stays.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      }
      return { kept: true, manifest, copyMs };
    } finally {
      await this.#discard(staging);
    }
  }

  /**
   * Puts the snapshot's entries into the checkout (pristine: reset by git just before), from a
   * spare when one is ready, else by copying.
   */
  async restore(manifest: Manifest, checkout: string, signal?: AbortSignal): Promise<Restored> {
    const started = performance.now();
    const spare = await this.#claimSpare(manifest);
    const tree = join(this.#snapshotDir(manifest), 'tree');
    let entries = 0;
    let skipped = 0;
    try {
      for (const entry of manifest.entries) {
        const target = join(checkout, ...entry.split('/'));
        // The checkout's own (a tracked path at this commit) wins, and nothing is put under a
        // parent that is not a real directory of the checkout.
        if (!(await parentsAreDirectories(checkout, entry)) || (await present(target))) {
          skipped += 1;
          continue;
        }
        const source = join(spare ?? tree, ...entry.split('/'));
        if (spare !== undefined) {
          try {
            await rename(source, target);
            entries += 1;
            continue;
          } catch (err) {
            // A data directory split over two file systems: copy instead.
            if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
          }
        }
        await copyTree(join(tree, ...entry.split('/')), target, signal);
        entries += 1;
      }
    } finally {
      if (spare !== undefined) discardLater(spare);
    }
    this.refill(manifest);
    return {
      ms: Math.round(performance.now() - started),
      from: spare === undefined ? 'copy' : 'spare',
      entries,
      skipped,
    };
  }

  /** Takes a ready spare for this restore alone (a rename: two restores never get the same). */
  async #claimSpare(ref: SnapshotRef): Promise<string | undefined> {
    const dir = this.#sparesDir(ref);
    for (const name of await list(dir)) {
      const claimed = join(this.root, `${TRASH}claimed-${randomUUID()}`);
      try {
        await rename(join(dir, name), claimed);
        return claimed;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return undefined;
  }

  /** Makes the snapshot's spares in the background, one copy at a time in this process. */
  refill(ref: SnapshotRef): void {
    const id = `${ref.projectId}/${ref.key}`;
    if (this.#refilling.has(id)) return;
    this.#refilling.add(id);
    this.#spareChain = this.#spareChain
      .then(() => this.#makeSpares(ref))
      .catch((err: unknown) => this.#onError(err, 'making a spare copy of an environment'))
      .finally(() => this.#refilling.delete(id));
  }

  async #makeSpares(ref: SnapshotRef): Promise<void> {
    const dir = this.#sparesDir(ref);
    for (let have = (await list(dir)).length; have < SPARES; have++) {
      const manifest = await this.manifest(ref);
      if (!manifest || !(await this.#makeRoom(manifest.bytes, ref))) return;
      const staging = await this.#staging();
      try {
        await copyTree(join(this.#snapshotDir(ref), 'tree'), join(staging, 'tree'));
        await mkdir(dir, { recursive: true });
        await rename(join(staging, 'tree'), join(dir, randomUUID()));
      } finally {
        await this.#discard(staging);
      }
      // Dropped while it was copied: its spares go too.
      if (!(await this.manifest(ref))) await this.#discard(dir);
    }
  }

  /** Resolves when the spares asked for so far are made (tests, benchmarks, shutdown). */
  async settled(): Promise<void> {
    await this.#spareChain;
  }

  /** Deletes a snapshot and its spares (renamed aside at once, removed in the background). */
  async drop(ref: SnapshotRef): Promise<void> {
    await this.#discard(this.#snapshotDir(ref));
    await this.#discard(this.#sparesDir(ref));
  }

  /** Deletes a project's package cache. */
  async dropHome(projectId: string): Promise<void> {
    checkNames({ projectId, key: 'home' });
    await this.#discard(join(this.root, 'homes', projectId));
  }

  /** The snapshots on disk with their size and spares, and the projects with a package cache. */
  async onDisk(): Promise<{
    snapshots: OnDisk[];
    homes: Array<{ projectId: string; dir: string }>;
  }> {
    const snapshots: OnDisk[] = [];
    for (const projectId of await list(join(this.root, 'snapshots'))) {
      if (!NAME.test(projectId)) continue;
      for (const key of await list(join(this.root, 'snapshots', projectId))) {
        if (!NAME.test(key)) continue;
        const ref = { projectId, key };
        const manifest = await this.manifest(ref);
        if (!manifest) continue;
        const spares = (await list(this.#sparesDir(ref))).length;
        snapshots.push({ ...ref, bytes: manifest.bytes, spares });
      }
    }
    const homes = (await list(join(this.root, 'homes')))
      .filter((name) => NAME.test(name))
      .map((projectId) => ({ projectId, dir: join(this.root, 'homes', projectId) }));
    return { snapshots, homes };
  }

  /** Spares of snapshots that are gone, and what a crash left being made or deleted. */
  async removeLeftovers(olderThanMs: number): Promise<void> {
    for (const name of await list(this.root)) {
      const path = join(this.root, name);
      if (name.startsWith(TRASH)) {
        await this.#discard(path);
      } else if (name.startsWith(STAGING)) {
        const info = await stat(path).catch(() => null);
        if (info && Date.now() - info.mtimeMs > olderThanMs) await this.#discard(path);
      }
    }
    for (const projectId of await list(join(this.root, 'spares'))) {
      for (const key of await list(join(this.root, 'spares', projectId))) {
        const ref = { projectId, key };
        if (NAME.test(projectId) && NAME.test(key) && !(await this.manifest(ref)))
          await this.#discard(this.#sparesDir(ref));
      }
    }
  }

  async #staging(): Promise<string> {
    await mkdir(this.root, { recursive: true });
    const dir = join(this.root, `${STAGING}${randomUUID()}`);
    await mkdir(dir);
    return dir;
  }

  /** Renames `path` aside (atomic: a crash leaves a `.trash-` folder) and removes it later. */
  async #discard(path: string): Promise<void> {
    const aside = join(this.root, `${TRASH}${randomUUID()}`);
    try {
      await rename(path, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    discardLater(aside);
  }
}

function checkNames(ref: SnapshotRef): void {
  if (!NAME.test(ref.projectId) || !NAME.test(ref.key))
    throw new Error(`not a snapshot's name: ${ref.projectId}/${ref.key}`);
}

async function list(dir: string): Promise<string[]> {
  return readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
}

async function present(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => null)) !== null;
}
