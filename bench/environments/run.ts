// Environment snapshots (issue 30): how long a restore of a 30,000-file, 300 MB setup result
// takes against `cp -a` of it and against running a setup that writes it, and the time from a
// follow-up's 200 to its first model call with a 60 s setup on a warm environment. The first
// part uses the snapshot cache directly on a real git checkout; the second a real service,
// database, sandbox and the scripted model of the tests. Prints a markdown table.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SnapshotCache } from '../../src/environments/cache.ts';
import { copyTree } from '../../src/environments/tree.ts';
import type { SandboxLimits } from '../../src/projects/limits.ts';
import { runSandboxed } from '../../src/sandbox/sandbox.ts';
import { discardsSettled } from '../../src/workspace/discard.ts';
import { listUntracked, moveUntrackedAside } from '../../src/workspace/untracked.ts';
import { reply, startFakeLlm } from '../../test/support/fake-llm.ts';
import { git, makeOrigin, testConfig } from '../../test/support/git.ts';
import { createJob, untilStatus } from '../../test/support/jobs.ts';
import { startTestService } from '../../test/support/service.ts';

const FILES = 30_000;
const BYTES = 300 * 1024 * 1024;

/** Writes FILES files of BYTES in all under node_modules/ of the current folder (a setup's work). */
const GENERATE = `python3 -c '
import os
size = ${Math.floor(BYTES / FILES)}
blob = os.urandom(size)
for i in range(${FILES}):
    d = os.path.join("node_modules", "pkg%d" % (i // 30), "lib")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d.js" % i), "wb") as f:
        f.write(blob[: size - (i % 7)])
'`;

/** Room for the setup to write the tree. */
const SETUP_LIMITS: SandboxLimits = {
  timeoutSeconds: 600,
  cpuSeconds: 600,
  memoryMb: 2048,
  processes: 256,
  fileSizeMb: 64,
  diskMb: 2048,
};

const ms = (since: number) => Math.round(performance.now() - since);

async function restoreFigures(tmp: string): Promise<Array<[string, number]>> {
  const origin = await makeOrigin(tmp, {
    '.gitignore': 'node_modules/\n',
    'package-lock.json': '{}\n',
  });
  const checkout = path.join(tmp, 'checkout');
  git(tmp, 'clone', '--quiet', origin.url, checkout);
  const cfg = testConfig(path.join(tmp, 'ws'));
  await mkdir(path.join(cfg.rootDir, 'jobs'), { recursive: true });

  // The setup, as it would run each turn without snapshots: the sandbox writing the tree.
  let started = performance.now();
  const setup = await runSandboxed({
    checkout,
    cwd: checkout,
    command: GENERATE,
    limits: SETUP_LIMITS,
    network: 'none',
    signal: new AbortController().signal,
  });
  if (setup.exitCode !== 0) throw new Error(`the setup failed: ${setup.output}`);
  const setupMs = ms(started);

  const cache = new SnapshotCache({
    root: path.join(tmp, 'environments'),
    makeRoom: async () => true,
    onError: (err) => {
      throw err;
    },
  });
  const ref = { projectId: 'prj_bench', key: 'a'.repeat(64) };
  started = performance.now();
  const kept = await cache.keep({
    ref,
    checkout,
    entries: await listUntracked(cfg, checkout),
    secrets: [],
    baseCommit: 'bench',
    buildMs: setupMs,
    maxBytes: Number.MAX_SAFE_INTEGER,
  });
  if (!kept.kept) throw new Error('the snapshot was not kept');
  const keepMs = ms(started);
  cache.refill(ref);
  await cache.settled();

  // The next turn: the last tree moved aside, then restored from the spare.
  started = performance.now();
  await moveUntrackedAside(cfg, checkout);
  const asideMs = ms(started);
  await discardsSettled();
  started = performance.now();
  const fromSpare = await cache.restore(kept.manifest, checkout);
  const spareMs = ms(started);
  if (fromSpare.from !== 'spare') throw new Error('no spare was used');
  await moveUntrackedAside(cfg, checkout);
  await cache.settled();
  await discardsSettled();
  // Two restores in a row: the second finds no spare and copies while it waits.
  await cache.restore(kept.manifest, checkout);
  await moveUntrackedAside(cfg, checkout);
  await discardsSettled();
  started = performance.now();
  const copied = await cache.restore(kept.manifest, checkout);
  const copyRestoreMs = ms(started);
  if (copied.from !== 'copy') throw new Error('a spare was ready');
  await cache.settled();

  const plain = path.join(tmp, 'plain-copy');
  started = performance.now();
  await copyTree(path.join(checkout, 'node_modules'), plain);
  const cpMs = ms(started);
  started = performance.now();
  execFileSync('git', ['clean', '-ffdxq'], { cwd: checkout });
  const cleanMs = ms(started);
  await discardsSettled();
  return [
    ['Restore from a ready spare (renames)', spareMs],
    ['Restore with no spare ready (cp -a of the snapshot)', copyRestoreMs],
    ['`cp -a` of the tree', cpMs],
    ['Rerunning a setup that writes the tree (python3 in the sandbox, no download)', setupMs],
    ['Keeping the snapshot after a build (copy, measure)', keepMs],
    ['Next reset: moving the restored tree aside', asideMs],
    ['Next reset without it: `git clean -ffdx` of the tree', cleanMs],
  ];
}

/** The follow-up's 200 to its first model call, with a 60 s setup, warm environment. */
async function followUpFigure(tmp: string): Promise<[string, number]> {
  const key = 'sk-bench-environments';
  const llm = await startFakeLlm({ apiKey: key, models: ['gpt-test'] });
  const origin = await makeOrigin(path.join(tmp, 'service-origin'), {
    '.gitignore': 'node_modules/\n',
    'package-lock.json': '{}\n',
  });
  const svc = await startTestService({
    env: {
      OPENAI_API_KEY: key,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
      ERRAND_TURN_RETRIES: '0',
    },
  });
  try {
    const { id } = await svc.createProject({ repository: origin.url, ref: 'main' });
    const patched = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
      body: {
        setupCommand: `sleep 60 && ${GENERATE}`,
        commandTimeoutSeconds: 600,
        commandCpuSeconds: 600,
        commandDiskMb: 2048,
      },
    });
    if (patched.status !== 200) throw new Error(patched.text);
    llm.script(reply('Warm'));
    const jobId = await createJob(svc, id, 'Warm the environment');
    await untilStatus(svc, id, jobId, 'completed', { timeoutMs: 600_000 });
    await svc.service.ctx.environments.settled();
    await discardsSettled();
    llm.script(reply('Follow-up'));
    const before = llm.requests.length;
    const res = await svc.request('POST', `/v2/agent/${id}/job/${jobId}/message`, {
      body: { prompt: 'And again' },
    });
    if (res.status !== 200) throw new Error(res.text);
    const answered = performance.now();
    while (llm.requests.length === before) await new Promise((r) => setTimeout(r, 2));
    const figure = ms(answered);
    await untilStatus(svc, id, jobId, 'completed', { timeoutMs: 60_000 });
    return ['Follow-up: its 200 to its first model call (60 s setup, warm)', figure];
  } finally {
    await svc.close();
    await llm.close();
  }
}

export async function main(): Promise<string> {
  const tmp = await mkdtemp(path.join(tmpdir(), 'errand-bench-env-'));
  try {
    const rows = await restoreFigures(tmp);
    rows.push(await followUpFigure(tmp));
    const table = [
      `Environment snapshots (\`node bench/environments/run.ts\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC): a setup result of ${FILES.toLocaleString('en-US')} files, ${BYTES / 1024 / 1024} MB, on ext4 (no reflinks).`,
      '',
      '| Measurement | ms |',
      '|---|---|',
      ...rows.map(([what, value]) => `| ${what} | ${value.toLocaleString('en-US')} |`),
    ].join('\n');
    const results = path.join(import.meta.dirname, '..', 'results');
    await mkdir(results, { recursive: true });
    await writeFile(path.join(results, 'environments.md'), `${table}\n`);
    return table;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

if (import.meta.main) process.stdout.write(`${await main()}\n`);
