// Images end to end through the HTTP API (docs/images.md): a real database, a real git origin,
// real workers and the real AI SDK providers against the fake model server, which checks every
// image is in its vendor's shape (Anthropic's base64 image block, OpenAI's image_url data URL)
// and records its bytes. Refusals change nothing; the dashboard serves a turn's images to who
// may read the job and to no one else.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { getPage, sessionCookie } from '../support/dashboard.ts';
import { type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { assertError, unchanged } from '../support/route-cases.ts';
import { startTestService, type TestService } from '../support/service.ts';

const KEY = 'sk-test-images-7e2c9a41';

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG = Buffer.concat([Buffer.from('ffd8ffe000104a46494600', 'hex'), Buffer.alloc(64, 7)]);
const GIF = Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(24, 3)]);
/** A project secret whose value the base64 of SECRET_PNG holds, at a 3-byte boundary. */
const SECRET = 'SECRETVALUEXYZ12';
const SECRET_PNG = Buffer.concat([PNG, Buffer.alloc(2), Buffer.from(SECRET, 'base64')]);

describe('images', () => {
  let tmp: string;
  let origin: Origin;
  let llm: FakeLlm;
  let svc: TestService;
  let images: Server;
  let imagesUrl: string;
  let claudeProject: string;
  let gptProject: string;
  let plainProject: string;

  before(async () => {
    tmp = await makeTempDir('images');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n' });
    llm = await startFakeLlm({ apiKey: KEY, models: ['claude-test', 'gpt-test', 'gpt-3.5-turbo'] });
    // The operator's catalog says the OpenAI-style test model takes images; gpt-3.5-turbo does
    // not by OpenAI's rule.
    const catalog = path.join(tmp, 'catalog.json');
    await writeFile(catalog, JSON.stringify({ 'openai:gpt-test': { images: true } }));
    images = createServer((req, res) => {
      if (new URL(req.url ?? '/', 'http://x').pathname === '/screenshot.jpg')
        return res.writeHead(200).end(JPEG);
      res.writeHead(404).end();
    });
    images.listen(0, '127.0.0.1');
    await once(images, 'listening');
    imagesUrl = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ANTHROPIC_API_KEY: KEY,
        ANTHROPIC_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'anthropic:claude-test',
        ERRAND_MODEL_CATALOG: catalog,
        // Loopback URLs may be fetched, as webhooks may reach loopback (docs/images.md).
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
        ERRAND_TURN_RETRIES: '1',
        ERRAND_SECRET_KEY: 'images-e2e-secret-key',
      },
    });
    const repository = origin.url;
    claudeProject = (await svc.createProject({ name: 'claude', repository, ref: 'main' })).id;
    const secret = await svc.request('PUT', `/v2/admin/projects/${claudeProject}/secrets/TOKEN`, {
      body: { value: SECRET, exposure: 'commands' },
    });
    assert.equal(secret.status, 201, secret.text);
    gptProject = (
      await svc.createProject({ name: 'gpt', repository, ref: 'main', model: 'openai:gpt-test' })
    ).id;
    plainProject = (
      await svc.createProject({
        name: 'no images',
        repository,
        ref: 'main',
        model: 'openai:gpt-3.5-turbo',
      })
    ).id;
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    images?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      llm.assertDone();
    } finally {
      llm.reset();
    }
  });

  const until = (projectId: string, jobId: string, status: string) =>
    untilStatus(svc, projectId, jobId, status, { failFast: true });

  test('Anthropic: the images reach the model as base64 image blocks; later turns carry a line naming them', async () => {
    llm.script(reply('The screenshot shows a one-pixel PNG and a GIF.'));
    const created = await svc.request('POST', `/v2/agent/${claudeProject}/job`, {
      body: {
        prompt: 'What do these screenshots show?',
        mode: 'ask',
        attachments: [
          { data: PNG.toString('base64') },
          // A data URL that claims PNG; its bytes are a GIF, and a GIF is what is sent.
          { data: `data:image/png;base64,${GIF.toString('base64')}` },
          // Bytes are not text: the scrub of secret values leaves them alone.
          { data: SECRET_PNG.toString('base64') },
        ],
      },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    await until(claudeProject, jobId, 'completed');
    const [first] = llm.requests;
    assert.equal(first?.protocol, 'anthropic');
    assert.deepEqual(
      first?.images.map((i) => [i.mediaType, i.bytes.toString('base64')]),
      [
        ['image/png', PNG.toString('base64')],
        ['image/gif', GIF.toString('base64')],
        ['image/png', SECRET_PNG.toString('base64')],
      ],
    );
    assert.ok(SECRET_PNG.toString('base64').includes(SECRET));
    // In the prompt's own message, after its text.
    assert.ok(first);
    const { messages } = first.body as { messages: { role: string; content: unknown[] }[] };
    const last = messages.at(-1);
    assert.equal(last?.role, 'user');
    assert.deepEqual(
      last?.content.map((p) => (p as { type: string }).type),
      ['text', 'image', 'image', 'image'],
    );

    // Kept with the job: the bytes as sent, their type from their bytes.
    const stored = await svc.service.ctx.db
      .selectFrom('attachments')
      .select(['seq', 'n', 'media_type', 'size', 'data', 'source'])
      .where('job_id', '=', jobId)
      .orderBy('n')
      .execute();
    assert.deepEqual(
      stored.map((a) => [a.seq, a.n, a.media_type, a.size, a.source]),
      [
        [1, 1, 'image/png', PNG.length, null],
        [1, 2, 'image/gif', GIF.length, null],
        [1, 3, 'image/png', SECRET_PNG.length, null],
      ],
    );
    assert.ok(stored[0]?.data.equals(PNG));
    // The turn's stored conversation names them and holds none of their bytes.
    const turn = await svc.service.ctx.db
      .selectFrom('turns')
      .select('messages')
      .where('job_id', '=', jobId)
      .where('seq', '=', 1)
      .executeTakeFirstOrThrow();
    const history = JSON.stringify(turn.messages);
    assert.match(history, /\[image 1 of this prompt \(image\/png, \d+ bytes\)/);
    assert.match(history, /\[image 2 of this prompt \(image\/gif/);
    assert.ok(
      !history.includes(PNG.toString('base64').slice(0, 40)),
      'the image is in the history',
    );

    // A follow-up without images: the earlier ones are lines, not images, in its request.
    llm.script(reply('Nothing else.'));
    const followed = await svc.request('POST', `/v2/agent/${claudeProject}/job/${jobId}/message`, {
      body: { prompt: 'Anything else?', mode: 'ask' },
    });
    assert.equal(followed.status, 200, followed.text);
    await until(claudeProject, jobId, 'completed');
    const second = llm.requests[1];
    assert.deepEqual(second?.images, []);
    assert.match(JSON.stringify(second?.body), /\[image 1 of this prompt \(image\/png/);
  });

  test('OpenAI: a fetched image and an inline one reach the model as image_url data URLs', async () => {
    llm.script(reply('A JPEG.'), reply('And a PNG.'));
    const created = await svc.request('POST', `/v2/agent/${gptProject}/job`, {
      body: {
        prompt: 'What is in this picture?',
        mode: 'ask',
        attachments: [{ url: `${imagesUrl}/screenshot.jpg?signature=s3cr3t` }],
      },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    await until(gptProject, jobId, 'completed');
    const [first] = llm.requests;
    assert.equal(first?.protocol, 'openai');
    assert.deepEqual(
      first?.images.map((i) => [i.mediaType, i.bytes.equals(JPEG)]),
      [['image/jpeg', true]],
    );
    assert.ok(first);
    const { messages } = first.body as { messages: { content: unknown }[] };
    const parts = messages.at(-1)?.content;
    assert.ok(Array.isArray(parts));
    assert.match(
      JSON.stringify(parts.find((p) => (p as { type: string }).type === 'image_url')),
      /"url":"data:image\/jpeg;base64,/,
    );
    const { source } = await svc.service.ctx.db
      .selectFrom('attachments')
      .select('source')
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.equal(source, `${imagesUrl}/screenshot.jpg`, 'the query (a token) is not kept');

    const followed = await svc.request('POST', `/v2/agent/${gptProject}/job/${jobId}/message`, {
      body: {
        prompt: 'And this one?',
        mode: 'ask',
        attachments: [{ data: PNG.toString('base64') }],
      },
    });
    assert.equal(followed.status, 200, followed.text);
    await until(gptProject, jobId, 'completed');
    assert.deepEqual(
      llm.requests[1]?.images.map((i) => i.mediaType),
      ['image/png'],
      'only the new turn carries an image; the earlier one is a line',
    );
  });

  test('refused with a clear 400, changing nothing: 6 images, > 5 MB, not an image, bad base64, a model without images', async () => {
    const png = { data: PNG.toString('base64') };
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        claudeProject,
        { attachments: Array(6).fill(png) },
        /"attachments" has 6 images; the most a turn may carry is 5/,
      ],
      [
        claudeProject,
        { attachments: [png, { data: Buffer.alloc(6 * 1024 * 1024, 1).toString('base64') }] },
        /invalid "attachments\[1\]\.data": is longer than the base64 of 5242880 bytes/,
      ],
      [
        claudeProject,
        // Just past 5 MB: short enough for the schema, refused once decoded.
        {
          attachments: [
            png,
            {
              data: Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024 - PNG.length + 10)]).toString(
                'base64',
              ),
            },
          ],
        },
        /invalid "attachments\[1\]\.data": is 5242890 bytes; the most one image may have is 5242880 \(5 MB\)/,
      ],
      [
        claudeProject,
        { attachments: [{ data: Buffer.from('<html>not an image</html>').toString('base64') }] },
        /invalid "attachments\[0\]\.data": is not a PNG, JPEG, WebP or GIF image/,
      ],
      [
        claudeProject,
        { attachments: [{ data: '%%%not base64' }] },
        /invalid "attachments\[0\]\.data": is not valid base64/,
      ],
      [
        claudeProject,
        { attachments: [{ url: 'ftp://example.com/x.png' }] },
        /"attachments\[0\]\.url": must use https:\/\/ or http:\/\//,
      ],
      [claudeProject, { attachments: [{ data: 'x', mediaType: 'image/png' }] }, /attachments/],
      [
        claudeProject,
        { attachments: [{ url: `${imagesUrl}/missing.png` }] },
        /"attachments\[0\]\.url": answered 404/,
      ],
      [plainProject, { attachments: [png] }, /model 'openai:gpt-3\.5-turbo' does not take images/],
    ];
    for (const [projectId, extra, message] of cases) {
      const res = await unchanged(svc, () =>
        svc.request('POST', `/v2/agent/${projectId}/job`, { body: { prompt: 'Look', ...extra } }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', message);
    }
    // On a follow-up too: the job's model decides.
    llm.script(reply('Done.'));
    const plain = await svc.request('POST', `/v2/agent/${plainProject}/job`, {
      body: { prompt: 'No images here', mode: 'ask' },
    });
    assert.equal(plain.status, 201, plain.text);
    await until(plainProject, plain.json.id as string, 'completed');
    const res = await unchanged(svc, () =>
      svc.request('POST', `/v2/agent/${plainProject}/job/${plain.json.id}/message`, {
        body: { prompt: 'Now look', attachments: [png] },
      }),
    );
    assertError(res, 400, 'bad_request');
    assert.match(res.json.error ?? '', /does not take images/);
  });

  test('five images of 5 MB fit the body limit; a larger body is a 413 that changes nothing', async () => {
    const big = Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024 - PNG.length)]);
    llm.scriptAll(() => reply('Five large images.'));
    // OpenAI's request takes five such images; Anthropic's (32 MB, 5 MB of base64 an image) not.
    const created = await svc.request('POST', `/v2/agent/${gptProject}/job`, {
      body: {
        prompt: 'Five',
        mode: 'ask',
        attachments: Array(5).fill({ data: big.toString('base64') }),
      },
    });
    assert.equal(created.status, 201, created.text);
    const started = Date.now();
    // 35 MB through the service, the SDK and the fake: slower than a usual turn.
    await untilStatus(svc, gptProject, created.json.id as string, 'completed', {
      failFast: true,
      timeoutMs: 120_000,
    });
    console.log(`five 5 MB images: the turn took ${Date.now() - started} ms`);
    assert.equal(llm.requests[0]?.images.length, 5);
    llm.scriptAll(undefined);
    const tooLarge = await unchanged(svc, () =>
      svc.request('POST', `/v2/agent/${claudeProject}/job`, {
        body: {
          prompt: 'x'.repeat(100),
          attachments: Array(5).fill({ data: big.toString('base64') }),
          pad: 'y'.repeat(8 * 1024 * 1024),
        },
      }),
    );
    assertError(tooLarge, 413, 'payload_too_large');
  });

  test("the dashboard shows a turn's images and serves them to who may read the job, 404 to others", async () => {
    llm.script(reply('Seen.'));
    const created = await svc.request('POST', `/v2/agent/${claudeProject}/job`, {
      body: {
        prompt: 'Look at this',
        mode: 'ask',
        attachments: [{ data: PNG.toString('base64') }],
      },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    await until(claudeProject, jobId, 'completed');
    const src = `/projects/${claudeProject}/jobs/${jobId}/turns/1/images/1`;

    const { key: ownKey } = await svc.createProjectKey(claudeProject);
    const reader = await sessionCookie(svc, ownKey);
    const page = await getPage(svc, reader, `/projects/${claudeProject}/jobs/${jobId}`);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes(`<img src="${src}" alt="Image 1 of turn 1"`), page.text);

    const image = await fetch(`${svc.url}${src}`, { headers: { cookie: reader } });
    assert.equal(image.status, 200);
    assert.equal(image.headers.get('content-type'), 'image/png');
    assert.equal(image.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(image.headers.get('content-security-policy'), "default-src 'none'; sandbox");
    assert.ok(Buffer.from(await image.arrayBuffer()).equals(PNG));

    // Another project's session, through either project's path, and no session at all.
    const { key: otherKey } = await svc.createProjectKey(gptProject);
    const other = await sessionCookie(svc, otherKey);
    for (const [cookie, at] of [
      [other, `/projects/${gptProject}/jobs/${jobId}/turns/1/images/1`],
      [reader, `${src.replace('/images/1', '/images/2')}`],
      [reader, `${src.replace('/turns/1/', '/turns/2/')}`],
      [reader, `${src.replace('/images/1', '/images/x')}`],
    ] as const) {
      const res = await fetch(`${svc.url}${at}`, { headers: { cookie } });
      assert.equal(res.status, 404, at);
      assert.notEqual(res.headers.get('content-type'), 'image/png');
    }
    const foreign = await fetch(`${svc.url}${src}`, { headers: { cookie: other } });
    assert.ok([403, 404].includes(foreign.status), String(foreign.status));
    assert.notEqual(foreign.headers.get('content-type'), 'image/png');
    const anonymous = await fetch(`${svc.url}${src}`);
    assert.equal(anonymous.status, 401);
  });
});
