// errand/client as another Node project gets it: `npm pack` (which runs prepare, the build of
// dist/client/), the tarball unpacked into a throwaway project's node_modules with none of
// Errand's dependencies beside it (the client has none at run time), then plain JavaScript
// importing errand/client creates a job on a running Errand and waits for it, and TypeScript
// checks a typed use of it through the package's .d.ts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { scriptedRunner } from '../support/route-cases.ts';
import { startTestService, type TestService } from '../support/service.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');

const CONSUMER_JS = `import { ErrandClient, ErrandError, TERMINAL_STATUSES } from 'errand/client';

const client = new ErrandClient({
  baseUrl: process.env.ERRAND_URL,
  apiKey: process.env.ERRAND_API_KEY,
  projectId: process.env.ERRAND_PROJECT,
});
const job = await client.createJob({ prompt: 'complete from another project' });
const done = await client.waitForJob(job.id, { timeoutMs: 30000 });
let error;
try {
  await client.getJob('job_00000000000000000000');
} catch (err) {
  error = err;
}
console.log(JSON.stringify({
  resolved: import.meta.resolve('errand/client'),
  created: job.status,
  id: job.id,
  doneId: done.id,
  status: done.status,
  terminal: TERMINAL_STATUSES,
  typed: error instanceof ErrandError,
  code: error?.code,
  httpStatus: error?.status,
}));
`;

const CONSUMER_TS = `import { ErrandClient, ErrandError, type Job, type JobEvent } from 'errand/client';

const client = new ErrandClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'key', projectId: 'p' });
export async function use(): Promise<string> {
  const job: Job = await client.createJob({ prompt: 'x', baseRef: 'main' }, { idempotencyKey: 'k' });
  const status: 'active' | 'completed' | 'failed' | 'archived' = job.status;
  for await (const event of client.events(job.id)) {
    const seq: number = (event satisfies JobEvent).seq;
    void seq;
  }
  // @ts-expect-error: the job record has no such field
  void job.nonsense;
  // @ts-expect-error: a prompt is required
  await client.createJob({ model: 'a:b' });
  try {
    await client.getJob(job.id);
  } catch (err) {
    if (err instanceof ErrandError) return \`\${err.code} \${err.status} \${err.requestId ?? ''}\`;
  }
  return status;
}
`;

describe('errand/client from a packed tarball in another project', () => {
  let svc: TestService;
  let project: string;
  let key: string;
  let work: string;
  let consumer: string;

  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'errand-client-package-'));
    svc = await startTestService({ runner: scriptedRunner() });
    project = (await svc.createProject()).id;
    key = (await svc.createProjectKey(project)).key;
    // npm pack runs prepare, so the tarball has a fresh build of dist/client/.
    const { stdout } = await run('npm', ['pack', '--silent', '--pack-destination', work], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    const tarball = path.join(work, stdout.trim().split('\n').at(-1) ?? '');
    consumer = path.join(work, 'consumer');
    const installed = path.join(consumer, 'node_modules', 'errand');
    await mkdir(installed, { recursive: true });
    await run('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
    await writeFile(
      path.join(consumer, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
    );
  });
  after(async () => {
    await svc?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  test('the tarball has the built client and no tests', async () => {
    const installed = path.join(consumer, 'node_modules', 'errand');
    const built = await readdir(path.join(installed, 'dist', 'client'));
    for (const file of ['index.js', 'index.d.ts', 'client.js', 'errors.js', 'sse.js'])
      assert.ok(built.includes(file), `dist/client/${file} is packed`);
    const tests = await readdir(path.join(installed, 'src', 'http', 'routes'));
    assert.ok(!tests.some((file) => file.endsWith('.test.ts')), 'no test files packed');
    assert.deepEqual(await readdir(path.join(consumer, 'node_modules')), ['errand']);
  });

  test('plain JavaScript imports errand/client, creates a job and waits for it', async () => {
    await writeFile(path.join(consumer, 'consumer.mjs'), CONSUMER_JS);
    const { stdout } = await run(process.execPath, ['consumer.mjs'], {
      cwd: consumer,
      // The key by environment, never in argv.
      env: {
        PATH: process.env.PATH,
        ERRAND_URL: svc.url,
        ERRAND_API_KEY: key,
        ERRAND_PROJECT: project,
      },
      timeout: 60_000,
    });
    const out = JSON.parse(stdout) as Record<string, unknown>;
    assert.equal(
      out.resolved,
      `file://${path.join(consumer, 'node_modules/errand/dist/client/index.js')}`,
    );
    assert.equal(out.created, 'active');
    assert.equal(out.doneId, out.id);
    assert.equal(out.status, 'completed');
    assert.deepEqual(out.terminal, ['completed', 'failed', 'archived']);
    assert.equal(out.typed, true);
    assert.equal(out.code, 'not_found');
    assert.equal(out.httpStatus, 404);
    const stored = await svc.request('GET', `/v2/agent/${project}/job/${String(out.id)}`);
    assert.equal(stored.json.status, 'completed');
  });

  test('TypeScript checks a typed use through the package’s declarations', async () => {
    await writeFile(path.join(consumer, 'consumer.ts'), CONSUMER_TS);
    await writeFile(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2024',
          module: 'nodenext',
          strict: true,
          noEmit: true,
          lib: ['es2024', 'dom', 'dom.iterable'],
          types: [],
        },
        files: ['consumer.ts'],
      }),
    );
    const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], {
      cwd: consumer,
    }).then(
      () => 'ok',
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    assert.equal(checked, 'ok');
    // A mistake is caught: the check is not vacuous.
    await writeFile(
      path.join(consumer, 'consumer.ts'),
      `${CONSUMER_TS}\nexport const wrong: number = (await client.getJob('j')).status;\n`,
    );
    const failed = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], {
      cwd: consumer,
    }).then(
      () => '',
      (err: { stdout?: string }) => err.stdout ?? '',
    );
    assert.match(failed, /consumer\.ts.*error TS2322/);
  });
});
