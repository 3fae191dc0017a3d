// Workers as real processes on PostgreSQL: a worker killed with SIGKILL mid-turn has its turn
// picked up by another within 30 s, and an archive reaches a turn running in another process.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const WORKER = new URL('../support/worker-process.ts', import.meta.url).pathname;

describe('worker processes', () => {
  let svc: TestService;
  let markers: string;
  let projectId: string;
  const workers: ChildProcess[] = [];

  const spawnWorker = async (): Promise<ChildProcess> => {
    const child = spawn(process.execPath, [WORKER], {
      env: {
        ...process.env,
        ...svc.env,
        ERRAND_TEST_MARKERS: markers,
        ERRAND_TEST_TURN_MS: '4000',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    workers.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('worker ready')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`worker exited early with ${code}`)));
    });
    return child;
  };

  const marker = (prefix: string, jobId: string) =>
    waitFor(`a ${prefix} marker for ${jobId}`, async () => {
      const found = (await readdir(markers)).find((f) => f.startsWith(prefix) && f.includes(jobId));
      return found ? Number(found.split('-')[1]) : undefined;
    });

  before(async () => {
    markers = await mkdtemp(path.join(os.tmpdir(), 'errand-markers-'));
    svc = await startTestService({
      worker: false,
      env: { ERRAND_TURN_RETRY_DELAY_SECONDS: '0' },
    });
    projectId = (await svc.createProject()).id;
    await Promise.all([spawnWorker(), spawnWorker()]);
  });

  after(async () => {
    for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
    await svc?.close();
    await rm(markers, { recursive: true, force: true });
  });

  test('a worker killed mid-turn: another worker completes the turn within 30 s', async () => {
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'sleep:60000' },
    });
    assert.equal(created.status, 201);
    const jobId = created.json.id as string;
    const victim = await marker('started', jobId);
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    const job = await waitFor(
      'the job to complete',
      async () => {
        const res = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
        return res.json.status === 'completed' ? res.json : undefined;
      },
      30_000,
    );
    assert.ok(Date.now() - killedAt < 30_000);
    assert.equal(job.error, null);
    const turn = await svc.service.ctx.db
      .selectFrom('turns')
      .selectAll()
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.equal(turn.state, 'done');
    const survivor = workers.find((w) => w.pid !== victim)?.pid;
    assert.equal(turn.summary, `done by ${survivor}`);
    assert.equal(turn.attempts, 2);
  });

  test('archiving a job aborts its turn running in another process within 5 s', async () => {
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'sleep:60000' },
    });
    const jobId = created.json.id as string;
    await marker('started', jobId);
    const archivedAt = Date.now();
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
    assert.equal(res.status, 200);
    await marker('aborted', jobId);
    const abortedAfter = Date.now() - archivedAt;
    assert.ok(abortedAfter < 5_000, `the turn stopped ${abortedAfter} ms after the archive`);
    const job = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
    assert.equal(job.json.status, 'archived');
  });
});
