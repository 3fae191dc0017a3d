// The job core's check of a turn's images once its model and engine are known: none is always
// fine; images need a model that takes them, whichever engine runs it, and fit in what the
// vendor (or, for an engine, the model proxy) takes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ModelCatalog } from '../agent/catalog.ts';
import { ModelRegistry } from '../agent/models.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { NewAttachment } from './accept.ts';
import { checkImages } from './attachments.ts';

const IMAGE: NewAttachment = { mediaType: 'image/png', data: Buffer.from('png'), source: null };
// The real registry over the package's catalog: its rule by name decides.
const models = new ModelRegistry({}, undefined, new ModelCatalog());
const project = (engine: ProjectRow['engine']) => ({ id: 'prj_1', engine }) as ProjectRow;

describe('checkImages', () => {
  test('no images: any model and engine', () => {
    for (const attachments of [undefined, []])
      checkImages({ models }, project('codex'), 'openai:gpt-3.5-turbo', attachments);
  });

  test("images on a model that takes them, on Errand's own agent and on every engine", () => {
    for (const engine of ['errand', 'claude-code', 'codex', 'opencode'] as const) {
      checkImages({ models }, project(engine), 'anthropic:claude-sonnet-4-5', [IMAGE]);
      checkImages({ models }, project(engine), 'openai:gpt-4.1', [IMAGE]);
    }
  });

  test('refused, naming why: a model without images', () => {
    const refused = (pattern: RegExp) => (err: unknown) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.status, 400);
      assert.match(err.message, pattern);
      return true;
    };
    for (const engine of ['errand', 'codex', 'opencode'] as const)
      assert.throws(
        () => checkImages({ models }, project(engine), 'openai:gpt-3.5-turbo', [IMAGE]),
        refused(/model 'openai:gpt-3\.5-turbo' does not take images.*ERRAND_MODEL_CATALOG/),
      );
  });

  test("refused before the turn: an image over the vendor's own limit (Anthropic's 5 MB of base64)", () => {
    const sized = (bytes: number): NewAttachment => ({ ...IMAGE, data: Buffer.alloc(bytes) });
    const fits = (5 * 1024 * 1024 * 3) / 4;
    checkImages({ models }, project('errand'), 'anthropic:claude-sonnet-4-5', [sized(fits)]);
    assert.throws(
      () =>
        checkImages({ models }, project('errand'), 'anthropic:claude-sonnet-4-5', [
          IMAGE,
          sized(fits + 1),
        ]),
      (err: unknown) =>
        err instanceof AppError &&
        err.status === 400 &&
        /"attachments\[1\]": 3932161 bytes; anthropic:claude-sonnet-4-5's vendor takes an image of at most 5242880 bytes as base64/.test(
          err.message,
        ),
    );
    // Five that fit one by one but not in one request together.
    assert.throws(
      () =>
        checkImages(
          { models },
          project('errand'),
          'anthropic:claude-sonnet-4-5',
          Array.from({ length: 5 }, () => sized(fits)),
        ),
      /takes a request of at most 33554432 bytes/,
    );
    // OpenAI takes an image of up to 20 MB: Errand's own 5 MB bound is the one that holds.
    checkImages({ models }, project('errand'), 'openai:gpt-4.1', [sized(5 * 1024 * 1024)]);
  });

  test("refused before the turn: an engine's images past what the model proxy forwards (32 MB a request)", () => {
    const five = Array.from({ length: 5 }, () => ({
      ...IMAGE,
      data: Buffer.alloc(5 * 1024 * 1024),
    }));
    // Errand's own agent calls OpenAI itself, which takes them.
    checkImages({ models }, project('errand'), 'openai:gpt-4.1', five);
    for (const engine of ['codex', 'opencode'] as const)
      assert.throws(
        () => checkImages({ models }, project(engine), 'openai:gpt-4.1', five),
        new RegExp(
          `5 images of 34952540 bytes as base64 in all; the ${engine} engine's requests to its model are at most 33554432 bytes`,
        ),
      );
    // Three fit.
    checkImages({ models }, project('codex'), 'openai:gpt-4.1', five.slice(0, 3));
  });
});
