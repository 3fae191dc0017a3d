// Images with each engine's real CLI in the real sandbox, against a fake of its model API over
// loopback: a job created with two images (inline PNGs) reaches the model with its
// prompt, each image in the vendor's own format (Anthropic's base64 `image` block for Claude
// Code, the Responses API's `input_image` for Codex, chat completions' `image_url` for
// OpenCode), its bytes intact; the fake refuses any other shape. The images the service wrote
// for the engine are gone from its HOME after the turn, and a follow-up without images sends
// none again. An engine not installed in ERRAND_ENGINES_DIR is skipped with the command that
// installs it.
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { crc32, deflateSync } from 'node:zlib';
import type { InstallableEngine } from '../../src/engines/catalog.ts';
import { IMAGES_DIR } from '../../src/engines/engine.ts';
import { type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { type TestService, waitFor } from '../support/service.ts';
import { ENGINE_MODELS, engineSkip, startEngineProject } from './inside.ts';

/** A real one-pixel PNG (an engine may decode it). */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
/** A real 2×2 PNG of other colours, made here (an engine may decode and check it). */
const PNG_2X2 = png(2, 2, [255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255]);

const ENGINES: InstallableEngine[] = ['claude-code', 'codex', 'opencode'];

for (const engine of ENGINES) {
  const skip = await engineSkip(engine, 'image');
  const { vendorModel } = ENGINE_MODELS[engine];

  describe(`engine ${engine} with images`, { skip }, () => {
    const key = `sk-${engine}-images-0a1b2c3d4e5f`;
    let tmp: string;
    let llm: FakeLlm;
    let svc: TestService;
    let projectId: string;

    before(async () => {
      tmp = await makeTempDir(`engine-images-${engine}`);
      llm = await startFakeLlm({ apiKey: key, models: [vendorModel] });
      ({ svc, projectId } = await startEngineProject(engine, { tmp, llmUrl: llm.url, key }));
    });
    after(async () => {
      await svc?.close();
      await llm?.close();
      await removeDir(tmp);
    });

    test('the images reach the model with the prompt, in its vendor format, byte for byte', async () => {
      llm.script(reply('Two PNGs.'));
      const res = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: {
          prompt: 'What do these screenshots show?',
          attachments: [{ data: PNG.toString('base64') }, { data: PNG_2X2.toString('base64') }],
        },
      });
      assert.equal(res.status, 201, res.text);
      const jobId = res.json.id as string;
      const job = await untilStatus(svc, projectId, jobId, 'completed', {
        failFast: true,
        timeoutMs: 180_000,
      }).catch((err: unknown) => {
        // What the fake saw and refused says why.
        throw new Error(`${String(err)}; the fake model: ${llm.unexpected.join('; ')}`);
      });
      assert.equal(job.summary, 'Two PNGs.');
      llm.assertDone();
      const [request] = llm.requests;
      assert.ok(request);
      assert.deepEqual(
        request.images.map((image) => [image.mediaType, image.bytes.toString('base64')]),
        [
          ['image/png', PNG.toString('base64')],
          ['image/png', PNG_2X2.toString('base64')],
        ],
      );
      // In the message that holds the prompt.
      const message = request.images[0]?.message ?? -1;
      assert.match(JSON.stringify(messagesOf(request.body)[message]), /What do these screenshots/);
      // The files written for the engine are gone with the turn.
      const home = path.join(
        svc.service.ctx.config.dataDir,
        'workspaces',
        'engine-state',
        jobId,
        'home',
      );
      await assert.rejects(stat(path.join(home, IMAGES_DIR)), { code: 'ENOENT' });
      llm.reset();

      // A follow-up without images sends no new image (a resumed session may replay the first).
      llm.script(reply('Nothing new.'));
      const sent = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt: 'And now?' },
      });
      assert.equal(sent.status, 200, sent.text);
      await waitFor(
        'the follow-up',
        async () => {
          const now = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
          if (now.status === 'failed') throw new Error(`job failed: ${now.error}`);
          return now.status === 'completed' && now.turns === 2 ? true : undefined;
        },
        180_000,
      );
      llm.assertDone();
      const last = messagesOf(llm.requests[0]?.body);
      assert.ok(
        (llm.requests[0]?.images ?? []).every((image) => image.message < last.length - 1),
        'no image in the follow-up message',
      );
      llm.reset();
    });
  });
}

/** An RGB PNG of `width` × `height` pixels, `rgb` their colours row by row. */
function png(width: number, height: number, rgb: number[]): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), body.length + 4);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Array.from({ length: height }, (_, y) =>
    Buffer.from([0, ...rgb.slice(y * width * 3, (y + 1) * width * 3)]),
  );
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A request's messages: Anthropic's and chat completions' `messages`, the Responses `input`. */
function messagesOf(body: unknown): unknown[] {
  if (typeof body !== 'object' || body === null) return [];
  const record = body as Record<string, unknown>;
  const list = record.messages ?? record.input;
  return Array.isArray(list) ? list : [];
}
