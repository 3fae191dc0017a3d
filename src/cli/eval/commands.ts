// `errand eval …`: measuring agents on your own code (docs/eval.md). run, list, show, cancel
// and compare are clients of the eval API (/v2/admin/evals); from-git makes a suite from a local
// repository's history, with git and the sandbox of this machine.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { type ErrandClient, ErrandError, type EvalRun } from '../../client/index.ts';
import { gitInheritedEnv } from '../../config.ts';
import { GitError } from '../../workspace/errors.ts';
import { ADMIN_NOTE, withAdminClient } from '../api.ts';
import {
  COMMON_OPTIONS,
  defineCommand,
  type Family,
  type Io,
  print,
  wholeNumber,
} from '../command.ts';
import { CliError, EXIT, UsageError } from '../errors.ts';
import { compareRuns, comparisonMarkdown, comparisonText } from './compare.ts';
import { DEFAULT_TEST_GLOBS, type IssueSource, MAX_ISSUE_CHARS, tasksFromGit } from './from-git.ts';
import { LocalRepository } from './history.ts';
import { isSettled, resultLine, runListLine, runMarkdown, runText } from './report.ts';
import { commandRunner } from './runner.ts';
import { readSuite, writeSuite } from './suite.ts';

/** How often a run is read again while waiting for it. */
const POLL_MS = 2000;
/** Reads of the run in a row that may fail (unreachable, 5xx) before the waiting gives up. */
const MAX_FAILED_POLLS = 5;
/** The exit code after Ctrl-C stopped the waiting (the run goes on). */
const INTERRUPTED = 130;

const DATA_DIR = { 'data-dir': COMMON_OPTIONS['data-dir'] } as const;
const FILES = {
  json: { type: 'string', value: 'FILE' },
  markdown: { type: 'string', value: 'FILE' },
} as const;

/** Writes the run to the files asked for: the API's record as JSON, the tables as Markdown. */
async function writeRun(
  run: EvalRun,
  files: { json?: string | undefined; markdown?: string | undefined },
  io: Io,
) {
  try {
    if (files.json !== undefined) {
      await writeFile(files.json, `${JSON.stringify(run, null, 2)}\n`);
      io.stdout.write(`wrote ${files.json}\n`);
    }
    if (files.markdown !== undefined) {
      await writeFile(files.markdown, runMarkdown(run));
      io.stdout.write(`wrote ${files.markdown}\n`);
    }
  } catch (err) {
    throw new CliError(`cannot write the run: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function resultKey(r: EvalRun['results'][number]): string {
  return JSON.stringify([r.task, r.agent, r.repeat]);
}

/** Whether a failed read of the run may be tried again: the service unreachable, or failing. */
function transient(err: unknown): boolean {
  return err instanceof ErrandError && (err.code === 'network_error' || err.status >= 500);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        done();
      },
      { once: true },
    );
  });
}

/**
 * Reads the run every 2 s until it is no longer running, printing each result as it settles
 * (a few failed reads in a row are waited out); Ctrl-C stops the waiting (not the run).
 * Answers the last record read, and whether Ctrl-C stopped the waiting.
 */
async function watch(
  client: ErrandClient,
  first: EvalRun,
  io: Io,
): Promise<{ run: EvalRun; interrupted: boolean }> {
  const stop = new AbortController();
  const interrupted = () => stop.abort();
  process.once('SIGINT', interrupted);
  const printed = new Set<string>();
  let run = first;
  let failures = 0;
  try {
    for (;;) {
      for (const r of run.results)
        if (isSettled(r) && !printed.has(resultKey(r))) {
          printed.add(resultKey(r));
          io.stdout.write(`${resultLine(r)}\n`);
        }
      if (run.state !== 'running') return { run, interrupted: false };
      await pause(POLL_MS, stop.signal);
      if (stop.signal.aborted) break;
      try {
        run = await client.getEval(run.id, { signal: stop.signal });
        failures = 0;
      } catch (err) {
        if (stop.signal.aborted) break;
        // A restart of the service, a moment without network: the run goes on there.
        if (!transient(err) || ++failures >= MAX_FAILED_POLLS) throw err;
      }
    }
  } finally {
    process.off('SIGINT', interrupted);
  }
  io.stdout.write(
    `\nstopped waiting; the run goes on. Follow it again: errand eval show ${run.id} --wait\n`,
  );
  return { run, interrupted: true };
}

/**
 * After the waiting: the files with the run as last read; when it ended, its table first. The
 * exit code: 0 finished, 1 cancelled, 130 stopped waiting.
 */
async function ended(
  watched: { run: EvalRun; interrupted: boolean },
  files: { json?: string | undefined; markdown?: string | undefined },
  io: Io,
): Promise<number> {
  const { run, interrupted } = watched;
  if (!interrupted) io.stdout.write(`\n${runText(run)}\n`);
  await writeRun(run, files, io);
  if (interrupted) return INTERRUPTED;
  return run.state === 'finished' ? EXIT.ok : EXIT.failed;
}

const run = defineCommand({
  name: 'eval run',
  args: ['SUITE'],
  options: { ...FILES, 'no-wait': { type: 'boolean' }, ...DATA_DIR },
  summary:
    'starts the suite (YAML or JSON) and prints each result as it comes in, then the table per agent; Ctrl-C stops waiting, not the run',
  async run({ values, args: [path = ''], io }) {
    const suite = await readSuite(path);
    return withAdminClient(io, values['data-dir'], async (client) => {
      const started = await client.createEval(suite);
      const tasks = started.suite.tasks.length;
      const agents = started.suite.agents?.length ?? 1;
      const repeat = started.suite.repeat ?? 1;
      io.stdout.write(
        `started ${started.id} ${started.name}: ${started.results.length} results (${tasks} tasks × ${agents} agents × ${repeat})\n`,
      );
      if (values['no-wait']) {
        io.stdout.write(`follow it: errand eval show ${started.id} --wait\n`);
        await writeRun(started, values, io);
        return EXIT.ok;
      }
      return ended(await watch(client, started, io), values, io);
    });
  },
});

const list = defineCommand({
  name: 'eval list',
  options: COMMON_OPTIONS,
  summary: 'the eval runs, newest first, with each agent’s pass rate',
  async run({ values, io }) {
    const runs = await withAdminClient(io, values['data-dir'], (c) => c.listEvals());
    print(
      io,
      values.json,
      runs,
      runs.length === 0 ? 'no eval runs' : runs.map(runListLine).join('\n'),
    );
    return EXIT.ok;
  },
});

const show = defineCommand({
  name: 'eval show',
  args: ['RUN'],
  options: { wait: { type: 'boolean' }, ...FILES, ...DATA_DIR },
  summary: 'the run’s table and failures (with --wait: each result as it comes in, to the end)',
  async run({ values, args: [id = ''], io }) {
    return withAdminClient(io, values['data-dir'], async (client) => {
      const current = await client.getEval(id);
      if (!values.wait) {
        io.stdout.write(`${runText(current)}\n`);
        await writeRun(current, values, io);
        return EXIT.ok;
      }
      return ended(await watch(client, current, io), values, io);
    });
  },
});

const cancel = defineCommand({
  name: 'eval cancel',
  args: ['RUN'],
  options: COMMON_OPTIONS,
  summary: 'cancels the run’s pending results and archives its running jobs',
  async run({ values, args: [id = ''], io }) {
    const cancelled = await withAdminClient(io, values['data-dir'], (c) => c.cancelEval(id));
    print(io, values.json, cancelled, `cancelled ${runListLine(cancelled)}`);
    return EXIT.ok;
  },
});

const compare = defineCommand({
  name: 'eval compare',
  args: ['RUN_A', 'RUN_B'],
  options: { markdown: FILES.markdown, ...COMMON_OPTIONS },
  summary:
    'task by task, the passes in A and in B and what changed (fixed, broke, same…); per agent the pass rate and cost change',
  async run({ values, args: [a = '', b = ''], io }) {
    const [runA, runB] = await withAdminClient(io, values['data-dir'], (c) =>
      Promise.all([c.getEval(a), c.getEval(b)]),
    );
    const comparison = compareRuns(runA, runB);
    print(io, values.json, comparison, comparisonText(comparison));
    if (values.markdown !== undefined) {
      await writeFile(values.markdown, comparisonMarkdown(comparison));
      if (!values.json) io.stdout.write(`wrote ${values.markdown}\n`);
    }
    return EXIT.ok;
  },
});

/** The usage page of from-git: how a commit becomes a task. */
const FROM_GIT_DETAILS = `SWE-bench style tasks from REPO's own history (REPO is a local path). Walks the first-parent
commits of --range (default: the last 200 of HEAD), so that a merged pull request is one task,
and keeps those that changed code and tests. A task starts from the parent commit with only the
commit's test changes (branch errand-eval/<sha12> in REPO, pushed to --push REMOTE); its prompt
is the commit message and, with --project, the title and body of each issue it fixes ("Fixes
#12"), read from the project's forge through the API (each body cut at ${MAX_ISSUE_CHARS.toLocaleString('en')} characters);
its check is --test-cmd with {files} replaced by the commit's test files and {dirs} by their
folders (./pkg/x; for Go: 'go test {dirs}'), shell-quoted.

Each task is tried in a temporary worktree: --setup, then the check at the start (it must fail)
and with the commit's real fix (it must pass); one that does not is dropped, and said why. These
commands run in the bubblewrap sandbox without network (--setup-network gives the setup the
network, to install dependencies; the checks never have it). Where the sandbox is not available
they run unconfined, and only with --unsandboxed. At most --max tasks (default 50) are kept;
the suite goes to --out (default suite.yaml).

  --tests GLOB      what names a test file (repeat it); replaces the defaults:
                    ${DEFAULT_TEST_GLOBS.slice(0, 5).join(' ')}
                    ${DEFAULT_TEST_GLOBS.slice(5).join(' ')}
  --paths GLOB      only commits whose code changes touch these paths (repeat it)
  --project ID      the project the tasks run in; or --repository URL (default: the URL of
                    --push's remote, else origin's)
  --no-issues       with --project: do not read the fixed issues' text (no service needed)
`;

/**
 * Where the text of the issues a commit fixes comes from: with --project, the project's forge
 * through the API (the project is read first, so that an unreachable service, a refused key or
 * an unknown project stop from-git before it walks); else nothing, and why.
 */
async function issueSource(
  io: Io,
  dataDir: string | undefined,
  target: { project: string } | { repository: string },
  skip: boolean,
): Promise<IssueSource> {
  if (skip) return { notRead: '--no-issues' };
  if (!('project' in target))
    return { notRead: "no --project (issues are read from the project's forge)" };
  const projectId = target.project;
  return withAdminClient(io, dataDir, async (client) => {
    const project = await client.getProject(projectId);
    if (project.forge.kind === 'git')
      return { notRead: `project ${projectId} is on a plain git remote, without a forge` };
    return async (number: number) => {
      try {
        return { issue: await client.getForgeIssue(projectId, number) };
      } catch (err) {
        // The API's answer for this one issue (not there, the forge failing): the task keeps
        // today's prompt, and the user is told why.
        if (err instanceof ErrandError)
          return { missing: err.serverMessage ?? `${err.message} (${err.code})` };
        throw err;
      }
    };
  });
}

/** What the tasks name: --project, --repository, else the URL of --push's remote or origin. */
async function targetOf(
  repo: LocalRepository,
  values: { project?: string; repository?: string; push?: string },
): Promise<{ project: string } | { repository: string }> {
  if (values.project !== undefined && values.repository !== undefined)
    throw new UsageError('give --project or --repository, not both');
  if (values.project !== undefined) return { project: values.project };
  if (values.repository !== undefined) return { repository: values.repository };
  for (const remote of [values.push, 'origin']) {
    if (remote === undefined) continue;
    const url = /^[A-Za-z][\w.+-]*:\/\//.test(remote) ? remote : await repo.remoteUrl(remote);
    if (url !== null) return { repository: url };
  }
  throw new UsageError(
    'name the project the tasks run in (--project prj_…) or its repository (--repository URL): the repository has no origin remote to take it from',
  );
}

const fromGit = defineCommand({
  name: 'eval from-git',
  args: ['REPO'],
  options: {
    'test-cmd': { type: 'string', value: "'CMD {files}'", required: true },
    range: { type: 'string', value: 'A..B' },
    paths: { type: 'string', value: 'GLOB', multiple: true },
    tests: { type: 'string', value: 'GLOB', multiple: true },
    max: { type: 'string', value: 'N' },
    project: { type: 'string', value: 'prj_…' },
    repository: { type: 'string', value: 'URL' },
    setup: { type: 'string', value: 'CMD' },
    'setup-network': { type: 'boolean' },
    out: { type: 'string', value: 'FILE' },
    push: { type: 'string', value: 'REMOTE' },
    'no-issues': { type: 'boolean' },
    unsandboxed: { type: 'boolean' },
    ...DATA_DIR,
  },
  summary:
    'a suite from a local repository’s history: each commit (or merged PR) that changed code and tests, started from its parent with its tests only, checked with --test-cmd',
  details: FROM_GIT_DETAILS,
  async run({ values, args: [repoPath = ''], io }) {
    const max = wholeNumber(values.max, 'max', 1) ?? 50;
    if (!values['test-cmd'].trim()) throw new UsageError('--test-cmd must not be empty');
    const home = await mkdtemp(join(tmpdir(), 'errand-eval-git-'));
    try {
      const git = {
        rootDir: home,
        // The user's own repository and remotes, on their machine: local paths are fine.
        allowLocalRepos: true,
        identity: { name: 'Errand eval', email: 'eval@errand.invalid' },
        inheritedEnv: gitInheritedEnv(io.env),
      };
      const probe = new LocalRepository(git, resolve(repoPath));
      const top = await probe.topLevel().catch(() => {
        throw new CliError(`${repoPath} is not a git repository`);
      });
      const repo = new LocalRepository(git, top);
      const target = await targetOf(repo, values);
      const setupNetwork = values['setup-network'] === true;
      if (setupNetwork && values.setup === undefined)
        throw new UsageError('--setup-network is about the --setup command: give one');
      const skipIssues = values['no-issues'] === true;
      const issues = await issueSource(io, values['data-dir'], target, skipIssues);
      const runner = await commandRunner(values.unsandboxed === true, setupNetwork, io.env);
      io.stdout.write(
        runner.confined
          ? `the setup and test commands run in the sandbox (${setupNetwork ? 'the setup with the network, the checks without' : 'no network'}, only the worktree writable)\n`
          : 'the sandbox is not available: the setup and test commands run UNCONFINED, with your rights and network (--unsandboxed)\n',
      );
      const outcome = await tasksFromGit(
        repo,
        runner,
        {
          range: values.range,
          paths: values.paths ?? [],
          tests: values.tests ?? DEFAULT_TEST_GLOBS,
          max,
          testCmd: values['test-cmd'],
          target,
          setup: values.setup,
          setupNetwork,
          issues,
        },
        (line) => io.stdout.write(`${line}\n`),
      );
      const name = `from-git ${basename(top)} ${values.range ?? `last ${outcome.walked} commits`}`;
      outcome.suite = { name, ...outcome.suite };
      const out = values.out ?? 'suite.yaml';
      await writeSuite(
        out,
        outcome.suite,
        `errand eval from-git ${top}\n${outcome.kept.length} tasks, each from the commit its id names; dropped: ${outcome.dropped.length}`,
      );
      let pushed = '';
      if (values.push !== undefined && outcome.kept.length > 0) {
        await repo.push(
          values.push,
          outcome.kept.map((k) => k.sha),
          io.env,
        );
        pushed = `; pushed their branches to ${values.push}`;
      }
      io.stdout.write(
        [
          '',
          `walked ${outcome.walked} commits: ${outcome.kept.length} tasks, ${outcome.dropped.length} dropped, ${outcome.ignored} without both code and test changes`,
          ...outcome.dropped.map(
            (d) => `  dropped ${d.sha.slice(0, 12)} ${d.subject}: ${d.reason}`,
          ),
          `wrote ${out} (${outcome.kept.length} tasks, branches errand-eval/<sha12> in ${top}${pushed})`,
          ...(values.push === undefined && outcome.kept.length > 0
            ? [
                "the project's repository needs these branches: git push REMOTE 'refs/heads/errand-eval/*' (or --push REMOTE)",
              ]
            : []),
          '',
        ].join('\n'),
      );
      return EXIT.ok;
    } catch (err) {
      // git's refusals (a bad --range, a remote that is not one) are the user's to act on.
      if (err instanceof GitError) throw new CliError(err.message);
      throw err;
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  },
});

export const evals: Family = {
  name: 'eval',
  intro:
    'Measures agents (engine × model) on your own repositories: a suite of tasks, each a prompt on\na ref and a check command, run as real jobs (docs/eval.md).',
  commands: [run, show, list, cancel, compare, fromGit],
  subcommandPages: true,
  outro: `  --json FILE        (run, show) the run record, as the API gives it, in FILE
  --markdown FILE    the tables as Markdown in FILE
  --json             (list, cancel, compare) exactly one JSON document on stdout

Exit codes: 0 done (a run: finished), 1 failed or refused (a run: cancelled), 2 a wrong command
line, 130 stopped waiting with Ctrl-C (the run goes on: errand eval show RUN --wait).

${ADMIN_NOTE.split('\n').slice(2).join('\n')}`,
};
