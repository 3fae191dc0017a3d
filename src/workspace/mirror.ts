// The project's bare mirror: made on first use, fetched before each turn (concurrent turns of
// one project share a fetch), and asked which commits the job's source ref and work branch
// are. The job's clone is made under the mirror's lock (clone.ts), which is how the janitor
// knows a mirror is in use.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { GitAuth } from '../repository/auth.ts';
import { displayUrl } from '../repository/url.ts';
import { GitError } from './errors.ts';
import { runGit } from './git.ts';
import { exists, MIRROR_USED_STAMP } from './layout.ts';
import { withMirrorLock } from './lock.ts';
import { COMMIT_ID, refCandidates } from './refs.ts';
import type { PrepareInput, WorkspaceConfig } from './types.ts';

interface MirrorState {
  /** performance.now() when the last successful fetch started, per repository URL. */
  fetchedAt: Map<string, number>;
}

const mirrors = new Map<string, MirrorState>();

const LOCK_CONTENTION =
  /Unable to create '[^']*\.lock'|cannot lock ref|could not lock|is at [0-9a-f]+ but expected/i;

interface Synced {
  baseCommit: string;
  remoteHead: string | null;
  /** Whether the job's clone existed already (false: made now from the mirror). */
  reused: boolean;
}

export async function syncMirror(
  cfg: WorkspaceConfig,
  mirror: string,
  input: PrepareInput,
  ensureClone: () => Promise<boolean>,
): Promise<Synced> {
  const requestedAt = performance.now();
  const { signal, repository, auth } = input;
  await mkdir(join(cfg.rootDir, 'mirrors'), { recursive: true });

  return withMirrorLock(
    mirror,
    async () => {
      const state = mirrors.get(mirror) ?? { fetchedAt: new Map<string, number>() };
      mirrors.set(mirror, state);
      if (!(await exists(join(mirror, 'HEAD')))) {
        await rm(mirror, { recursive: true, force: true });
        await runGit(cfg, ['init', '--quiet', '--bare', '--', mirror], {
          cwd: cfg.rootDir,
          signal,
        });
        // A new mirror (the first, or one the janitor evicted) has fetched nothing yet.
        state.fetchedAt.clear();
      }
      // A fetch that started after this call was made saw the remote at least as new
      // as this one would: concurrent turns of one project share it.
      const last = state.fetchedAt.get(repository);
      if (last === undefined || last < requestedAt) {
        const startedAt = performance.now();
        await fetchMirror(cfg, mirror, repository, auth, signal);
        state.fetchedAt.set(repository, startedAt);
      }
      const { baseCommit, remoteHead } = await resolveRefs(cfg, mirror, input);
      await writeFile(join(mirror, MIRROR_USED_STAMP), '');
      // Under the mirror's lock: once the clone exists it names the mirror in its alternates,
      // which is how the janitor knows the mirror is in use.
      const reused = await ensureClone();
      return { baseCommit, remoteHead, reused };
    },
    signal,
  );
}

async function fetchMirror(
  cfg: WorkspaceConfig,
  mirror: string,
  repository: string,
  auth: GitAuth | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const args = [
    // --no-show-forced-updates would print a warning after every update without this.
    '-c',
    'advice.fetchShowForcedUpdates=false',
    'fetch',
    '--quiet',
    '--prune',
    '--no-tags',
    '--no-write-fetch-head',
    '--no-recurse-submodules',
    // What a forced update is only matters to messages --quiet drops; finding out costs a
    // merge-base walk per updated ref (1.7 s → 0.1 s when two 50k-commit branches swap).
    '--no-show-forced-updates',
    '--',
    repository,
    '+refs/heads/*:refs/heads/*',
    '+refs/tags/*:refs/tags/*',
  ];
  const action = `fetch from ${displayUrl(repository)}`;
  // Another program may be writing the mirror (an operator's manual fetch): git's own ref
  // locks turn that into a failure, which passes once the other side is done.
  for (let attempt = 0; ; attempt++) {
    try {
      await runGit(cfg, args, { gitDir: mirror, cwd: mirror, auth, signal, action });
      return;
    } catch (err) {
      if (!(err instanceof GitError) || !LOCK_CONTENTION.test(err.stderr) || attempt >= 5) {
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
    }
  }
}

/** The commit each name peels to (null: none), all in one git call. */
async function resolveCommits(
  cfg: WorkspaceConfig,
  gitDir: string,
  names: readonly string[],
  signal: AbortSignal | undefined,
): Promise<Array<string | null>> {
  // Names were checked (no whitespace or control characters): one per line, never options.
  // A name that resolves to no commit prints "<name> missing" (or "ambiguous") instead.
  const { stdout } = await runGit(cfg, ['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
    gitDir,
    cwd: gitDir,
    input: names.map((name) => `${name}^{commit}\n`).join(''),
    signal,
  });
  const lines = stdout.split('\n');
  return names.map(
    (_, i) => /^([0-9a-f]{40}|[0-9a-f]{64}) commit$/.exec(lines[i] ?? '')?.[1] ?? null,
  );
}

/** The source ref's commit and the work branch's on the remote, as the mirror has them. */
async function resolveRefs(
  cfg: WorkspaceConfig,
  mirror: string,
  input: PrepareInput,
): Promise<{ baseCommit: string; remoteHead: string | null }> {
  const candidates = refCandidates(input.ref);
  const found = await resolveCommits(
    cfg,
    mirror,
    [`refs/heads/${input.branch}`, ...candidates],
    input.signal,
  );
  const remoteHead = found[0] ?? null;
  const baseCommit =
    found.slice(1).find((sha) => sha !== null) ?? (await fetchPinned(cfg, mirror, input));
  return { baseCommit, remoteHead };
}

/** A commit no branch or tag reaches (a pull request's head): asked for by id, and pinned. */
async function fetchPinned(
  cfg: WorkspaceConfig,
  mirror: string,
  input: PrepareInput,
): Promise<string> {
  if (COMMIT_ID.test(input.ref)) {
    const fetched = await runGit(
      cfg,
      ['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', input.repository, input.ref],
      {
        gitDir: mirror,
        cwd: mirror,
        auth: input.auth,
        signal: input.signal,
        action: `fetch of ${input.ref} from ${displayUrl(input.repository)}`,
      },
    ).catch((err: unknown) => {
      if (err instanceof GitError && !err.transient) return null;
      throw err;
    });
    if (fetched) {
      await runGit(cfg, ['update-ref', `refs/errand/pinned/${input.ref}`, input.ref], {
        gitDir: mirror,
        cwd: mirror,
      });
      const [sha] = await resolveCommits(cfg, mirror, [input.ref], input.signal);
      if (sha) return sha;
    }
  }
  throw new GitError(
    'ref_not_found',
    `ref "${input.ref}" was not found in ${displayUrl(input.repository)}`,
    { transient: false },
  );
}
