// `errand eval from-git`: eval tasks from a local repository's own history, SWE-bench style. A
// first-parent commit (a merged pull request is its merge) that changed code and tests together
// is a task: it starts from the parent with only the commit's test changes, its prompt is the
// commit message (with the text of the issues it fixes, read from the project's forge through
// the API), its check the test command on the commit's test files. A task is kept only when its
// check fails at the start and passes with the commit's real fix, both tried in a temporary
// worktree.
import { posix } from 'node:path';
import picomatch from 'picomatch';
import type { EvalSuite, EvalTask, ForgeIssue } from '../../client/index.ts';
import { type ChangedFile, type CommitInfo, type LocalRepository, startBranch } from './history.ts';
import { lastLine } from './report.ts';
import type { CommandResult, CommandRunner } from './runner.ts';

/** What names a test file when --tests does not: the usual names of the common ecosystems. */
export const DEFAULT_TEST_GLOBS: readonly string[] = [
  '*.test.*',
  '*.spec.*',
  'test_*.py',
  '*_test.py',
  '*_test.go',
  'tests/**',
  'test/**',
  '__tests__/**',
  'spec/**',
  '*Test.java',
];

/** Files that are neither code nor tests: a commit that changed only these and tests is no task. */
const NOT_CODE_GLOBS = [
  '*.md',
  '*.markdown',
  '*.rst',
  '*.txt',
  '*.adoc',
  'docs/**',
  'doc/**',
  'LICENSE*',
  'CHANGELOG*',
  'AUTHORS*',
  '.github/**',
];

const notCode = pathMatcher(NOT_CODE_GLOBS);

/** How many first-parent commits are walked without --range: the last ones of HEAD. */
const DEFAULT_WALK = 200;
/** How many commits a --range walks at most. */
const RANGE_WALK = 10_000;

/**
 * A matcher of paths for globs: one without a slash matches a file's name in any folder
 * (`*_test.go`), one with a slash the path from the top or from any folder (`tests/**` matches
 * `tests/a.py` and `pkg/tests/a.py`).
 */
function pathMatcher(globs: readonly string[]): (path: string) => boolean {
  const matchers = globs.map((glob) => {
    const options = { dot: true };
    if (!glob.includes('/')) {
      const name = picomatch(glob, options);
      return (path: string) => name(posix.basename(path));
    }
    const anchored = picomatch(glob.replace(/^\/+/, ''), options);
    const anywhere = picomatch(`**/${glob.replace(/^\/+/, '')}`, options);
    return (path: string) => anchored(path) || anywhere(path);
  });
  return (path) => matchers.some((m) => m(path));
}

/** A word for `sh`: as it is when it is plain, else in single quotes. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_./:@%+=,-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The check of a task: `--test-cmd` with {files} replaced by its test files and {dirs} by their
 * folders (`./pkg/x`, `.` for the top), each shell-quoted.
 */
export function checkCommand(template: string, testFiles: readonly string[]): string {
  const files = testFiles.map(shellQuote).join(' ');
  const dirs = [...new Set(testFiles.map((f) => posix.dirname(f)))]
    .map((d) => (d === '.' ? '.' : `./${d}`))
    .map(shellQuote)
    .join(' ');
  return template.replaceAll('{files}', files).replaceAll('{dirs}', dirs);
}

/** The issues a message says it fixes: "Fixes #12", "closes owner/repo#3". */
function fixedIssues(message: string): string[] {
  const refs = message.matchAll(
    /\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)\s*:?\s+((?:[\w.-]+\/[\w.-]+)?#\d+)/gi,
  );
  return [...new Set([...refs].map((m) => m[1] ?? ''))].filter((r) => r !== '');
}

/** At most this many characters of an issue's body go into a prompt; the rest is cut, and said so. */
export const MAX_ISSUE_CHARS = 8_000;
/** At most this many characters of an issue's title. */
const MAX_TITLE_CHARS = 300;
/** At most this many issues' text per task; the others are named only. */
const MAX_ISSUES_READ = 5;

/** What the project's forge answered for an issue a commit fixes: its text, or why there is none. */
type IssueText = { issue: ForgeIssue } | { missing: string };

/**
 * Where the fixed issues' text comes from: a read of the project's forge by number, or why
 * none is read (no --project, --no-issues, a project without a forge).
 */
export type IssueSource = ((number: number) => Promise<IssueText>) | { notRead: string };

/** `text` cut to at most `max` characters, never in the middle of a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 1)) ? max - 1 : max;
  return text.slice(0, end);
}

/** An issue under its heading: its title, and its body up to MAX_ISSUE_CHARS. */
function issueSection(issue: ForgeIssue): string {
  const what = issue.pullRequest ? 'Pull request' : 'Issue';
  const title = cut(issue.title.replace(/\s+/g, ' ').trim(), MAX_TITLE_CHARS);
  const whole = issue.body.trim();
  const body = cut(whole, MAX_ISSUE_CHARS);
  const rest =
    body.length < whole.length
      ? `\n\n[The rest of this description, ${whole.length - body.length} more characters, was cut: ${issue.url}]`
      : '';
  return `## ${what} #${issue.number}: ${title}\n\n${body || '(no description)'}${rest}`;
}

/**
 * The task's prompt: the commit message; each fixed issue whose text was read under its own
 * heading; the others named again at the end.
 */
function promptOf(message: string, read: readonly ForgeIssue[], unread: readonly string[]): string {
  const parts = [message, ...read.map(issueSection)];
  if (unread.length > 0) {
    const which = unread.length === 1 ? 'issue' : 'issues';
    parts.push(`(The ${which} this is about: ${unread.join(', ')}.)`);
  }
  return parts.join('\n\n');
}

/**
 * The prompt of a kept commit: its message and the text of the issues it fixes that `issues`
 * reads (an issue of the project's repository, `#12`; not `owner/repo#3`). `say` is told each
 * issue's fate.
 */
async function promptWithIssues(
  message: string,
  issues: IssueSource,
  say: (line: string) => void,
): Promise<string> {
  const read: ForgeIssue[] = [];
  const unread: string[] = [];
  const without = (ref: string, why: string) => {
    unread.push(ref);
    say(`  ${ref}: its text was ${why}; the prompt names it only`);
  };
  for (const ref of fixedIssues(message)) {
    const digits = /^#(\d+)$/.exec(ref)?.[1];
    const number = Number(digits);
    if (typeof issues !== 'function') without(ref, `not read: ${issues.notRead}`);
    else if (digits === undefined) without(ref, 'not read: an issue of another repository');
    else if (!Number.isSafeInteger(number) || number < 1)
      without(ref, 'not read: no issue has that number');
    else if (read.length >= MAX_ISSUES_READ)
      without(ref, `not read: at most ${MAX_ISSUES_READ} issues are read per task`);
    else {
      const text = await issues(number);
      if ('missing' in text) without(ref, `not found: ${text.missing}`);
      else {
        read.push(text.issue);
        say(`  ${ref}: its text is in the prompt ("${cut(text.issue.title, 80)}")`);
      }
    }
  }
  return promptOf(message, read, unread);
}

export interface FromGitOptions {
  range: string | undefined;
  /** Only commits whose code changes touch these paths. */
  paths: readonly string[];
  tests: readonly string[];
  /** The most tasks kept. */
  max: number;
  testCmd: string;
  /** What the suite's tasks name: a project id or a repository URL. */
  target: { project: string } | { repository: string };
  setup: string | undefined;
  /** Whether the setup command may reach the network (the checks never do). */
  setupNetwork: boolean;
  /** Where the text of the issues a commit fixes comes from. */
  issues: IssueSource;
}

/** A commit that became a task. */
interface Kept {
  sha: string;
  subject: string;
  task: EvalTask;
}

/** A commit with code and test changes that is no task, and why. */
interface Dropped {
  sha: string;
  subject: string;
  reason: string;
}

export interface FromGitOutcome {
  suite: EvalSuite;
  kept: Kept[];
  dropped: Dropped[];
  /** Commits walked. */
  walked: number;
  /** Commits without both code and test changes (or root commits). */
  ignored: number;
}

/** A commit whose changes qualify it: its code and (existing) test files. */
interface Candidate {
  commit: CommitInfo & { parent: string };
  subject: string;
  tests: ChangedFile[];
  testFiles: string[];
}

/** The commit as a candidate, or null when it is not one (no parent, not code and tests). */
async function candidateOf(
  repo: LocalRepository,
  sha: string,
  isTest: (path: string) => boolean,
  isInPaths: (path: string) => boolean,
): Promise<Candidate | null> {
  const commit = await repo.commit(sha);
  const { parent } = commit;
  if (parent === null) return null;
  const changes = await repo.changes(parent, sha);
  const tests = changes.filter((f) => isTest(f.path));
  const code = changes.filter((f) => !isTest(f.path) && !notCode(f.path));
  const testFiles = tests.filter((f) => !f.deleted).map((f) => f.path);
  if (testFiles.length === 0 || code.length === 0) return null;
  if (!code.some((f) => isInPaths(f.path))) return null;
  const subject = commit.message.split('\n')[0] ?? '';
  return { commit: { ...commit, parent }, subject, tests, testFiles };
}

function failureText(what: string, result: CommandResult): string {
  const how = result.timedOut ? 'timed out' : `exit ${result.exitCode}`;
  const last = lastLine(result.output);
  return `${what} (${how})${last ? `: ${last}` : ''}`;
}

/**
 * Tries the task in a worktree of its start: the setup, the check (which must fail), the real
 * fix, the check again (which must pass). Answers why it is dropped, or null to keep it.
 */
async function validate(
  repo: LocalRepository,
  runner: CommandRunner,
  start: string,
  sha: string,
  setup: { command: string; network: boolean } | undefined,
  check: string,
): Promise<string | null> {
  const dir = await repo.addWorktree(start);
  try {
    if (setup !== undefined) {
      const prepared = await runner.run(dir, setup.command, setup.network);
      if (prepared.exitCode !== 0)
        return failureText('the setup command failed at the start', prepared);
    }
    const before = await runner.run(dir, check);
    if (before.exitCode === 0)
      return "the check passes at the start: the commit's tests do not need its fix";
    if (!(await repo.apply(dir, await repo.diff(start, sha))))
      return 'the real fix does not apply at the start after the setup';
    const after = await runner.run(dir, check);
    if (after.exitCode !== 0) return failureText('the check still fails with the real fix', after);
    return null;
  } finally {
    await repo.removeWorktree(dir);
  }
}

/**
 * Walks the history and makes the suite: each candidate's start commit, its validation, and for
 * a kept one its branch errand-eval/<sha12>. `say` is told each commit's fate as it is known.
 */
export async function tasksFromGit(
  repo: LocalRepository,
  runner: CommandRunner,
  options: FromGitOptions,
  say: (line: string) => void,
): Promise<FromGitOutcome> {
  const isTest = pathMatcher(options.tests);
  const isInPaths = options.paths.length === 0 ? () => true : pathMatcher(options.paths);
  const shas = await repo.walk(
    options.range,
    options.range === undefined ? DEFAULT_WALK : RANGE_WALK,
  );
  const kept: Kept[] = [];
  const dropped: Dropped[] = [];
  let ignored = 0;
  let walked = 0;
  for (const sha of shas) {
    if (kept.length >= options.max) break;
    walked += 1;
    const candidate = await candidateOf(repo, sha, isTest, isInPaths);
    if (candidate === null) {
      ignored += 1;
      continue;
    }
    const short = sha.slice(0, 12);
    const check = checkCommand(options.testCmd, candidate.testFiles);
    const start = await repo.startCommit(candidate.commit, candidate.tests);
    say(`trying ${short} ${candidate.subject}`);
    const setup =
      options.setup === undefined
        ? undefined
        : { command: options.setup, network: options.setupNetwork };
    const reason = await validate(repo, runner, start, sha, setup, check);
    if (reason !== null) {
      dropped.push({ sha, subject: candidate.subject, reason });
      say(`  dropped: ${reason}`);
      continue;
    }
    await repo.setBranch(sha, start);
    say(`  kept as ${startBranch(sha)}: fails at the start, passes with the real fix`);
    const task: EvalTask = {
      id: short,
      ...options.target,
      ref: startBranch(sha),
      prompt: await promptWithIssues(candidate.commit.message, options.issues, say),
      check,
    };
    kept.push({ sha, subject: candidate.subject, task });
  }
  const suite: EvalSuite = { tasks: kept.map((k) => k.task) };
  return { suite, kept, dropped, walked, ignored };
}
