// Shapes shared by the workspace module: what the turn handler passes in and gets back.
import type { GitAuth } from '../repository/auth.ts';

export interface GitIdentity {
  name: string;
  email: string;
}

/** What one git spawn looked like; given to `WorkspaceConfig.onSpawn` (tests, audit). */
export interface SpawnInfo {
  args: readonly string[];
  /** Names only: values may hold credentials. */
  envKeys: readonly string[];
  cwd: string | undefined;
}

export interface WorkspaceConfig {
  /** `<data-dir>/workspaces`; holds `mirrors/`, `jobs/` and git's private `home/`. */
  rootDir: string;
  /** Permits local paths, `file://` and plain `http://` to loopback (development, tests). */
  allowLocalRepos: boolean;
  identity: GitIdentity;
  /**
   * The only variables git inherits (PATH, TMPDIR, SSH_AUTH_SOCK, TZ), read from the
   * environment by src/config.ts (`gitInheritedEnv`).
   */
  inheritedEnv: Readonly<Record<string, string>>;
  onSpawn?: (info: SpawnInfo) => void;
  /** How long an aborted git has after SIGTERM before SIGKILL (default 2 s; tests shorten it). */
  killGraceMs?: number;
}

export interface PrepareInput {
  projectId: string;
  jobId: string;
  repository: string;
  /** Branch, tag, full ref (`refs/...`) or commit id the job starts from. */
  ref: string;
  /** The work branch, `errand/<jobId>`. */
  branch: string;
  auth?: GitAuth;
  signal?: AbortSignal;
  /** The job's lock, when the caller holds it for the whole turn (withJobLock). */
  lease?: JobLease;
}

/** Proof of holding a job's workspace lock, from withJobLock; valid until its callback ends. */
export interface JobLease {
  readonly jobId: string;
}

export interface Checkout {
  dir: string;
  /** The commit `ref` pointed to at this prepare. */
  baseCommit: string;
  /** The commit the work branch is on now, ready for the turn. */
  headCommit: string;
  /** Whether the work branch already existed on the remote (a follow-up turn). */
  branchExisted: boolean;
  /**
   * A local commit that was not on the remote and was dropped to match it (a crashed
   * attempt committed but never pushed); kept under `refs/errand/discarded/` in the clone.
   */
  discardedHead: string | null;
}

type FileChange = 'added' | 'modified' | 'deleted';

export interface ChangedFile {
  path: string;
  change: FileChange;
}
