// A project row naming a variable the worker must not read as a forge token (written before the
// API checked it, or by an API allowing other names): the job fails with a message saying why,
// and nothing the fake GitHub or the git server receives carries the variable's value.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { type FakeGitHub, startFakeGitHub } from '../support/fake-github.ts';
import { type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import {
  type GitHttpServer,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MODEL_KEY = 'sk-test-token-env-5d1f0a7c';
const SECRET_KEY = 'the-workers-own-secret-key-0123456789';
const TOKEN = 'ghp_allowedtoken0123456789abcdef';
const OTHER_TOKEN = 'ghp_notallowedhere0123456789abcd';

/** Whether `text` (a header, a body) holds `value`, also inside a Basic credential. */
function carries(text: string, value: string): boolean {
  if (text.includes(value)) return true;
  for (const [, b64] of text.matchAll(/Basic\s+([A-Za-z0-9+/=]+)/gi)) {
    if (
      Buffer.from(b64 ?? '', 'base64')
        .toString('utf8')
        .includes(value)
    )
      return true;
  }
  return false;
}

describe('forge token variables on the worker', () => {
  let tmp: string;
  let gitServer: GitHttpServer;
  let github: FakeGitHub;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;

  before(async () => {
    tmp = await makeTempDir('token-env');
    const root = path.join(tmp, 'served');
    await makeServedRepo(root, tmp);
    // Serves anyone, and records what every request carried.
    gitServer = await startGitHttpServer({ projectRoot: root });
    github = await startFakeGitHub({ repos: ['acme/app'], token: TOKEN });
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_SECRET_KEY: SECRET_KEY,
        ERRAND_FORGE_TOKEN_GITHUB: TOKEN,
        // Set on this worker, but not allowed here (another API may have allowed it).
        GITHUB_TOKEN: OTHER_TOKEN,
      },
    });
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'token env',
        repository: `${gitServer.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: github.apiUrl,
        forgeTokenEnv: 'ERRAND_FORGE_TOKEN_GITHUB',
      },
    });
    assert.equal(project.status, 201, project.text);
    projectId = project.json.id as string;
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    await github?.close();
    await gitServer?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      llm.assertDone();
      github.assertNoUnexpected();
    } finally {
      llm.reset();
    }
  });

  /** The job once it is no longer active; fails at once if `secret` reaches the servers. */
  const settled = (jobId: string, secret?: string) =>
    waitFor(`job ${jobId} to settle`, async () => {
      if (secret !== undefined) assert.ok(!carries(received(), secret), 'the value was sent');
      const res = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
      return res.json.status === 'active' ? undefined : res.json;
    });

  /** Everything the forge and the git server have received so far, as one text. */
  const received = () =>
    JSON.stringify([
      github.requests.map((r) => [r.path, r.headers, r.body]),
      gitServer.requests.map((r) => [r.path, r.authorization]),
    ]);

  const setTokenEnv = (name: string) =>
    svc.service.ctx.db
      .updateTable('projects')
      .set({ forge_token_env: name })
      .where('id', '=', projectId)
      .execute();

  test('an allowed variable is read and sent to the forge (the control)', async () => {
    llm.script(reply('Nothing to change.'));
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Look around' },
    });
    const job = await settled(created.json.id as string);
    assert.equal(job.status, 'completed', job.error ?? '');
    assert.ok(carries(received(), TOKEN), 'the allowed token never reached the git server');
  });

  // Errand's key, a model key, the database's URL, and a name this worker's operator did not
  // allow: each is set in the worker's environment.
  const forbidden = ['ERRAND_SECRET_KEY', 'OPENAI_API_KEY', 'DATABASE_URL', 'GITHUB_TOKEN'];

  for (const name of forbidden) {
    test(`a row naming ${name} fails the job; its value is never sent`, async () => {
      const value = svc.env[name] ?? '';
      assert.ok(value.length >= 8, `${name} is not set for the worker`);
      await setTokenEnv(name);
      const before = received();
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'Look around' },
      });
      assert.equal(created.status, 201, created.text);
      const job = await settled(created.json.id as string, value);
      assert.equal(job.status, 'failed');
      assert.match(
        job.error ?? '',
        new RegExp(
          `^this worker does not read the project's github token from ${name}: ${name} is (one of Errand's own settings|not an allowed forge token variable).*ERRAND_FORGE_TOKEN_`,
        ),
      );
      assert.ok(!carries(job.error ?? '', value), 'the error holds the value');
      assert.equal(received(), before, 'the forge or the git server was asked');
      assert.ok(!carries(received(), value), `the value of ${name} was sent`);
    });
  }
});
