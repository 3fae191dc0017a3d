// The job core's check of a turn's images once its model and engine are known: none is always
// fine; images need a model that takes them and Errand's own agent.
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

  test("images on a model that takes them, on Errand's own agent", () => {
    checkImages({ models }, project('errand'), 'anthropic:claude-sonnet-4-5', [IMAGE]);
  });

  test('refused, naming why: a model without images, an engine that is not given them', () => {
    const refused = (pattern: RegExp) => (err: unknown) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.status, 400);
      assert.match(err.message, pattern);
      return true;
    };
    assert.throws(
      () => checkImages({ models }, project('errand'), 'openai:gpt-3.5-turbo', [IMAGE]),
      refused(/model 'openai:gpt-3\.5-turbo' does not take images.*ERRAND_MODEL_CATALOG/),
    );
    for (const engine of ['claude-code', 'codex', 'opencode'] as const)
      assert.throws(
        () => checkImages({ models }, project(engine), 'anthropic:claude-sonnet-4-5', [IMAGE]),
        refused(new RegExp(`the ${engine} engine of project prj_1 is not given images`)),
      );
  });
});
