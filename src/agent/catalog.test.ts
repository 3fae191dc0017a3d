// The model catalog: context windows and list prices from the data package, the operator's
// file over it field by field, the cost of a usage from them, and a bad file refused at start
// with the file and the field named.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../config.ts';
import { startService } from '../service.ts';
import { costOf, ModelCatalog, readCatalogFile } from './catalog.ts';
import { ModelRegistry } from './models.ts';

const NO_CACHE = { cacheReadTokens: 0, cacheWriteTokens: 0 };

describe('the model catalog', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'errand-catalog-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const file = async (name: string, text: string) => {
    const at = path.join(dir, name);
    await writeFile(at, text);
    return at;
  };

  test("the package knows the providers' models: their window and list prices, cache prices included", () => {
    const catalog = new ModelCatalog();
    assert.deepEqual(catalog.info('anthropic:claude-sonnet-4-5'), {
      contextTokens: 200_000,
      prices: {
        inputUsdPerMTok: 3,
        outputUsdPerMTok: 15,
        cacheReadUsdPerMTok: 0.3,
        cacheWriteUsdPerMTok: 3.75,
      },
      images: true,
    });
    // A dated id is the same model.
    assert.deepEqual(
      catalog.info('anthropic:claude-sonnet-4-5-20250929'),
      catalog.info('anthropic:claude-sonnet-4-5'),
    );
    const gpt = catalog.info('openai:gpt-4o');
    assert.equal(gpt.contextTokens, 128_000);
    assert.equal(gpt.prices?.inputUsdPerMTok, 2.5);
    assert.equal(gpt.prices?.cacheReadUsdPerMTok, 1.25);
    // OpenAI does not bill cache writes: no price, and none needed.
    assert.equal(gpt.prices?.cacheWriteUsdPerMTok, undefined);
    assert.equal(catalog.info('google:gemini-2.5-flash').contextTokens, 1_048_576);
    assert.ok(catalog.info('google:gemini-2.5-flash').prices);
  });

  test('a model neither knows has no window and no prices: an OpenAI-compatible server is never guessed', () => {
    const catalog = new ModelCatalog();
    for (const id of [
      'openai-compatible:qwen2.5-coder:7b',
      // The same name as an OpenAI model, served by someone else at their own price.
      'openai-compatible:gpt-4o',
      'anthropic:no-such-model',
    ])
      assert.deepEqual(
        catalog.info(id),
        { contextTokens: undefined, prices: undefined, images: false },
        id,
      );
  });

  test("the operator's file wins over the package, field by field, and adds the models it lacks", async () => {
    const at = await file(
      'catalog.json',
      JSON.stringify({
        'anthropic:claude-sonnet-4-5': { contextTokens: 1_000_000, cacheWriteUsdPerMTok: 6 },
        'openai-compatible:qwen2.5-coder:32b': {
          contextTokens: 32_768,
          inputUsdPerMTok: 0.2,
          outputUsdPerMTok: 0.6,
          images: true,
        },
        // Half a price is no price.
        'openai-compatible:half': { inputUsdPerMTok: 1 },
      }),
    );
    const catalog = new ModelCatalog(readCatalogFile(at));
    assert.deepEqual(catalog.info('anthropic:claude-sonnet-4-5'), {
      contextTokens: 1_000_000,
      prices: {
        inputUsdPerMTok: 3,
        outputUsdPerMTok: 15,
        cacheReadUsdPerMTok: 0.3,
        cacheWriteUsdPerMTok: 6,
      },
      images: true,
    });
    assert.deepEqual(catalog.info('openai-compatible:qwen2.5-coder:32b'), {
      contextTokens: 32_768,
      prices: {
        inputUsdPerMTok: 0.2,
        outputUsdPerMTok: 0.6,
        cacheReadUsdPerMTok: undefined,
        cacheWriteUsdPerMTok: undefined,
      },
      images: true,
    });
    assert.deepEqual(catalog.info('openai-compatible:half'), {
      contextTokens: undefined,
      prices: undefined,
      images: false,
    });
    // Through the registry, as the agent and the job core ask.
    const registry = new ModelRegistry({}, undefined, catalog);
    assert.equal(registry.info('openai-compatible:qwen2.5-coder:32b').contextTokens, 32_768);
    const tokens = { inputTokens: 2_000_000, outputTokens: 1_000_000, ...NO_CACHE };
    assert.equal(registry.costOf('openai-compatible:qwen2.5-coder:32b', tokens), 1);
    assert.deepEqual(registry.usage('openai-compatible:qwen2.5-coder:32b', tokens), {
      ...tokens,
      costUsd: 1,
    });
    assert.deepEqual(registry.usage('openai-compatible:half', tokens), {
      ...tokens,
      costUsd: null,
    });
  });

  test("which models take images: each vendor's rule by name, a catalog entry over it", async () => {
    const catalog = new ModelCatalog(
      readCatalogFile(
        await file(
          'images.json',
          JSON.stringify({
            'openai-compatible:llava': { images: true },
            'anthropic:claude-sonnet-4-5': { images: false },
          }),
        ),
      ),
    );
    const takes = (id: string) => catalog.info(id).images;
    for (const id of [
      'anthropic:claude-opus-4-1',
      'anthropic:claude-3-5-sonnet-20241022',
      'openai:gpt-4o',
      'openai:gpt-4.1-mini',
      'openai:gpt-5',
      'openai:o3',
      'google:gemini-2.5-pro',
      'openai-compatible:llava',
    ])
      assert.equal(takes(id), true, id);
    for (const id of [
      'anthropic:claude-3-5-haiku-20241022',
      'anthropic:claude-2.1',
      'openai:gpt-3.5-turbo',
      'openai:o3-mini',
      'openai-compatible:gpt-4o',
      'openai-compatible:qwen2.5-coder:7b',
      // The operator's word wins over the rule.
      'anthropic:claude-sonnet-4-5',
    ])
      assert.equal(takes(id), false, id);
  });

  test('a cost: uncached input, cache reads, cache writes and output, each at its price; null for a price unknown', () => {
    const prices = {
      inputUsdPerMTok: 3,
      outputUsdPerMTok: 15,
      cacheReadUsdPerMTok: 0.3,
      cacheWriteUsdPerMTok: 3.75,
    };
    // 1M input, of which 400k read from the cache and 100k written to it: 500k uncached.
    const usage = {
      inputTokens: 1_000_000,
      outputTokens: 100_000,
      cacheReadTokens: 400_000,
      cacheWriteTokens: 100_000,
    };
    const cost = costOf(prices, usage);
    assert.ok(cost !== null);
    assert.ok(Math.abs(cost - (1.5 + 0.12 + 0.375 + 1.5)) < 1e-12, String(cost));
    assert.equal(costOf(prices, { inputTokens: 0, outputTokens: 0, ...NO_CACHE }), 0);
    assert.equal(costOf(undefined, usage), null);
    const noCachePrices = {
      ...prices,
      cacheReadUsdPerMTok: undefined,
      cacheWriteUsdPerMTok: undefined,
    };
    assert.equal(costOf(noCachePrices, usage), null, 'cache reads at an unknown price');
    assert.equal(costOf(noCachePrices, { ...usage, cacheReadTokens: 0 }), null, 'cache writes');
    // No cache tokens: no cache price needed.
    assert.equal(costOf(noCachePrices, { ...usage, ...NO_CACHE }), 4.5);
  });

  test('a bad file is refused at start, naming the setting, the file and the field', async () => {
    const cases: [string, string, RegExp][] = [
      ['missing.json', '', /missing\.json: cannot be read \(ENOENT\)/],
      ['broken.json', '{"a:b": ', /broken\.json: is not JSON/],
      ['array.json', '[]', /must be a JSON object of "provider:model"/],
      ['key.json', '{"qwen": {}}', /"qwen" is not a model id like provider:model/],
      [
        'typo.json',
        '{"openai-compatible:q": {"inputUsd": 1}}',
        /"openai-compatible:q": unknown field inputUsd \(known: contextTokens, inputUsdPerMTok/,
      ],
      [
        'type.json',
        '{"openai-compatible:q": {"outputUsdPerMTok": "0.5"}}',
        /"openai-compatible:q"\.outputUsdPerMTok: must be a number/,
      ],
      [
        'images.json',
        '{"openai-compatible:q": {"images": "yes"}}',
        /"openai-compatible:q"\.images: must be true or false/,
      ],
      [
        'negative.json',
        '{"openai-compatible:q": {"contextTokens": 0}}',
        /"openai-compatible:q"\.contextTokens: /,
      ],
    ];
    for (const [name, text, message] of cases) {
      const at = name === 'missing.json' ? path.join(dir, name) : await file(name, text);
      const config = loadConfig({
        ERRAND_DATA_DIR: path.join(dir, 'data'),
        ERRAND_MODEL_CATALOG: at,
        ERRAND_LOG_LEVEL: 'silent',
      });
      assert.equal(config.modelCatalogFile, at);
      // Refused before anything starts: no database is opened for it.
      await assert.rejects(startService(config, { api: true, worker: false }), (err: unknown) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.match(err.message, /^invalid setting ERRAND_MODEL_CATALOG: /);
        assert.ok(err.message.includes(at), err.message);
        assert.match(err.message, message);
        return true;
      });
    }
  });
});
