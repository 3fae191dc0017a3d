// `errand job …` as a user runs it: real `errand` processes against a running service whose
// turns a scripted runner plays (the prompt's first word says what the turn does). The API key
// is only ever in the child's environment.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AttemptResult } from '../../src/db/schema.ts';
import { TurnFailedError, type TurnInput, type TurnOutput } from '../../src/jobs/runner.ts';
import { untilStatus } from '../support/jobs.ts';
import { captureOutput, type Run } from '../support/process.ts';
import { SCRIPTED_ENV } from '../support/route-cases.ts';
import { RecordingRunner, work } from '../support/runners.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
const PACKAGE = new URL('../../package.json', import.meta.url);
const PR = 'https://forge.example/acme/app/pull/7';
const SHA = '0123456789abcdef0123456789abcdef01234567';
const LINE = /^\d\d:\d\d:\d\d {2}[a-z_.]+( {2}.*)?$/;
const ESCAPE = '\x1b';
const CLEAR_LINE = '\r\x1b[2K';

type Json = Record<string, unknown>;

/** What a `spend` turn used: on the default model (Claude Sonnet 4.5), $0.2925 at list prices. */
const SPENT = {
  inputTokens: 150_000,
  outputTokens: 7_500,
  cacheReadTokens: 100_000,
  cacheWriteTokens: 0,
};

/** A turn the test lets finish when it likes. */
const gates = new Map<string, () => void>();

/**
 * pr: a tool call, a commit and a pull request; complete: done, nothing changed; plan: a plan
 * (whatever the turn's mode); approve: the plan carried out; spend: one
 * model step whose tokens count; fail: a
 * failure retrying cannot fix; hold: works until archived; gate NAME: waits for the test.
 */
function runner(): RecordingRunner {
  return new RecordingRunner(async (input: TurnInput): Promise<TurnOutput> => {
    const [word, name = ''] = input.turn.prompt.split(/\s+/);
    if (word === 'pr') {
      await input.emit('tool.call', {
        id: 'call_1',
        name: 'read_file',
        summary: 'read_file(README.md)',
      });
      await input.emit('tool.result', {
        id: 'call_1',
        name: 'read_file',
        ok: true,
        summary: '3 lines',
      });
      await input.emit('files.changed', {
        files: [{ path: 'README.md', change: 'modified' }],
        count: 1,
      });
      await input.emit('commit', { sha: SHA, subject: 'Greet the world' });
      await input.emit('pull_request.opened', {
        forge: 'github',
        number: 7,
        url: PR,
        draft: false,
        notes: [],
      });
      return { summary: 'Greet the world', prLink: PR, prNumber: 7, commitSha: SHA };
    }
    if (word === 'complete') return { summary: 'nothing to do' };
    // The value its schema asked for (the runner plays the agent: the schema is the turn's).
    if (word === 'judge') return { summary: 'judged', output: { value: { verdict: 'yes' } } };
    if (word === 'plan') return { summary: 'Plan: 1. change README.md.' };
    if (word === 'approve') return { summary: 'carried out' };
    if (word === 'spend') {
      await input.emit('model.step', { step: 1, usage: { ...SPENT, costUsd: null } });
      return { summary: 'spent some', usage: SPENT };
    }
    if (word === 'hold') {
      await work(120_000, input.signal);
      return { summary: 'held' };
    }
    if (word === 'gate') {
      await new Promise<void>((resolve) => gates.set(name, resolve));
      return { summary: 'let through' };
    }
    throw new TurnFailedError('the model refused');
  });
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l !== '');
}

describe('errand job', () => {
  let svc: TestService;
  let projectId: string;
  let otherProjectId: string;
  let key: string;
  const runs: Run[] = [];

  before(async () => {
    svc = await startTestService({ runner: runner(), env: SCRIPTED_ENV });
    projectId = (await svc.createProject({ name: 'cli jobs' })).id;
    otherProjectId = (await svc.createProject({ name: 'other' })).id;
    key = (await svc.createProjectKey(projectId)).key;
  });
  after(async () => {
    for (const release of gates.values()) release();
    await svc?.close();
    // No output of any run, error or not, shows the key.
    for (const run of runs) {
      assert.ok(!run.stdout.includes(key) && !run.stderr.includes(key), 'a run printed the key');
      assert.ok(!run.stdout.includes(svc.adminKey) && !run.stderr.includes(svc.adminKey));
    }
  });

  const env = (extra: Record<string, string>): Record<string, string> => ({
    PATH: process.env.PATH ?? '',
    ERRAND_URL: svc.url,
    // The admin key lies here: only the tests of that fallback leave ERRAND_API_KEY out.
    ERRAND_DATA_DIR: svc.database.dataDir,
    ERRAND_API_KEY: key,
    ...extra,
  });

  const start = (
    args: string[],
    extra: Record<string, string> = {},
  ): { child: ChildProcessWithoutNullStreams; done: Promise<Run>; out: () => string } => {
    const child = spawn(process.execPath, [MAIN, ...args], { env: env(extra) });
    const output = captureOutput(child);
    const done = output.done.then((run) => {
      runs.push(run);
      return run;
    });
    return { child, done, out: output.stdout };
  };
  const cli = (args: string[], extra: Record<string, string> = {}): Promise<Run> =>
    start(args, extra).done;
  const ok = (run: Run): Run => {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    return run;
  };
  const json = async (args: string[], extra?: Record<string, string>): Promise<Json> =>
    JSON.parse(ok(await cli([...args, '--json'], extra)).stdout) as Json;
  /** A wrong command line: exit 2, nothing on stdout, the reason then the usage on stderr. */
  const misused = async (args: string[], reason: RegExp, usage: RegExp) => {
    const run = await cli(args);
    assert.equal(run.code, 2, `${args.join(' ')} exited ${run.code}: ${run.stderr}`);
    assert.equal(run.stdout, '', `${args.join(' ')} wrote to stdout`);
    const [first, blank, ...rest] = run.stderr.split('\n');
    assert.match(first ?? '', /^errand job: /, args.join(' '));
    assert.match(first ?? '', reason, args.join(' '));
    assert.equal(blank, '');
    assert.match(rest.join('\n'), usage, args.join(' '));
    assert.doesNotMatch(run.stderr, /ERR_PARSE_ARGS|To specify a positional/);
    return run;
  };

  test('create --wait follows the log, one line per event, and ends with the pull request', async () => {
    const run = ok(await cli(['job', 'create', '--project', projectId, 'pr greet', '--wait']));
    const out = lines(run.stdout);
    const jobId = /^created job (job_\w+) \(model \S+; branch errand\/job_\w+\)$/.exec(
      out[0] ?? '',
    )?.[1];
    assert.ok(jobId, run.stdout);
    const events = out.slice(1, -1);
    for (const line of events) assert.match(line, LINE);
    const types = events.map((l) => l.split('  ')[1]);
    assert.deepEqual(types, [
      'job.created',
      'turn.started',
      'tool.call',
      'tool.result',
      'files.changed',
      'commit',
      'pull_request.opened',
      'turn.finished',
      'job.completed',
    ]);
    assert.ok(events[0]?.endsWith('  job.created  active, turn 1 queued'), events[0]);
    assert.ok(events[2]?.endsWith('  tool.call  read_file(README.md)'), events[2]);
    assert.ok(events[3]?.endsWith('  tool.result  3 lines'), events[3]);
    assert.ok(events[4]?.endsWith('  files.changed  1 file: README.md'), events[4]);
    assert.ok(events[5]?.endsWith(`  commit  ${SHA.slice(0, 12)} Greet the world`), events[5]);
    assert.ok(events[6]?.endsWith(`  pull_request.opened  ${PR}`), events[6]);
    assert.ok(events[8]?.endsWith(`  job.completed  completed: ${PR}`), events[8]);
    assert.equal(out.at(-1), `completed: ${PR}`);
    assert.ok(!run.stdout.includes(ESCAPE), 'escape codes in output that is not a terminal');
    const stored = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
    assert.equal(stored.json.status, 'completed');
    assert.equal(stored.json.prLink, PR);
  });

  test('a completed job without a pull request says nothing changed', async () => {
    const run = ok(await cli(['job', 'create', '--project', projectId, 'complete', '--wait']));
    assert.equal(lines(run.stdout).at(-1), 'completed; no pull request: nothing changed');
  });

  test('create --wait --json prints one JSON document, the final record; events --follow --json the log', async () => {
    const run = ok(
      await cli(['job', 'create', '--project', projectId, 'pr json', '--wait', '--json']),
    );
    // Exactly one document, as every other --json: the job as it ended.
    const job = JSON.parse(run.stdout) as Json;
    assert.equal(job.status, 'completed');
    assert.equal(job.prLink, PR);
    const stored = await svc.request('GET', `/v2/agent/${projectId}/job/${job.id}`);
    assert.deepEqual(job, stored.json);
    // The event lines as JSON are `events --follow --json`: one event per line, each once.
    const followed = ok(
      await cli(['job', 'events', String(job.id), '--project', projectId, '--follow', '--json']),
    );
    const events = lines(followed.stdout).map((l) => JSON.parse(l) as Json);
    assert.equal(events[0]?.type, 'job.created');
    const seqs = events.map((e) => e.seq as number);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
    );
    assert.equal(new Set(seqs).size, seqs.length, 'an event was printed twice');
    const last = events.at(-1) ?? {};
    assert.equal(last.type, 'job.completed');
    const final = (last.data as { job: Json }).job;
    assert.equal(final.status, 'completed');
    assert.equal(final.prLink, PR);
    // The whole log, as the API has it.
    const listed = await svc.request('GET', `/v2/agent/${projectId}/job/${job.id}/events`);
    assert.deepEqual(events, JSON.parse(JSON.stringify(listed.json.events)));
  });

  test('--wait ends with what the job used, and job get shows it', async () => {
    const run = ok(await cli(['job', 'create', '--project', projectId, 'spend tokens', '--wait']));
    const out = lines(run.stdout);
    const jobId = /^created job (job_\w+)/.exec(out[0] ?? '')?.[1] ?? '';
    assert.ok(
      out.some((l) => l.endsWith('  model.step  step 1 (150000 in, 7500 out, 100000 cached)')),
    );
    // 50,000 uncached input tokens at $3/M, 100,000 cached at $0.30/M, 7,500 output at $15/M.
    assert.equal(out.at(-2), 'completed; no pull request: nothing changed');
    assert.equal(out.at(-1), 'used 150,000 tokens in (100,000 cached), 7,500 out; $0.2925');
    const text = ok(await cli(['job', 'get', jobId, '--project', projectId])).stdout;
    assert.match(
      text,
      /\n {2}usage: {4}150,000 tokens in \(100,000 cached\), 7,500 out; \$0\.2925\n/,
    );
    const record = await json(['job', 'get', jobId, '--project', projectId]);
    assert.deepEqual(record.usage, { ...SPENT, costUsd: 0.2925 });
  });

  test("job get shows the pull request's line once Errand looked at it", async () => {
    const created = await json(['job', 'create', '--project', projectId, 'pr watched']);
    const jobId = String(created.id);
    await untilStatus(svc, projectId, jobId, 'completed');
    const before = ok(await cli(['job', 'get', jobId, '--project', projectId])).stdout;
    assert.doesNotMatch(before, /\n {2}pr: /, 'a pr line before Errand looked');
    // What the pull request watch writes when it looks (src/features/pr-watch/).
    await svc.service.ctx.db
      .updateTable('jobs')
      .set({
        pr: JSON.stringify({
          number: 7,
          url: PR,
          state: 'open',
          mergedAt: null,
          headSha: SHA,
          mergeable: true,
          approved: false,
          checks: [
            { name: 'lint', state: 'success', url: null },
            { name: 'test', state: 'failure', url: 'https://ci.example/runs/9' },
          ],
          watch: { state: 'paused', reason: 'the checks still fail after 2 fixes', autofixes: 2 },
          observedAt: new Date().toISOString(),
        }),
      })
      .where('id', '=', jobId)
      .execute();
    const text = ok(await cli(['job', 'get', jobId, '--project', projectId])).stdout;
    assert.match(
      text,
      /\n {2}pr: {7}open; checks: 1 passed, 1 failed, 0 pending; watch: paused \(the checks still fail after 2 fixes; 2 fixes tried in a row\)\n/,
    );
    const record = await json(['job', 'get', jobId, '--project', projectId]);
    assert.equal((record.pr as Json).state, 'open');
  });

  test('a failing job: --wait exits 1 with its error', async () => {
    const run = await cli(['job', 'create', '--project', projectId, 'fail now', '--wait']);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stderr, '');
    const out = lines(run.stdout);
    assert.ok(out.some((l) => l.endsWith('  turn.failed  the model refused')));
    assert.equal(out.at(-1), 'failed: the model refused');
  });

  test('watch follows a running job; archiving it ends the watch with exit 3', async () => {
    const created = await json(['job', 'create', '--project', projectId, 'hold on']);
    const jobId = String(created.id);
    assert.equal(created.status, 'active');
    const watch = start(['job', 'watch', jobId, '--project', projectId]);
    await waitFor('the watch to show the turn running', async () =>
      watch.out().includes('  turn.started') ? true : undefined,
    );
    const archived = ok(await cli(['job', 'archive', jobId, '--project', projectId]));
    assert.equal(archived.stdout, `archived job ${jobId}\n`);
    const run = await watch.done;
    assert.equal(run.code, 3, run.stderr);
    const out = lines(run.stdout);
    assert.ok(
      out.some((l) => l.endsWith('  job.archived  archived')),
      run.stdout,
    );
    assert.equal(out.at(-1), 'archived');
    // Watching a job that is already archived ends at once, with the same code.
    const again = await cli(['job', 'watch', jobId, '--project', projectId]);
    assert.equal(again.code, 3);
    assert.equal(lines(again.stdout).at(-1), 'archived');
    // With --json, the one document is the final record.
    const asJson = await cli(['job', 'watch', jobId, '--project', projectId, '--json']);
    assert.equal(asJson.code, 3, asJson.stderr);
    assert.equal((JSON.parse(asJson.stdout) as Json).status, 'archived');
  });

  test('message --wait shows only the new turn and ends with the result', async () => {
    const first = ok(await cli(['job', 'create', '--project', projectId, 'pr first', '--wait']));
    const jobId = /created job (job_\w+)/.exec(first.stdout)?.[1] ?? '';
    const run = ok(
      await cli(['job', 'message', jobId, 'complete the rest', '--project', projectId, '--wait']),
    );
    const out = lines(run.stdout);
    assert.match(
      out[0] ?? '',
      new RegExp(`^sent a follow-up to job ${jobId} \\(model \\S+; branch errand/${jobId}\\)$`),
    );
    const types = out.slice(1, -1).map((l) => l.split('  ')[1]);
    assert.deepEqual(types, ['job.reactivated', 'turn.started', 'turn.finished', 'job.completed']);
    // The pull request of the first turn is still the job's.
    assert.equal(out.at(-1), `completed: ${PR}`);
    const sent = await json(['job', 'message', jobId, 'fail this time', '--project', projectId]);
    assert.equal(sent.id, jobId);
    assert.equal(sent.turns, 3);
    const failed = await untilStatus(svc, projectId, jobId, 'failed');
    assert.equal(failed.error, 'the model refused');
    // message --wait --json: one JSON document, the record once the new turn settled.
    const waited = JSON.parse(
      ok(
        await cli([
          'job',
          'message',
          jobId,
          'complete after all',
          '--project',
          projectId,
          '--wait',
          '--json',
        ]),
      ).stdout,
    ) as Json;
    assert.equal(waited.status, 'completed');
    assert.equal(waited.turns, 4);
    assert.equal(waited.prLink, PR);
  });

  test('get, list, events and archive, as text and as JSON', async () => {
    // Older jobs of its own, so that this test reads the same alone as after the others.
    const failing = await json(['job', 'create', '--project', projectId, 'fail listed']);
    await untilStatus(svc, projectId, String(failing.id), 'failed');
    const created = await json(['job', 'create', '--project', projectId, 'pr listed']);
    const jobId = String(created.id);
    await untilStatus(svc, projectId, jobId, 'completed');
    const api = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
    assert.deepEqual(await json(['job', 'get', jobId, '--project', projectId]), api);
    const text = ok(await cli(['job', 'get', jobId, '--project', projectId])).stdout;
    assert.match(text, new RegExp(`^${jobId} \\(project ${projectId}\\)\\n`));
    assert.match(text, new RegExp(`\\n {2}status: {3}completed: ${PR}\\n`));
    assert.match(text, new RegExp(`\\n {2}branch: {3}errand/${jobId}\\n`));

    const listed = (await json(['job', 'list', '--project', projectId, '--limit', '2'])) as unknown;
    assert.ok(Array.isArray(listed));
    assert.equal(listed.length, 2);
    assert.deepEqual(
      listed.map((j: Json) => j.id),
      [jobId, failing.id],
      'newest first',
    );
    const all = (await json(['job', 'list', '--project', projectId, '--limit', '500'])) as unknown;
    const everyJob = (await svc.request('GET', `/v2/agent/${projectId}/jobs?limit=100`)).json.jobs;
    assert.deepEqual(all, JSON.parse(JSON.stringify(everyJob)), 'every job, newest first');
    const failed = (await json([
      'job',
      'list',
      '--project',
      projectId,
      '--status',
      'failed',
    ])) as unknown as Json[];
    assert.ok(failed.some((j) => j.id === failing.id));
    assert.ok(failed.every((j) => j.status === 'failed'));
    const lineText = ok(await cli(['job', 'list', '--project', projectId, '--limit', '1'])).stdout;
    assert.match(lineText, new RegExp(`^${jobId} {2}completed {2}\\S+Z {2}${PR}\\n$`));
    assert.equal(
      ok(
        await cli(['job', 'list', '--project', otherProjectId, '--json'], {
          ERRAND_API_KEY: svc.adminKey,
        }),
      ).stdout,
      '[]\n',
    );
    assert.equal(
      ok(await cli(['job', 'list', '--project', otherProjectId], { ERRAND_API_KEY: svc.adminKey }))
        .stdout,
      'no jobs\n',
    );

    const log =
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
    const ndjson = ok(await cli(['job', 'events', jobId, '--project', projectId, '--json']));
    assert.deepEqual(
      lines(ndjson.stdout).map((l) => JSON.parse(l) as Json),
      JSON.parse(JSON.stringify(log)),
    );
    const third = log[2]?.seq as number;
    const later = ok(
      await cli(['job', 'events', jobId, '--project', projectId, '--after', String(third)]),
    );
    const laterLines = lines(later.stdout);
    assert.equal(laterLines.length, log.length - 3);
    for (const line of laterLines) assert.match(line, LINE);
    // --follow on a settled job reads what is there and ends.
    const followed = ok(await cli(['job', 'events', jobId, '--project', projectId, '--follow']));
    assert.equal(lines(followed.stdout).length, log.length);
    assert.match(lines(followed.stdout).at(-1) ?? '', / {2}job\.completed {2}completed: /);

    const archived = await json(['job', 'archive', jobId, '--project', projectId]);
    assert.equal(archived.status, 'archived');
    assert.equal(
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json.status,
      'archived',
    );
  });

  test('ERRAND_PROJECT names the project; --project wins over it; no project is a usage error', async () => {
    const created = await json(['job', 'create', 'complete via env'], {
      ERRAND_PROJECT: projectId,
    });
    assert.equal(created.projectId, projectId);
    const got = await json(['job', 'get', String(created.id)], { ERRAND_PROJECT: projectId });
    assert.equal(got.id, created.id);
    // The project key is not valid for the other project: --project was used.
    const other = await cli(['job', 'list', '--project', otherProjectId], {
      ERRAND_PROJECT: projectId,
    });
    assert.equal(other.code, 1);
    assert.match(other.stderr, /\(forbidden, request \S+\)/);
    await misused(
      ['job', 'list'],
      /no project: give --project ID or set ERRAND_PROJECT/,
      /Usage: errand job list/,
    );
  });

  test('the key: ERRAND_API_KEY, else the data directory admin.key; never in the output', async () => {
    // Without ERRAND_API_KEY the data directory's admin key is used.
    const viaFile = ok(
      await cli(['job', 'list', '--project', otherProjectId], { ERRAND_API_KEY: '' }),
    );
    assert.equal(viaFile.stdout, 'no jobs\n');
    const adminKey = (await readFile(`${svc.database.dataDir}/admin.key`, 'utf8')).trim();
    assert.equal(adminKey, svc.adminKey);
    const nowhere = await cli(['job', 'list', '--project', projectId], {
      ERRAND_API_KEY: '',
      ERRAND_DATA_DIR: `${svc.database.dataDir}/nowhere`,
    });
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.stderr, /no API key: set ERRAND_API_KEY/);
    const wrong = await cli(['job', 'list', '--project', projectId], {
      ERRAND_API_KEY: `${key.slice(0, -1)}${key.endsWith('a') ? 'b' : 'a'}`,
    });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /\(unauthorized, request \S+\)/);
  });

  test('API and network errors exit 1 with one line on stderr', async () => {
    const missing = await cli(['job', 'get', 'job_00000000000000000000', '--project', projectId]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stdout, '');
    assert.match(
      missing.stderr,
      /^errand: getJob: 404 .*not found.* \(not_found, request \S+\)\n$/,
    );
    const down = await cli(['job', 'get', 'job_00000000000000000000', '--project', projectId], {
      ERRAND_URL: 'http://127.0.0.1:9',
    });
    assert.equal(down.code, 1);
    assert.match(
      down.stderr,
      /^errand: getJob: cannot reach http:\/\/127\.0\.0\.1:9 .*'errand serve'/,
    );
    assert.doesNotMatch(down.stderr, /\n\s+at /);
  });

  test('usage errors exit 2 with the reason and the subcommand usage', async () => {
    await misused(
      ['job', 'create', '--project', projectId],
      /missing PROMPT/,
      /^Usage: errand job create "PROMPT"/,
    );
    await misused(
      ['job', 'create', '--project', projectId, '   '],
      /the prompt is empty/,
      /errand job create/,
    );
    await misused(
      ['job', 'create', '--project', projectId, 'fix', 'it'],
      /unexpected argument "it" \(quote the prompt/,
      /errand job create/,
    );
    await misused(
      ['job', 'get', '--project', projectId],
      /missing ID$/,
      /^Usage: errand job get ID/,
    );
    await misused(
      ['job', 'message', 'job_x', '--project', projectId],
      /missing PROMPT/,
      /errand job message ID "PROMPT"/,
    );
    await misused(
      ['job', 'get', 'job_x', '--wait'],
      /unknown option --wait/,
      /^Usage: errand job get ID/,
    );
    await misused(['job', 'list', '--bogus'], /unknown option --bogus/, /errand job list/);
    await misused(['job', 'list', '--limit'], /--limit needs a value/, /errand job list/);
    await misused(['job', 'list', '--json=yes'], /--json takes no value/, /errand job list/);
    await misused(
      ['job', 'list', '--limit', '0'],
      /--limit must be a whole number, 1 or more/,
      /errand job list/,
    );
    await misused(
      ['job', 'list', '--status', 'done'],
      /--status must be one of active, completed, failed, archived/,
      /errand job list/,
    );
    await misused(
      ['job', 'events', 'job_x', '--after', '-1'],
      /--after needs a value/,
      /errand job events/,
    );
    await misused(
      ['job', 'events', 'job_x', '--after', 'x'],
      /--after must be a whole number$/,
      /errand job events/,
    );
    await misused(
      ['job', 'frobnicate'],
      /unknown subcommand: job frobnicate/,
      /^Usage: errand job <subcommand>/,
    );
    await misused(['job'], /missing the subcommand/, /^Usage: errand job <subcommand>/);
  });

  test('create --mode plan --wait prints the plan; job approve carries it out; a bad mode is a usage error', async () => {
    const run = ok(
      await cli(['job', 'create', '--project', projectId, 'plan it', '--mode', 'plan', '--wait']),
    );
    const jobId = /created job (job_\w+)/.exec(run.stdout)?.[1] ?? '';
    assert.ok(run.stdout.includes('Plan: 1. change README.md.'), run.stdout);
    assert.ok(run.stdout.includes(`approve it: errand job approve ${jobId}`), run.stdout);
    const planned = await json(['job', 'get', jobId, '--project', projectId]);
    assert.equal(planned.mode, 'plan');
    assert.equal(planned.awaitingApproval, true);
    assert.equal(planned.summary, 'Plan: 1. change README.md.');
    const shown = ok(await cli(['job', 'get', jobId, '--project', projectId])).stdout;
    assert.match(shown, /mode: {5}plan/);
    assert.match(shown, /awaiting approval: errand job approve/);

    const approved = ok(await cli(['job', 'approve', jobId, '--project', projectId, '--wait']));
    assert.match(approved.stdout, new RegExp(`^approved the plan of job ${jobId} `));
    const done = await json(['job', 'get', jobId, '--project', projectId]);
    assert.equal(done.awaitingApproval, false);
    assert.equal(done.mode, 'code');
    assert.equal(done.turns, 2);
    assert.equal(done.summary, 'carried out');

    const asked = await json([
      'job',
      'message',
      jobId,
      'complete, just answer',
      '--mode',
      'ask',
      '--project',
      projectId,
    ]);
    assert.equal(asked.mode, 'ask');
    await misused(
      ['job', 'create', '--project', projectId, 'x', '--mode', 'yolo'],
      /--mode/,
      /^Usage: errand job create/,
    );
  });

  test('--output-schema takes a file or inline JSON on create and message; the output is printed; a bad one is a usage error', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'errand-cli-schema-'));
    try {
      const schema = {
        type: 'object',
        properties: { verdict: { enum: ['yes', 'no'] } },
        required: ['verdict'],
      };
      const file = path.join(dir, 'schema.json');
      await writeFile(file, JSON.stringify(schema));
      const run = ok(
        await cli([
          'job',
          'create',
          '--project',
          projectId,
          'judge',
          '--output-schema',
          file,
          '--wait',
        ]),
      );
      const jobId = /created job (job_\w+)/.exec(run.stdout)?.[1] ?? '';
      assert.ok(run.stdout.endsWith('\n\n{\n  "verdict": "yes"\n}\n'), run.stdout);
      const shown = ok(await cli(['job', 'get', jobId, '--project', projectId])).stdout;
      assert.match(shown, /\noutput:\n\{\n {2}"verdict": "yes"\n\}/);
      const inline = { type: 'object', required: ['n'] };
      const sent = await json([
        'job',
        'message',
        jobId,
        'judge again',
        '--output-schema',
        JSON.stringify(inline),
        '--project',
        projectId,
      ]);
      assert.equal(sent.turns, 2);
      const turns = await svc.service.ctx.db
        .selectFrom('turns')
        .select(['seq', 'output_schema'])
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        turns.map((t) => t.output_schema),
        [schema, inline],
      );
      const createWith = (schemaArg: string) => [
        'job',
        'create',
        '--project',
        projectId,
        'x',
        '--output-schema',
        schemaArg,
      ];
      await misused(
        createWith(path.join(dir, 'none.json')),
        /--output-schema: cannot read .*none\.json/,
        /^Usage: errand job create/,
      );
      await misused(
        ['job', 'message', jobId, 'x', '--project', projectId, '--output-schema', '{not json'],
        /--output-schema: the value is not JSON/,
        /^Usage: errand job message/,
      );
      // The service's own refusal, as any API error: one line with its code.
      const refused = await cli(createWith('{"type":"nope"}'));
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, /"outputSchema" is not a valid JSON Schema 2020-12/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('--attempts, --agent and --check-command make a best-of-N create; a bad agent is a usage error', async () => {
    const created = await json([
      'job',
      'create',
      '--project',
      projectId,
      'complete in two tries',
      '--attempts',
      '3',
      '--agent',
      'claude-code:',
      '--agent',
      ':anthropic:claude-opus-4-1',
      '--check-command',
      'npm test',
    ]);
    const id = String(created.id);
    const job = await svc.service.ctx.db
      .selectFrom('jobs')
      .select('check_command')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.equal(job.check_command, 'npm test');
    const turn = await svc.service.ctx.db
      .selectFrom('turns')
      .select('best_of')
      .where('job_id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(turn.best_of, {
      count: 3,
      agents: [{ engine: 'claude-code' }, { model: 'anthropic:claude-opus-4-1' }],
    });
    await untilStatus(svc, projectId, id, 'completed');
    // job get lists the attempts the turn wrote, the winner marked.
    const attempts: AttemptResult[] = [
      {
        n: 1,
        engine: 'claude-code',
        model: 'anthropic:claude-sonnet-4-5',
        branch: `errand/${id}-1`,
        outcome: 'failed',
        check: { exitCode: 1, outputTail: 'not ok\n', durationMs: 800 },
        costUsd: 0.0123,
        diff: { files: 2, lines: 14 },
        commitSha: 'a'.repeat(40),
        error: null,
        winner: false,
      },
      {
        n: 2,
        engine: 'errand',
        model: 'anthropic:claude-opus-4-1',
        branch: `errand/${id}-2`,
        outcome: 'passed',
        check: { exitCode: 0, outputTail: 'ok\n', durationMs: 700 },
        costUsd: 0.5,
        diff: { files: 1, lines: 3 },
        commitSha: 'b'.repeat(40),
        error: null,
        winner: true,
      },
    ];
    await svc.service.ctx.db
      .updateTable('jobs')
      .set({ attempts: JSON.stringify(attempts) })
      .where('id', '=', id)
      .execute();
    const shown = ok(await cli(['job', 'get', id, '--project', projectId])).stdout;
    assert.ok(
      shown.includes(
        `\n  attempt 1: claude-code anthropic:claude-sonnet-4-5; failed (exit 1); $0.0123; 2 files, 14 lines; errand/${id}-1\n  attempt 2: errand anthropic:claude-opus-4-1; passed (exit 0); $0.5000; 1 file, 3 lines; errand/${id}-2  <- winner\n`,
      ),
      shown,
    );

    // Agents without a count make one attempt each.
    const each = await json([
      'job',
      'create',
      '--project',
      projectId,
      'complete',
      '--agent',
      'errand:anthropic:claude-opus-4-1',
      '--agent',
      'claude-code',
    ]);
    const eachTurn = await svc.service.ctx.db
      .selectFrom('turns')
      .select('best_of')
      .where('job_id', '=', String(each.id))
      .executeTakeFirstOrThrow();
    assert.deepEqual(eachTurn.best_of, {
      count: 2,
      agents: [{ engine: 'errand', model: 'anthropic:claude-opus-4-1' }, { engine: 'claude-code' }],
    });
    await untilStatus(svc, projectId, String(each.id), 'completed');

    await misused(
      ['job', 'create', '--project', projectId, 'x', '--attempts', '2', '--agent', 'openai:gpt-5'],
      /--agent must be ENGINE:MODEL.*'openai:gpt-5'/,
      /^Usage: errand job create/,
    );
    await misused(
      ['job', 'create', '--project', projectId, 'x', '--attempts', 'none'],
      /--attempts must be a whole number/,
      /^Usage: errand job create/,
    );
    // The range and the agents' fit are the service's: one line with its words, nothing made.
    const jobs = async () =>
      (
        await svc.service.ctx.db
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n;
    const before = await jobs();
    const five = await cli(['job', 'create', '--project', projectId, 'x', '--attempts', '5']);
    assert.equal(five.code, 1, five.stderr);
    assert.match(five.stderr, /"count" must be a whole number from 1 to 4/);
    const asked = await cli([
      'job',
      'create',
      '--project',
      projectId,
      'x',
      '--attempts',
      '2',
      '--mode',
      'ask',
    ]);
    assert.equal(asked.code, 1, asked.stderr);
    assert.match(asked.stderr, /"attempts" needs mode "code"/);
    assert.equal(await jobs(), before);
  });

  test('--image: files go inline and URLs to the service, on create and message; more than 5 is a usage error', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'errand-cli-images-'));
    try {
      const png = Buffer.from(
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
        'base64',
      );
      const file = path.join(dir, 'shot.png');
      await writeFile(file, png);
      const created = await json([
        'job',
        'create',
        '--project',
        projectId,
        'complete see it',
        '--image',
        file,
        '--image',
        file,
      ]);
      const jobId = String(created.id);
      await untilStatus(svc, projectId, jobId, 'completed');
      await json([
        'job',
        'message',
        jobId,
        'complete and again',
        '--image',
        file,
        '--project',
        projectId,
      ]);
      const kept = await svc.service.ctx.db
        .selectFrom('attachments')
        .select(['seq', 'n', 'data'])
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .orderBy('n')
        .execute();
      assert.deepEqual(
        kept.map((a) => [a.seq, a.n, a.data.equals(png)]),
        [
          [1, 1, true],
          [1, 2, true],
          [2, 1, true],
        ],
      );
      const createWith = (image: string) =>
        cli(['job', 'create', '--project', projectId, 'x', '--image', image]);
      // A URL is the service's to fetch: this one, loopback, it refuses.
      const refused = await createWith('http://127.0.0.1:9/x.png');
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /attachments\[0\]\.url.*must use https:\/\//);
      const missing = await createWith(path.join(dir, 'nope.png'));
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /--image .*nope\.png: cannot be read \(ENOENT\)/);
      await misused(
        ['job', 'create', '--project', projectId, 'x', ...Array(6).fill(['--image', file]).flat()],
        /--image: 6 images; a turn may carry at most 5/,
        /^Usage: errand job create/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('--version, help COMMAND and COMMAND --help', async () => {
    const { version } = JSON.parse(await readFile(PACKAGE, 'utf8')) as { version: string };
    assert.equal(ok(await cli(['--version'])).stdout, `${version}\n`);
    const job = ok(await cli(['help', 'job'])).stdout;
    for (const sub of ['create', 'message', 'approve', 'get', 'list', 'watch', 'events', 'archive'])
      assert.match(job, new RegExp(`\\n {2}job ${sub} `));
    assert.match(job, /Exit codes: 0 .* 1 .*\n2 a usage error, 3 the job was archived/);
    const create = ok(await cli(['help', 'job', 'create'])).stdout;
    assert.match(create, /^Usage: errand job create "PROMPT" \[--project ID\]/);
    assert.equal(ok(await cli(['job', 'create', '--help'])).stdout, create);
    assert.equal(
      ok(await cli(['job', 'watch', '-h'])).stdout,
      ok(await cli(['help', 'job', 'watch'])).stdout,
    );
    for (const command of ['serve', 'worker', 'migrate', 'project', 'key', 'webhook']) {
      const usage = ok(await cli(['help', command])).stdout;
      assert.match(usage, new RegExp(`^Usage: errand ${command} `));
      assert.equal(ok(await cli([command, '--help'])).stdout, usage, `${command} --help`);
    }
    const overview = ok(await cli(['help'])).stdout;
    assert.match(overview, /^Usage: errand <command> \[options\]/);
    assert.match(overview, /\n {2}job create "PROMPT"/);
    const unknown = await cli(['help', 'frobnicate']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /^errand: unknown command: frobnicate\n\nUsage: errand <command>/);
    // The existing commands: an unknown option prints that command's usage, not Node's text.
    const serve = await cli(['serve', '--prot', '8080']);
    assert.equal(serve.code, 2);
    assert.equal(serve.stdout, '');
    assert.match(
      serve.stderr,
      /^errand serve: unknown option --prot\b.*\n\nUsage: errand serve \[--host H\]/,
    );
    const key = await cli(['key', 'revoke']);
    assert.equal(key.code, 2);
    assert.match(key.stderr, /^errand key: missing ID\n\nUsage: errand key <subcommand>/);
  });

  test('on a terminal a spinner runs while the job works; the result ends the output', {
    skip: spawnSync('script', ['--version']).status === 0 ? false : 'script(1) is not installed',
  }, async () => {
    const created = await json(['job', 'create', '--project', projectId, 'gate tty']);
    const jobId = String(created.id);
    // script(1) gives the command a pseudo-terminal; the key stays in the environment.
    const child = spawn(
      'script',
      [
        '-qfec',
        `'${process.execPath}' '${MAIN}' job watch ${jobId} --project ${projectId}`,
        '/dev/null',
      ],
      { env: env({}) },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    await waitFor('the spinner', async () => (/working… \ds/.test(out) ? true : undefined));
    await waitFor('the turn to wait at its gate', async () => gates.get('tty'));
    gates.get('tty')?.();
    gates.delete('tty');
    assert.equal(await exit, 0);
    runs.push({ code: 0, stdout: out, stderr: '' });
    assert.match(out, /[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] working… \ds/);
    assert.ok(out.includes(CLEAR_LINE), 'the spinner line is never cleared');
    // The event lines and the result are whole lines, the spinner cleared before each.
    const visible = out
      .split(CLEAR_LINE)
      .map((part) => part.replace(/^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] working… \d+s/, ''))
      .join('')
      .replace(/\r/g, '');
    assert.match(
      visible,
      / {2}job\.completed {2}completed; no pull request: nothing changed\ncompleted; no pull request: nothing changed\n$/,
    );
  });
});
