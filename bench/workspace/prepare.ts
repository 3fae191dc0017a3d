// Measures workspace preparation on a synthetic 20,000-file repository: the first turn of
// a job (mirror present, clone borrowing its objects) against a plain full clone, the
// --dissociate variant, a follow-up turn, and commit + push. Run: node bench/workspace/prepare.ts

import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gitInheritedEnv } from '../../src/config.ts';
import { commitAll } from '../../src/workspace/commit.ts';
import { runGit } from '../../src/workspace/git.ts';
import {
  type Checkout,
  prepareCheckout,
  pushBranch,
  type WorkspaceConfig,
} from '../../src/workspace/index.ts';

const FILES = 20_000;
const RUNS = 5;

interface Measurement {
  name: string;
  runs: number[];
  median: number;
  min: number;
  max: number;
}

const FIXTURE_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  LC_ALL: 'C',
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: FIXTURE_ENV, encoding: 'utf8' }).trim();
}

/** One commit of `files` small text files in nested folders, written with fast-import. */
export async function makeOrigin(bare: string, files = FILES): Promise<void> {
  await mkdir(bare, { recursive: true });
  git(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  const parts: string[] = [];
  const paths: string[] = [];
  for (let i = 0; i < files; i++) {
    const path = `src/pkg${i % 20}/mod${Math.floor(i / 20) % 25}/part${Math.floor(i / 500) % 40}/file${i}.txt`;
    const content = `// file ${i}\n${`export const value${i} = ${i * 7};\n`.repeat(6)}`;
    parts.push(`blob\nmark :${i + 1}\ndata ${Buffer.byteLength(content)}\n${content}\n`);
    paths.push(`M 100644 :${i + 1} ${path}\n`);
  }
  const message = 'synthetic repository\n';
  parts.push(
    'commit refs/heads/main\n',
    'committer Bench <bench@errand.test> 1700000000 +0000\n',
    `data ${message.length}\n${message}`,
    ...paths,
    'done\n',
  );
  await new Promise<void>((resolve, reject) => {
    const child = spawn('git', ['fast-import', '--quiet', '--done'], {
      cwd: bare,
      env: FIXTURE_ENV,
      stdio: ['pipe', 'ignore', 'inherit'],
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`fast-import ${code}`)),
    );
    child.stdin.end(parts.join(''));
  });
}

async function measure(name: string, runs: number, fn: (run: number) => Promise<void>) {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    await fn(run);
    times.push(Math.round(performance.now() - started));
  }
  const sorted = [...times].sort((a, b) => a - b);
  const result: Measurement = {
    name,
    runs: times,
    median: sorted[Math.floor(sorted.length / 2)] ?? 0,
    min: sorted[0] ?? 0,
    max: sorted.at(-1) ?? 0,
  };
  process.stderr.write(`${name}: median ${result.median} ms (${times.join(', ')})\n`);
  return result;
}

/** `parent` picks the disk under test (default: the system temp folder). */
export async function runWorkspaceBench(
  parent = tmpdir(),
): Promise<{ results: Measurement[]; markdown: string }> {
  const dir = await mkdtemp(join(parent, 'errand-bench-ws-'));
  try {
    const bare = join(dir, 'origin.git');
    const url = `file://${bare}`;
    await makeOrigin(bare);
    const cfg: WorkspaceConfig = {
      rootDir: join(dir, 'ws'),
      allowLocalRepos: true,
      identity: { name: 'Bench', email: 'bench@errand.test' },
      inheritedEnv: gitInheritedEnv(process.env),
    };
    const prepare = (projectId: string, jobId: string): Promise<Checkout> =>
      prepareCheckout(cfg, {
        projectId,
        jobId,
        repository: url,
        ref: 'main',
        branch: `errand/${jobId}`,
      });

    // Nothing is deleted between runs: on this kind of disk, deleting 20,000 files makes
    // the next runs' writes several times slower and the numbers meaningless.
    const results: Measurement[] = [];
    results.push(
      await measure('first turn of a new project (mirror created, full fetch, clone)', 3, (run) =>
        prepare(`cold${run}`, `cold-job${run}`).then(() => {}),
      ),
    );
    await prepare('proj', 'warmup');
    results.push(
      await measure(
        'first turn of a job (mirror exists: fetch, clone --shared, checkout)',
        RUNS,
        (run) => prepare('proj', `first${run}`).then(() => {}),
      ),
    );
    const mirror = join(cfg.rootDir, 'mirrors', 'proj.git');
    const scratch = (run: number) => join(dir, 'scratch', String(run));
    await mkdir(join(dir, 'scratch'));
    results.push(
      await measure(
        'variant: clone --shared --dissociate (own copy of objects), checkout',
        3,
        async (run) => {
          const args = ['clone', '--quiet', '--shared', '--dissociate', '--no-checkout'];
          await runGit(cfg, [...args, '--origin', 'mirror', '--', mirror, `${scratch(run)}-d`], {
            allowFile: true,
          });
          await runGit(cfg, ['checkout', '--quiet', '-B', 'errand/x', 'mirror/main', '--'], {
            cwd: `${scratch(run)}-d`,
          });
        },
      ),
    );
    results.push(
      await measure('baseline: fresh full clone over file:// (no mirror)', RUNS, (run) =>
        runGit(cfg, ['clone', '--quiet', '--', url, scratch(run)]).then(() => {}),
      ),
    );
    results.push(
      await measure('follow-up turn (existing clone: fetch, verify, reset, clean)', RUNS, () =>
        prepare('proj', 'first0').then(() => {}),
      ),
    );
    const co = await prepare('proj', 'first0');
    results.push(
      await measure('commit one changed file + push', RUNS, async (run) => {
        await writeFile(join(co.dir, 'src/pkg0/changed.txt'), `run ${run}\n`);
        await commitAll(cfg, { dir: co.dir, message: `bench ${run}` });
        await pushBranch(cfg, { dir: co.dir, repository: url, branch: 'errand/first0' });
      }),
    );

    const gitVersion = git(dir, 'version');
    const lines = [
      `Workspace preparation, ${FILES.toLocaleString('en')} files (${gitVersion}, Node ${process.version}, under ${parent}), median of ${RUNS} runs (3 for rows 1 and 3):`,
      '',
      '| step | median ms | min | max |',
      '|---|---:|---:|---:|',
      ...results.map((r) => `| ${r.name.trim()} | ${r.median} | ${r.min} | ${r.max} |`),
    ];
    const markdown = lines.join('\n');
    const out = join(import.meta.dirname, '..', 'results', 'workspace.json');
    await mkdir(dirname(out), { recursive: true });
    await writeFile(
      out,
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          git: gitVersion,
          node: process.version,
          files: FILES,
          dir: parent,
          results,
        },
        null,
        2,
      )}\n`,
    );
    return { results, markdown };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  // `--dir /dev/shm` measures git's own cost without the disk.
  const at = process.argv.indexOf('--dir');
  const { markdown } = await runWorkspaceBench(at === -1 ? undefined : process.argv[at + 1]);
  console.log(markdown);
}
