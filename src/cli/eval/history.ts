// The git side of `errand eval from-git`: a local repository's first-parent history, what each
// commit changed, the start commit of a task (the parent with the commit's test files only),
// its branch, a worktree to try it in and the push. git is spawned without a shell, hardened,
// through src/workspace/git.ts (but the push, which is the user's own: see push); every name
// from the command line goes after --end-of-options.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitOut, runGit } from '../../workspace/git.ts';
import type { WorkspaceConfig } from '../../workspace/types.ts';
import { CliError } from '../errors.ts';

/** Who the start commits are by (their dates are the original commit's, so they repeat). */
const IDENTITY = { name: 'Errand eval', email: 'eval@errand.invalid' };

/** The branch a task starts from. */
export function startBranch(sha: string): string {
  return `errand-eval/${sha.slice(0, 12)}`;
}

/** One commit of the walk: its first parent and message. */
export interface CommitInfo {
  sha: string;
  /** The first parent; null for a root commit. */
  parent: string | null;
  /** Subject and body. */
  message: string;
  /** The committer date (ISO 8601), reused for the start commit. */
  date: string;
}

/** A path the commit changed against its first parent, and whether it is gone after it. */
export interface ChangedFile {
  path: string;
  deleted: boolean;
}

/** A local repository, through the hardened git of src/workspace/. */
export class LocalRepository {
  readonly #cfg: WorkspaceConfig;
  readonly #dir: string;

  constructor(cfg: WorkspaceConfig, dir: string) {
    this.#cfg = cfg;
    this.#dir = dir;
  }

  #out(args: readonly string[], env?: Record<string, string>, input?: string): Promise<string> {
    return gitOut(this.#cfg, args, {
      cwd: this.#dir,
      env: { GIT_LITERAL_PATHSPECS: '1', ...env },
      ...(input === undefined ? {} : { input }),
    });
  }

  /** The repository's top directory (fails when `dir` is not in a git work tree). */
  topLevel(): Promise<string> {
    return this.#out(['rev-parse', '--show-toplevel']);
  }

  /**
   * The first-parent commits of `range` (A..B), newest first, or the last `limit` of HEAD: a
   * merged pull request is one commit, its merge.
   */
  async walk(range: string | undefined, limit: number): Promise<string[]> {
    const args = ['rev-list', '--first-parent', `--max-count=${limit}`, '--end-of-options'];
    const out = await this.#out([...args, range ?? 'HEAD']);
    return out.split('\n').filter((l) => l !== '');
  }

  async commit(sha: string): Promise<CommitInfo> {
    const out = await this.#out(['log', '-1', '--format=%P%x00%cI%x00%B', '--end-of-options', sha]);
    const [parents = '', date = '', ...message] = out.split('\0');
    return {
      sha,
      parent: parents.split(' ').find((p) => p !== '') ?? null,
      message: message.join('\0').trim(),
      date,
    };
  }

  /** What `sha` changed against `parent`, renames as a removal and an addition. */
  async changes(parent: string, sha: string): Promise<ChangedFile[]> {
    const out = await this.#out(['diff', '--name-status', '-z', '--no-renames', parent, sha]);
    const fields = out.split('\0');
    const files: ChangedFile[] = [];
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const status = fields[i] ?? '';
      const path = fields[i + 1] ?? '';
      if (status && path) files.push({ path, deleted: status.startsWith('D') });
    }
    return files;
  }

  /**
   * The start of a task: `commit`'s parent with only `files` as `commit` has them (added,
   * changed or removed), as a commit object. Written through a private index: the user's
   * index and work tree are not touched.
   */
  async startCommit(commit: CommitInfo, files: readonly ChangedFile[]): Promise<string> {
    if (commit.parent === null) throw new Error(`${commit.sha} has no parent`);
    const scratch = await mkdtemp(join(tmpdir(), 'errand-eval-index-'));
    try {
      const env = {
        GIT_INDEX_FILE: join(scratch, 'index'),
        GIT_AUTHOR_NAME: IDENTITY.name,
        GIT_AUTHOR_EMAIL: IDENTITY.email,
        GIT_COMMITTER_NAME: IDENTITY.name,
        GIT_COMMITTER_EMAIL: IDENTITY.email,
        GIT_AUTHOR_DATE: commit.date,
        GIT_COMMITTER_DATE: commit.date,
      };
      await this.#out(['read-tree', commit.parent], env);
      const kept = files.filter((f) => !f.deleted).map((f) => f.path);
      const entries =
        kept.length === 0 ? '' : await this.#out(['ls-tree', '-z', commit.sha, '--', ...kept], env);
      const lines: string[] = [];
      for (const entry of entries.split('\0')) {
        // "<mode> blob <id>\t<path>"
        const match = /^(\d+) blob ([0-9a-f]+)\t(.*)$/s.exec(entry);
        if (match) lines.push(`${match[1]} ${match[2]}\t${match[3]}`);
      }
      const zero = '0'.repeat(commit.sha.length);
      for (const f of files) if (f.deleted) lines.push(`0 ${zero}\t${f.path}`);
      await this.#out(
        ['update-index', '-z', '--index-info'],
        env,
        lines.map((l) => `${l}\0`).join(''),
      );
      const tree = await this.#out(['write-tree'], env);
      const message = `errand eval: the tests of ${commit.sha.slice(0, 12)} on its parent\n\nThe start of the eval task ${commit.sha.slice(0, 12)}: the parent commit with only that commit's test changes.`;
      return await this.#out(['commit-tree', tree, '-p', commit.parent, '-m', message], env);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }

  /** Points the task's branch at its start commit (made again by each from-git). */
  async setBranch(sha: string, start: string): Promise<void> {
    await this.#out(['update-ref', `refs/heads/${startBranch(sha)}`, start]);
  }

  /** The diff from `from` to `to`, binary files included, for `git apply`. */
  diff(from: string, to: string): Promise<string> {
    return gitOut(this.#cfg, ['diff', '--binary', '--no-renames', from, to], {
      cwd: this.#dir,
    }).then((patch) => `${patch}\n`);
  }

  /** A detached worktree at `commit` in a new temporary directory. */
  async addWorktree(commit: string): Promise<string> {
    const parent = await mkdtemp(join(tmpdir(), 'errand-eval-'));
    const dir = join(parent, 'checkout');
    await this.#out(['worktree', 'add', '--detach', dir, commit]);
    return dir;
  }

  /** Applies a patch to the worktree's files (false when it does not apply). */
  async apply(worktree: string, patch: string): Promise<boolean> {
    const result = await runGit(this.#cfg, ['apply', '--whitespace=nowarn'], {
      cwd: worktree,
      input: patch,
      okCodes: [1],
    });
    return result.code === 0;
  }

  /** Removes the worktree and its temporary directory. */
  async removeWorktree(dir: string): Promise<void> {
    await this.#out(['worktree', 'remove', '--force', dir]).catch(() => undefined);
    await rm(join(dir, '..'), { recursive: true, force: true });
    await this.#out(['worktree', 'prune']).catch(() => undefined);
  }

  /** The URL of a remote (null when there is no such remote). */
  async remoteUrl(remote: string): Promise<string | null> {
    const result = await runGit(this.#cfg, ['remote', 'get-url', '--end-of-options', remote], {
      cwd: this.#dir,
      okCodes: [2, 128],
    });
    return result.code === 0 ? result.stdout.trim() : null;
  }

  /**
   * Pushes the tasks' branches to `remote` (a remote's name or a URL), replacing those of an
   * earlier from-git. The one git run as the user runs it, with their environment (their SSH
   * keys and known hosts, their credential helper): the push is theirs. Still no shell.
   */
  push(remote: string, shas: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
    const refs = shas.map(
      (sha) => `+refs/heads/${startBranch(sha)}:refs/heads/${startBranch(sha)}`,
    );
    const args = ['push', '--porcelain', '--end-of-options', remote, ...refs];
    return new Promise((resolve, reject) => {
      const child = spawn('git', args, {
        cwd: this.#dir,
        env,
        shell: false,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      const keep = (chunk: Buffer) => {
        output = (output + chunk.toString('utf8')).slice(-4000);
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      child.on('error', reject);
      child.on('close', (code) => {
        if (code === 0) resolve();
        else reject(new CliError(`git push to ${remote} failed (exit ${code}): ${output.trim()}`));
      });
    });
  }
}
