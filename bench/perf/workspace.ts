// Rows 6 and 7 of the perf bench, in the bench process: src/workspace prepareCheckout with the
// WorkspaceConfig the service builds (src/turns/pipeline.ts workspaceConfig) on a 20,000-file
// origin, each next to the plain git commands that do the same on the same disk: a follow-up
// turn against fetch + reset --hard + clean on the job's clone, and a job's first turn (the
// project's mirror present) against `git clone --reference <mirror>`.
import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config.ts';
import { workspaceConfig } from '../../src/turns/pipeline.ts';
import { prepareCheckout, type WorkspaceConfig } from '../../src/workspace/index.ts';
import { mirrorDir } from '../../src/workspace/layout.ts';
import { makeOrigin } from '../workspace/prepare.ts';

export const WORKSPACE_FILES = 20_000;

const execFileAsync = promisify(execFile);

/** Plain git, with none of the user's or the system's configuration. */
const PLAIN_GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  LC_ALL: 'C',
};

async function plainGit(cwd: string, ...args: string[]): Promise<void> {
  await execFileAsync('git', ['-c', 'protocol.file.allow=always', ...args], {
    cwd,
    env: PLAIN_GIT_ENV,
    maxBuffer: 16 * 1024 * 1024,
  });
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

const PROJECT = 'prj_perfworkspace000000';

export interface WorkspaceRig {
  /** prepareCheckout of the job whose clone exists (a follow-up turn), in ms. */
  followUp(): Promise<number>;
  /** git fetch + reset --hard + clean -ffdx on that job's clone, in ms. */
  followUpPlain(): Promise<number>;
  /** prepareCheckout of a new job, the project's mirror present, in ms. */
  firstTurn(): Promise<number>;
  /** git clone --reference <mirror> <origin> <new dir>, in ms. */
  firstTurnPlain(): Promise<number>;
  gitVersion: string;
}

/** Builds the origin, the mirror (a first job) and the follow-up job's clone under `dir`. */
export async function startWorkspaceRig(dir: string): Promise<WorkspaceRig> {
  const bare = path.join(dir, 'origin.git');
  await makeOrigin(bare, WORKSPACE_FILES);
  const repository = `file://${bare}`;
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: '',
    ERRAND_DATA_DIR: path.join(dir, 'data'),
    ERRAND_ALLOW_LOCAL_REPOS: 'true',
  });
  const cfg: WorkspaceConfig = workspaceConfig(config);
  const prepare = (jobId: string) =>
    prepareCheckout(cfg, {
      projectId: PROJECT,
      jobId,
      repository,
      ref: 'main',
      branch: `errand/${jobId}`,
    });
  const followUpJob = 'job_perffollowup0000000';
  // The project's first turn makes the mirror; then the follow-up job's first turn its clone.
  await prepare('job_perfwarmup000000000');
  const followUpDir = (await prepare(followUpJob)).dir;
  const mirror = mirrorDir(cfg, PROJECT);
  const plainDir = path.join(dir, 'plain');
  await mkdir(plainDir, { recursive: true });
  let jobs = 0;
  let plainClones = 0;
  const { stdout } = await execFileAsync('git', ['version'], { env: PLAIN_GIT_ENV });
  const rig: WorkspaceRig = {
    gitVersion: stdout.trim(),
    followUp: () => timed(() => prepare(followUpJob)),
    followUpPlain: () =>
      timed(async () => {
        await plainGit(followUpDir, 'fetch', '--quiet', '--no-tags', repository, 'main');
        await plainGit(followUpDir, 'reset', '--hard', '--quiet', 'FETCH_HEAD');
        await plainGit(followUpDir, 'clean', '-ffdxq');
      }),
    firstTurn: () => {
      jobs += 1;
      return timed(() => prepare(`job_perffirst${String(jobs).padStart(10, '0')}`));
    },
    firstTurnPlain: () => {
      plainClones += 1;
      const target = path.join(plainDir, `clone-${plainClones}`);
      return timed(() =>
        plainGit(plainDir, 'clone', '--quiet', '--reference', mirror, repository, target),
      );
    },
  };
  // The first of each kind pays for cold caches: run each once before anything is measured.
  await rig.followUp();
  await rig.followUpPlain();
  await rig.firstTurnPlain();
  return rig;
}

/** Removes everything the rig wrote (tens of thousands of files per clone). */
export async function removeWorkspaceRig(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 3 });
}
