// Drills of `errand serve` on its embedded PostgreSQL, as real processes: serve killed with
// SIGKILL in the middle of a burst of creates (every 201 is there after the restart, and no
// server is left running), starts and kills in a loop, and a disk that fills up while jobs are
// created (503s, nothing half written, and creates work again once space is freed).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { embeddedLayout } from '../../src/db/embedded/server.ts';
import { createEmbeddedDataDir, type TestDatabase } from '../support/databases.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import { killStrays, type ServeProcess, startServe } from '../support/process.ts';
import { http, waitFor } from '../support/service.ts';

const run = promisify(execFile);

/** Every process whose command line runs a PostgreSQL server on `cluster`. */
async function serversOn(cluster: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const args = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0');
    const flag = args.indexOf('-D');
    if (flag >= 0 && args[flag + 1] === cluster) pids.push(Number(entry));
  }
  return pids;
}

/** No server runs on the cluster any more (a stopping one is given a few seconds). */
async function assertNoServer(cluster: string): Promise<void> {
  await waitFor('the embedded PostgreSQL to stop', async () =>
    (await serversOn(cluster)).length === 0 ? true : undefined,
  );
}

const ENV = {
  ANTHROPIC_API_KEY: 'sk-ant-test-0000000000000000',
  ERRAND_RATE_LIMIT_CREATE: '0',
};

interface Setup {
  serve: ServeProcess;
  key: string;
  projectId: string;
}

async function project(serve: ServeProcess, repository: string): Promise<Setup> {
  const res = await http(serve.url, 'POST', '/v2/admin/projects', {
    key: serve.adminKey,
    body: { name: 'drill', repository },
  });
  assert.equal(res.status, 201, res.text);
  return { serve, key: serve.adminKey, projectId: res.json.id ?? '' };
}

/** Every job of the list is there, with its first turn's prompt and its job.created event. */
async function assertWhole(
  base: string,
  key: string,
  projectId: string,
  jobs: Map<string, string>,
): Promise<void> {
  for (const [id, prompt] of jobs) {
    const job = await http(base, 'GET', `/v2/agent/${projectId}/job/${id}`, { key });
    assert.equal(job.status, 200, `job ${id} accepted with 201 is missing: ${job.text}`);
    const events = await http(base, 'GET', `/v2/agent/${projectId}/job/${id}/events`, { key });
    assert.deepEqual(
      events.json.events?.map((e) => e.type),
      ['job.created'],
      `job ${id} has not exactly its job.created event`,
    );
    assert.equal(job.json.turns, 1);
    assert.ok(prompt.length > 0);
  }
}

/** The ids of every job of the project, page after page. */
async function jobIds(base: string, key: string, projectId: string): Promise<string[]> {
  const ids: string[] = [];
  for (let cursor: string | null | undefined = ''; cursor !== null; ) {
    const page = await http(
      base,
      'GET',
      `/v2/agent/${projectId}/jobs?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { key },
    );
    assert.equal(page.status, 200, page.text);
    ids.push(...(page.json.jobs ?? []).map((j) => j.id));
    cursor = page.json.nextCursor ?? null;
  }
  return ids;
}

describe('serve on its embedded PostgreSQL, killed and starved', () => {
  const databases: TestDatabase[] = [];
  afterEach(() => killStrays());
  after(async () => {
    killStrays();
    for (const db of databases) await db.drop();
  });

  test('SIGKILL during a burst of creates: every 201 is there after the restart, and no server is left', async () => {
    const db = await createEmbeddedDataDir();
    databases.push(db);
    const cluster = embeddedLayout(db.dataDir).cluster;
    const first = await startServe(db.dataDir, ['--no-worker'], ENV);
    const { key, projectId } = await project(first, db.dataDir);
    const accepted = new Map<string, string>();
    let killed = false;
    const client = async (n: number) => {
      for (let i = 0; !killed; i++) {
        const prompt = `burst ${n}.${i}`;
        const res = await http(first.url, 'POST', `/v2/agent/${projectId}/job`, {
          key,
          body: { prompt },
        }).catch(() => undefined);
        if (!res) return;
        if (res.status === 201) accepted.set(res.json.id ?? '', prompt);
        else assert.equal(res.status, 503, res.text);
      }
    };
    const clients = Array.from({ length: 16 }, (_, n) => client(n));
    await waitFor('a few hundred creates', async () => (accepted.size >= 300 ? true : undefined));
    const exit = first.stop('SIGKILL');
    killed = true;
    await exit;
    await Promise.all(clients);
    await assertNoServer(cluster);

    const second = await startServe(db.dataDir, ['--no-worker'], ENV);
    try {
      await assertWhole(second.url, key, projectId, accepted);
    } finally {
      await second.stop();
    }
    await assertNoServer(cluster);
  });

  test('serve and its PostgreSQL killed together, their pids taken by other processes: it starts again at once and keeps every 201', async () => {
    const db = await createEmbeddedDataDir();
    databases.push(db);
    const layout = embeddedLayout(db.dataDir);
    const first = await startServe(db.dataDir, ['--no-worker'], ENV);
    const { key, projectId } = await project(first, db.dataDir);
    const accepted = new Map<string, string>();
    let killed = false;
    const client = async (n: number) => {
      for (let i = 0; !killed; i++) {
        const prompt = `crash ${n}.${i}`;
        const res = await http(first.url, 'POST', `/v2/agent/${projectId}/job`, {
          key,
          body: { prompt },
        }).catch(() => undefined);
        if (!res) return;
        if (res.status === 201) accepted.set(res.json.id ?? '', prompt);
        else assert.equal(res.status, 503, res.text);
      }
    };
    const clients = Array.from({ length: 8 }, (_, n) => client(n));
    await waitFor('a hundred creates', async () => (accepted.size >= 100 ? true : undefined));
    // A power cut, or a container's crash: both at the same moment, neither told.
    const pidFile = path.join(layout.cluster, 'postmaster.pid');
    const socketLock = path.join(layout.socketDir, '.s.PGSQL.5432.lock');
    const postmaster = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
    const exit = first.stop('SIGKILL');
    process.kill(postmaster, 'SIGKILL');
    killed = true;
    await exit;
    await Promise.all(clients);
    // After a restart the old pids belong to other processes (in a container they start from
    // 1 again): both lock files now name a live process that is not PostgreSQL.
    const other = spawn('sleep', ['300'], { stdio: 'ignore' });
    try {
      for (const file of [pidFile, socketLock]) {
        const lines = (await readFile(file, 'utf8')).split('\n');
        lines[0] = String(other.pid);
        await writeFile(file, lines.join('\n'));
      }
      const second = await startServe(db.dataDir, ['--no-worker'], ENV);
      try {
        await assertWhole(second.url, key, projectId, accepted);
        assert.equal(other.exitCode, null, 'the unrelated process was touched');
      } finally {
        await second.stop();
      }
    } finally {
      other.kill('SIGKILL');
    }
    await assertNoServer(layout.cluster);
  });

  test('started and stopped in a loop, by SIGKILL and SIGTERM: it recovers every time and keeps every job', async () => {
    const db = await createEmbeddedDataDir();
    databases.push(db);
    const cluster = embeddedLayout(db.dataDir).cluster;
    const jobs = new Map<string, string>();
    let setup: Setup | undefined;
    for (let round = 0; round < 6; round++) {
      const serve = await startServe(db.dataDir, ['--no-worker'], ENV);
      setup = setup ? { ...setup, serve } : await project(serve, db.dataDir);
      const prompt = `round ${round}`;
      const res = await http(serve.url, 'POST', `/v2/agent/${setup.projectId}/job`, {
        key: setup.key,
        body: { prompt },
      });
      assert.equal(res.status, 201, res.text);
      jobs.set(res.json.id ?? '', prompt);
      await assertWhole(serve.url, setup.key, setup.projectId, jobs);
      const code = await serve.stop(round % 2 === 0 ? 'SIGKILL' : 'SIGTERM');
      if (round % 2 === 1) assert.equal(code, 0, serve.stderr());
      await assertNoServer(cluster);
    }
  });

  test('a disk that fills up: creates answer 503, nothing is half written, and they work again once space is freed', {
    skip:
      process.getuid?.() === 0
        ? false
        : 'skipped: the full-disk drill mounts a small tmpfs, which needs root (CI runs as root)',
  }, async () => {
    const root = await makeTempDir('full-disk');
    const disk = path.join(root, 'disk');
    await mkdir(disk);
    await run('mount', ['-t', 'tmpfs', '-o', 'size=160m', 'errand-drill', disk]);
    try {
      const dataDir = path.join(disk, 'data');
      const serve = await startServe(dataDir, ['--no-worker'], ENV);
      const { key, projectId } = await project(serve, dataDir);
      // All but a little of the disk taken: the next writes find it full.
      const space = await statfs(disk);
      const filler = path.join(disk, 'filler');
      await writeFile(filler, Buffer.alloc(Math.max(0, space.bavail * space.bsize - 1_000_000)));
      const accepted = new Map<string, string>();
      const refused: string[] = [];
      for (let i = 0; i < 200 && refused.length < 20; i++) {
        // Random text: PostgreSQL compresses a repetitive prompt to nearly nothing.
        const prompt = randomBytes(40_000).toString('hex');
        const res = await http(serve.url, 'POST', `/v2/agent/${projectId}/job`, {
          key,
          body: { prompt },
        });
        if (res.status === 201) accepted.set(res.json.id ?? '', prompt);
        else {
          assert.equal(res.status, 503, res.text);
          assert.equal(res.json.code, 'unavailable');
          assert.match(res.json.error ?? '', /no disk space|unavailable/);
          assert.equal(res.headers.get('retry-after'), '5');
          refused.push(res.text);
        }
      }
      assert.ok(refused.length > 0, 'the disk never filled up');
      await rm(filler);
      const again = await waitFor('a create to work again', async () => {
        const res = await http(serve.url, 'POST', `/v2/agent/${projectId}/job`, {
          key,
          body: { prompt: 'after the disk was freed' },
        });
        return res.status === 201 ? res : undefined;
      });
      accepted.set(again.json.id ?? '', 'after the disk was freed');
      await assertWhole(serve.url, key, projectId, accepted);
      // Only what was answered 201 exists: the refused creates left no job behind.
      assert.deepEqual(new Set(await jobIds(serve.url, key, projectId)), new Set(accepted.keys()));
      assert.equal(await serve.stop(), 0, serve.stderr());
    } finally {
      killStrays();
      await assertNoServer(embeddedLayout(path.join(disk, 'data')).cluster).catch(() => {});
      await run('umount', ['-l', disk]).catch(() => {});
      await removeDir(root);
    }
  });
});
