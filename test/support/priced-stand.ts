// A service whose project's repository is served over loopback HTTP with a token, whose forge is
// a fake GitHub, and whose models are OpenAI-compatible ones of a fake server with the prices the
// test gives: the stand of the best-of-N and eval tests, which count costs to the cent.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
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

export interface PricedStand {
  /** The served repository's bare copy (its branches are what was pushed). */
  bare: string;
  github: FakeGitHub;
  llm: FakeLlm;
  svc: TestService;
  projectId: string;
  close(): Promise<void>;
}

/**
 * Starts the stand. `prices`: per model id of the fake (`openai:<id>` to Errand), dollars per
 * million tokens in and out; the first is the server's default model.
 */
export async function startPricedStand(
  name: string,
  prices: Readonly<Record<string, readonly [number, number]>>,
): Promise<PricedStand> {
  const modelKey = `sk-test-${name}-7c2a91e4`;
  const token = `ghp_${name.replace(/[^a-z]/g, '')}token0123456789abcdef`;
  const tmp = await makeTempDir(name);
  const closers: (() => Promise<void>)[] = [() => removeDir(tmp)];
  const close = async () => {
    for (const closer of closers.reverse()) await closer();
  };
  try {
    const root = path.join(tmp, 'served');
    const bare = await makeServedRepo(root, tmp);
    const basic = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
    const gitServer: GitHttpServer = await startGitHttpServer({
      projectRoot: root,
      authorization: basic,
    });
    closers.push(() => gitServer.close());
    const github = await startFakeGitHub({ repos: ['acme/app'], token });
    closers.push(() => github.close());
    const llm = await startFakeLlm({ apiKey: modelKey, models: Object.keys(prices) });
    closers.push(() => llm.close());
    const catalog = path.join(tmp, 'catalog.json');
    await writeFile(
      catalog,
      JSON.stringify(
        Object.fromEntries(
          Object.entries(prices).map(([model, [input, output]]) => [
            `openai:${model}`,
            { contextTokens: 200_000, inputUsdPerMTok: input, outputUsdPerMTok: output },
          ]),
        ),
      ),
    );
    const svc = await startTestService({
      env: {
        OPENAI_API_KEY: modelKey,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: `openai:${Object.keys(prices)[0]}`,
        ERRAND_MODEL_CATALOG: catalog,
        ERRAND_SECRET_KEY: `test-secret-key-for-errand-${name}`,
      },
    });
    closers.push(() => svc.close());
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name,
        repository: `${gitServer.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: github.apiUrl,
        forgeToken: token,
      },
    });
    assert.equal(project.status, 201, project.text);
    return { bare, github, llm, svc, projectId: project.json.id as string, close };
  } catch (err) {
    await close();
    throw err;
  }
}
