// A worker killed between opening the pull request and recording it: real `errand worker`
// processes on PostgreSQL, a GitHub fake behind a proxy that holds back the answer to the
// pull request's creation (so the worker dies with the pull request opened but not recorded),
// and a second worker on another "machine" (its own data directory) that recovers the turn.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type FakeGitHub, startFakeGitHub } from '../support/fake-github.ts';
import { type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import {
  type GitHttpServer,
  git,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { exited, runErrand } from '../support/process.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const TOKEN = 'ghp_crashtesttoken0123456789';
const MODEL_KEY = 'sk-test-crash-8f2a6c1e';

/** Forwards to the fake; the first pull request creation is forwarded but never answered. */
async function holdingProxy(
  target: string,
  onHeld: () => void,
): Promise<{ url: string; server: Server }> {
  let held = false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(
          ([k, v]) =>
            typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k),
        ),
      ) as Record<string, string>;
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      void fetch(`${target}${req.url}`, {
        method: req.method ?? 'GET',
        headers,
        ...(body ? { body } : {}),
      }).then(
        async (answer) => {
          const text = Buffer.from(await answer.arrayBuffer());
          if (!held && req.method === 'POST' && /\/pulls$/.test(req.url ?? '')) {
            held = true;
            onHeld();
            return; // The pull request exists now; its creator never learns the number.
          }
          res.writeHead(answer.status, {
            'content-type': answer.headers.get('content-type') ?? 'application/json',
          });
          res.end(text);
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('a worker killed between opening and recording the pull request', () => {
  let tmp: string;
  let svc: TestService;
  let llm: FakeLlm;
  let github: FakeGitHub;
  let gitServer: GitHttpServer;
  let proxy: { url: string; server: Server };
  let heldAt = 0;
  let bare: string;

  before(async () => {
    tmp = await makeTempDir('pr-crash');
    const root = path.join(tmp, 'served');
    bare = await makeServedRepo(root, tmp);
    gitServer = await startGitHttpServer({
      projectRoot: root,
      authorization: `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`,
    });
    github = await startFakeGitHub({ repos: ['acme/app'], token: TOKEN });
    proxy = await holdingProxy(github.apiUrl, () => {
      heldAt = Date.now();
    });
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      worker: false,
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
      },
    });
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    await github?.close();
    await gitServer?.close();
    proxy?.server.closeAllConnections();
    proxy?.server.close();
    await removeDir(tmp);
  });

  test('after recovery there is exactly one pull request and prLink points to it', async () => {
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'crash',
        repository: `${gitServer.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: proxy.url,
        forgeTokenEnv: 'ERRAND_FORGE_TOKEN_TEST_GITHUB',
      },
    });
    assert.equal(project.status, 201, project.text);
    const workerEnv = (machine: string) => ({
      ...svc.env,
      ERRAND_DATA_DIR: path.join(tmp, machine),
      ERRAND_PUBLIC_URL: svc.url,
      ERRAND_FORGE_TOKEN_TEST_GITHUB: TOKEN,
      ERRAND_LOG_LEVEL: 'silent',
    });
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: 'notes\n' } }]),
      reply('Add notes'),
    );
    const first = runErrand(['worker'], workerEnv('machine-a'));
    const created = await svc.request('POST', `/v2/agent/${project.json.id}/job`, {
      body: { prompt: 'Add notes' },
    });
    const jobId = created.json.id as string;
    await waitFor('the pull request to be opened', async () => (heldAt ? true : undefined), 30_000);
    first.kill('SIGKILL');
    await exited(first);
    assert.equal(github.pullRequests('acme/app').length, 1);
    assert.equal(
      (await svc.request('GET', `/v2/agent/${project.json.id}/job/${jobId}`)).json.prLink,
      null,
    );

    const second = runErrand(['worker'], workerEnv('machine-b'));
    try {
      const job = await waitFor(
        'the job to complete on the second worker',
        async () => {
          const res = await svc.request('GET', `/v2/agent/${project.json.id}/job/${jobId}`);
          return res.json.status === 'completed' ? res.json : undefined;
        },
        45_000,
      );
      const pulls = github.pullRequests('acme/app');
      assert.equal(pulls.length, 1, 'a second pull request was opened');
      assert.equal(job.prLink, pulls[0]?.htmlUrl);
      // The review link in the pull request is the API's address, which the worker was given.
      assert.ok(pulls[0]?.body?.includes(`${svc.url}/review/${jobId}`), pulls[0]?.body ?? '');
      assert.equal(git(bare, 'rev-list', '--count', `main..errand/${jobId}`), '1');
      llm.assertDone();
      github.assertNoUnexpected();
    } finally {
      second.kill('SIGTERM');
      await exited(second);
    }
  });
});
