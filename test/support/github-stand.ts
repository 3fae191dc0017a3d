// A served repository and a real service around the fake model: a git server over loopback HTTP
// that demands the forge token, the stateful fake of GitHub's API, the fake model vendors, and a
// project of the service on that repository. For tests that run Errand's own agent end to end
// through the HTTP API (modes, structured output).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, afterEach, before } from 'node:test';
import { type FakeGitHub, startFakeGitHub } from './fake-github.ts';
import { type FakeLlm, startFakeLlm } from './fake-llm.ts';
import {
  type GitHttpServer,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from './git.ts';
import { startTestService, type TestService } from './service.ts';

const TOKEN = 'ghp_standtoken0123456789abcdefgh';

export interface GitHubStand {
  /** The served repository's bare directory (acme/app). */
  bare: string;
  github: FakeGitHub;
  llm: FakeLlm;
  svc: TestService;
  projectId: string;
  close(): Promise<void>;
}

/**
 * Starts the stand. `env` is the service's, besides the model key and base URLs of the vendors
 * the fake speaks (OpenAI and Anthropic), both on `modelKey`.
 */
export async function startGitHubStand(options: {
  name: string;
  modelKey: string;
  models: string[];
  env: Record<string, string>;
}): Promise<GitHubStand> {
  const tmp = await makeTempDir(options.name);
  const root = path.join(tmp, 'served');
  const bare = await makeServedRepo(root, tmp);
  const started: { close(): Promise<void> }[] = [];
  const close = async () => {
    for (const part of started.reverse()) await part.close();
    await removeDir(tmp);
  };
  try {
    const authorization = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
    const gitServer: GitHttpServer = await startGitHttpServer({ projectRoot: root, authorization });
    started.push(gitServer);
    const github = await startFakeGitHub({ repos: ['acme/app'], token: TOKEN });
    started.push(github);
    const llm = await startFakeLlm({ apiKey: options.modelKey, models: options.models });
    started.push(llm);
    const svc = await startTestService({
      env: {
        OPENAI_API_KEY: options.modelKey,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ANTHROPIC_API_KEY: options.modelKey,
        ANTHROPIC_BASE_URL: `${llm.url}/v1`,
        ...options.env,
      },
    });
    started.push(svc);
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: options.name,
        repository: `${gitServer.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: github.apiUrl,
        forgeToken: TOKEN,
      },
    });
    assert.equal(project.status, 201, project.text);
    return { bare, github, llm, svc, projectId: project.json.id as string, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The stand for the tests of one `describe`: started before them, closed after them, and after
 * each test the fake model's script used up and nothing unexpected asked of either fake. Its
 * fields are set once the `before` hook has run.
 */
export function useGitHubStand(options: Parameters<typeof startGitHubStand>[0]): GitHubStand {
  const stand = {} as GitHubStand;
  before(async () => {
    Object.assign(stand, await startGitHubStand(options));
  });
  after(async () => {
    await stand.close?.();
  });
  afterEach(() => {
    try {
      stand.llm.assertDone();
      stand.github.assertNoUnexpected();
    } finally {
      stand.llm.reset();
    }
  });
  return stand;
}
