import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { generateText } from 'ai';
import { reply, startFakeLlm } from '../../test/support/fake-llm.ts';
import type { ModelSettings } from '../config.ts';
import {
  checkModelId,
  DEFAULT_MODEL_ID,
  describeModel,
  ModelRegistry,
  resolveModel,
} from './models.ts';

const SECRET = 'sk-very-secret-value';
const all: ModelSettings = {
  anthropic: { apiKey: SECRET },
  openai: { apiKey: SECRET },
  google: { apiKey: SECRET },
  openaiCompatible: { baseURL: 'http://127.0.0.1:9/v1' },
};

describe('checkModelId', () => {
  it('accepts every provider once it is configured', () => {
    for (const id of [
      'anthropic:claude-x',
      'openai:gpt-x',
      'google:gemini-x',
      'openai-compatible:qwen2.5-coder:7b',
      DEFAULT_MODEL_ID,
    ]) {
      assert.deepEqual(checkModelId(id, all), { ok: true }, id);
    }
  });

  it('names the setting a provider is missing', () => {
    const cases: Array<[string, string]> = [
      ['anthropic:claude-x', 'ANTHROPIC_API_KEY'],
      ['openai:gpt-x', 'OPENAI_API_KEY'],
      ['google:gemini-x', 'GOOGLE_GENERATIVE_AI_API_KEY'],
      ['openai-compatible:llama3', 'ERRAND_OPENAI_COMPATIBLE_BASE_URL'],
    ];
    for (const [id, setting] of cases) {
      assert.deepEqual(checkModelId(id, {}), {
        ok: false,
        message: `model '${id}' needs ${setting} to be set on the server`,
      });
    }
    // A blank value counts as missing; an openai-compatible server needs no key.
    assert.equal(checkModelId('openai:gpt-x', { openai: { apiKey: '  ' } }).ok, false);
    assert.equal(
      checkModelId('openai-compatible:llama3', { openaiCompatible: { baseURL: 'http://h/v1' } }).ok,
      true,
    );
  });

  it('explains an unknown provider and a malformed id', () => {
    assert.deepEqual(checkModelId('foo:bar', all), {
      ok: false,
      message:
        "unknown provider 'foo' in model id 'foo:bar'; use anthropic:, openai:, google: or openai-compatible:",
    });
    for (const id of ['claude', ':x', 'openai:', 'openai: gpt', 'openai:gpt\n', '']) {
      const result = checkModelId(id, all);
      assert.equal(result.ok, false, JSON.stringify(id));
      assert.match(result.ok ? '' : result.message, /^model id must look like provider:model/);
    }
  });

  it('never puts a key into a message', () => {
    for (const id of ['foo:bar', 'nope', 'openai:x']) {
      const result = checkModelId(id, { anthropic: { apiKey: SECRET } });
      assert.ok(!JSON.stringify(result).includes(SECRET));
    }
  });
});

describe('resolveModel', () => {
  it('throws the checkModelId message', () => {
    assert.throws(() => resolveModel('openai:gpt-x', {}), {
      message: "model 'openai:gpt-x' needs OPENAI_API_KEY to be set on the server",
    });
    assert.throws(() => resolveModel('foo:bar', all), /unknown provider 'foo'/);
  });

  it('builds models that describe themselves by their Errand id', () => {
    assert.deepEqual(describeModel(resolveModel('anthropic:claude-x', all)), {
      id: 'anthropic:claude-x',
      credentialHint: 'ANTHROPIC_API_KEY',
    });
    assert.deepEqual(describeModel(resolveModel('openai:gpt-x', all)), {
      id: 'openai:gpt-x',
      credentialHint: 'OPENAI_API_KEY',
    });
    assert.deepEqual(describeModel(resolveModel('google:gemini-x', all)), {
      id: 'google:gemini-x',
      credentialHint: 'GOOGLE_GENERATIVE_AI_API_KEY',
    });
    assert.equal(
      describeModel(resolveModel('openai-compatible:qwen:7b', all)).id,
      'openai-compatible:qwen:7b',
    );
  });

  it('talks to an OpenAI-compatible server at its base URL with its key', async () => {
    const fake = await startFakeLlm({ apiKey: 'local-key', models: ['qwen2.5-coder:7b'] });
    after(() => fake.close());
    fake.script(reply('hello from local'));
    const model = resolveModel('openai-compatible:qwen2.5-coder:7b', {
      openaiCompatible: { baseURL: `${fake.url}/v1`, apiKey: 'local-key' },
    });
    const result = await generateText({ model, prompt: 'hi', maxOutputTokens: 20 });
    assert.equal(result.text, 'hello from local');
    assert.equal(fake.requests[0]?.path, '/v1/chat/completions');
    fake.assertDone();
  });

  it('sends requests through a given fetch', async () => {
    const fake = await startFakeLlm({ apiKey: 'k', models: ['gpt-x'] });
    after(() => fake.close());
    fake.script(reply('ok'));
    const seen: string[] = [];
    const model = resolveModel('openai:gpt-x', {
      openai: { apiKey: 'k', baseURL: `${fake.url}/v1` },
      fetch: (url, init) => {
        seen.push(String(url));
        return fetch(url, init);
      },
    });
    await generateText({ model, prompt: 'hi', maxOutputTokens: 20 });
    assert.deepEqual(seen, [`${fake.url}/v1/chat/completions`]);
    fake.assertDone();
  });
});

describe('ModelRegistry', () => {
  it('makes each model once and gives every later turn the same one', () => {
    const registry = new ModelRegistry(all);
    const first = registry.resolve('openai:gpt-x');
    assert.equal(registry.resolve('openai:gpt-x'), first);
    assert.notEqual(registry.resolve('openai:gpt-y'), first);
    assert.deepEqual(describeModel(first), {
      id: 'openai:gpt-x',
      credentialHint: 'OPENAI_API_KEY',
    });
  });

  it('checks and refuses with the settings it was built with', () => {
    const registry = new ModelRegistry({ openai: { apiKey: SECRET } });
    assert.deepEqual(registry.check('openai:gpt-x'), { ok: true });
    const refused = registry.check('anthropic:claude-x');
    assert.equal(refused.ok, false);
    assert.match(refused.ok ? '' : refused.message, /ANTHROPIC_API_KEY/);
    assert.throws(() => registry.resolve('anthropic:claude-x'), /ANTHROPIC_API_KEY/);
  });
});
