// The job core's check of a turn's images once its model is known: none is always fine; images
// need a model that takes them, whichever engine runs it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ModelCatalog } from '../agent/catalog.ts';
import { ModelRegistry } from '../agent/models.ts';
import { AppError } from '../errors.ts';
import type { NewAttachment } from './accept.ts';
import { checkImages } from './attachments.ts';

const IMAGE: NewAttachment = { mediaType: 'image/png', data: Buffer.from('png'), source: null };
// The real registry over the package's catalog: its rule by name decides.
const models = new ModelRegistry({}, undefined, new ModelCatalog());

describe('checkImages', () => {
  test('no images: any model', () => {
    for (const attachments of [undefined, []])
      checkImages({ models }, 'openai:gpt-3.5-turbo', attachments);
  });

  test('images on a model that takes them', () => {
    checkImages({ models }, 'anthropic:claude-sonnet-4-5', [IMAGE]);
    checkImages({ models }, 'openai:gpt-4.1', [IMAGE]);
  });

  test('refused, naming why: a model without images', () => {
    const refused = (pattern: RegExp) => (err: unknown) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.status, 400);
      assert.match(err.message, pattern);
      return true;
    };
    assert.throws(
      () => checkImages({ models }, 'openai:gpt-3.5-turbo', [IMAGE]),
      refused(/model 'openai:gpt-3\.5-turbo' does not take images.*ERRAND_MODEL_CATALOG/),
    );
  });

  test("refused before the turn: an image over the vendor's own limit (Anthropic's 5 MB of base64)", () => {
    const sized = (bytes: number): NewAttachment => ({ ...IMAGE, data: Buffer.alloc(bytes) });
    const fits = (5 * 1024 * 1024 * 3) / 4;
    checkImages({ models }, 'anthropic:claude-sonnet-4-5', [sized(fits)]);
    assert.throws(
      () => checkImages({ models }, 'anthropic:claude-sonnet-4-5', [IMAGE, sized(fits + 1)]),
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
          'anthropic:claude-sonnet-4-5',
          Array.from({ length: 5 }, () => sized(fits)),
        ),
      /takes a request of at most 33554432 bytes/,
    );
    // OpenAI takes an image of up to 20 MB: Errand's own 5 MB bound is the one that holds.
    checkImages({ models }, 'openai:gpt-4.1', [sized(5 * 1024 * 1024)]);
  });
});
