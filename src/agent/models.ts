// The model registry: turns a `provider:model` id into an AI SDK language model, using only the
// settings it is given (the config module maps the environment onto them). Every provider gets
// its key and base URL explicitly, so the SDK never falls back to reading process.env itself.

import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogle } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import type { ModelSettings } from '../config.ts';
import type { TokenUsage, Usage } from '../jobs/usage.ts';
import { costOf, ModelCatalog, type ModelInfo } from './catalog.ts';

export const DEFAULT_MODEL_ID = 'anthropic:claude-sonnet-4-5';

type ProviderId = 'anthropic' | 'openai' | 'google' | 'openai-compatible';

type ProviderDefinition = {
  /** What an operator sets to fix a missing or refused credential. */
  credentialHint: string;
  /** Returns the name of the missing setting, if any. */
  missing: (s: ModelSettings) => string | undefined;
  create: (s: ModelSettings, modelId: string) => LanguageModel;
};

const present = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';

// Default base URLs are spelled out so the SDK does not look for *_BASE_URL in the environment.
const providers = new Map<ProviderId, ProviderDefinition>([
  [
    'anthropic',
    {
      credentialHint: 'ANTHROPIC_API_KEY',
      missing: (s) => (present(s.anthropic?.apiKey) ? undefined : 'ANTHROPIC_API_KEY'),
      create: (s, modelId) =>
        createAnthropic({
          apiKey: s.anthropic?.apiKey,
          baseURL: nonBlank(s.anthropic?.baseURL) ?? 'https://api.anthropic.com/v1',
          name: 'anthropic',
          fetch: s.fetch,
        })(modelId),
    },
  ],
  [
    'openai',
    {
      credentialHint: 'OPENAI_API_KEY',
      missing: (s) => (present(s.openai?.apiKey) ? undefined : 'OPENAI_API_KEY'),
      // Chat Completions rather than the Responses API: every OpenAI-style proxy a base URL can
      // point at (Azure, LiteLLM, gateways) speaks it.
      create: (s, modelId) =>
        createOpenAI({
          apiKey: s.openai?.apiKey,
          baseURL: nonBlank(s.openai?.baseURL) ?? 'https://api.openai.com/v1',
          name: 'openai',
          fetch: s.fetch,
        }).chat(modelId),
    },
  ],
  [
    'google',
    {
      credentialHint: 'GOOGLE_GENERATIVE_AI_API_KEY',
      missing: (s) => (present(s.google?.apiKey) ? undefined : 'GOOGLE_GENERATIVE_AI_API_KEY'),
      create: (s, modelId) =>
        createGoogle({
          apiKey: s.google?.apiKey,
          baseURL: nonBlank(s.google?.baseURL),
          name: 'google',
          fetch: s.fetch,
        })(modelId),
    },
  ],
  [
    'openai-compatible',
    {
      credentialHint: 'ERRAND_OPENAI_COMPATIBLE_API_KEY',
      missing: (s) =>
        present(s.openaiCompatible?.baseURL) ? undefined : 'ERRAND_OPENAI_COMPATIBLE_BASE_URL',
      create: (s, modelId) =>
        createOpenAICompatible({
          name: 'openai-compatible',
          baseURL: s.openaiCompatible?.baseURL ?? '',
          apiKey: nonBlank(s.openaiCompatible?.apiKey),
          // Token budgets need usage on streamed answers; Ollama, vLLM and LiteLLM send it.
          includeUsage: true,
          fetch: s.fetch,
        }).chatModel(modelId),
    },
  ],
]);

const providerList = 'anthropic:, openai:, google: or openai-compatible:';

type ParsedId = { ok: true; provider: ProviderDefinition; modelId: string };
type Problem = { ok: false; message: string };

function parse(id: string): ParsedId | Problem {
  // Split at the first colon only: local model names carry tags like `qwen2.5-coder:7b`.
  const colon = id.indexOf(':');
  const providerId = id.slice(0, colon);
  const modelId = id.slice(colon + 1);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (colon <= 0 || modelId.trim() === '' || /[\s\u0000-\u001f]/.test(id) || id.length > 200) {
    return { ok: false, message: `model id must look like provider:model (got '${clip(id)}')` };
  }
  const provider = providers.get(providerId as ProviderId);
  if (!provider) {
    return {
      ok: false,
      message: `unknown provider '${clip(providerId)}' in model id '${clip(id)}'; use ${providerList}`,
    };
  }
  return { ok: true, provider, modelId };
}

/** Says whether `id` can be used with these settings, and if not, exactly what to set. */
export function checkModelId(id: string, settings: ModelSettings): { ok: true } | Problem {
  const parsed = parse(id);
  if (!parsed.ok) return parsed;
  const missing = parsed.provider.missing(settings);
  if (missing) {
    return { ok: false, message: `model '${id}' needs ${missing} to be set on the server` };
  }
  return { ok: true };
}

/** The language model for `id`; throws with checkModelId's message when it cannot be used. */
export function resolveModel(id: string, settings: ModelSettings): LanguageModel {
  const check = checkModelId(id, settings);
  if (!check.ok) throw new Error(check.message);
  const parsed = parse(id) as ParsedId;
  return parsed.provider.create(settings, parsed.modelId);
}

/**
 * The models this process can use, built once at start-up from its settings and reached
 * through the application context: a model is made on its first use and reused after that.
 */
export class ModelRegistry {
  readonly #settings: ModelSettings;
  readonly #models = new Map<string, LanguageModel>();
  readonly #catalog: ModelCatalog;
  /** The model a job runs on when neither it nor its project names one (ERRAND_MODEL). */
  readonly defaultId: string;

  constructor(
    settings: ModelSettings,
    defaultId: string = DEFAULT_MODEL_ID,
    catalog: ModelCatalog = new ModelCatalog(),
  ) {
    this.#settings = settings;
    this.defaultId = defaultId;
    this.#catalog = catalog;
  }

  /** The context window and list prices of `modelId` (`provider:model`), each when known. */
  info(modelId: string): ModelInfo {
    return this.#catalog.info(modelId);
  }

  /** What `usage` costs on `modelId` in US dollars; null when a price it needs is unknown. */
  costOf(modelId: string, usage: TokenUsage): number | null {
    return costOf(this.#catalog.info(modelId).prices, usage);
  }

  /** `usage` with its cost on `modelId`, as turns, events and the job record carry it. */
  usage(modelId: string, usage: TokenUsage): Usage {
    const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens } = usage;
    const tokens = { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens };
    return { ...tokens, costUsd: this.costOf(modelId, tokens) };
  }

  /** Says whether `id` can be used here, and if not, exactly what to set. */
  check(id: string): { ok: true } | Problem {
    return checkModelId(id, this.#settings);
  }

  /** The language model for `id`; throws with check's message when it cannot be used. */
  resolve(id: string): LanguageModel {
    let model = this.#models.get(id);
    if (!model) {
      model = resolveModel(id, this.#settings);
      this.#models.set(id, model);
    }
    return model;
  }
}

/**
 * The `provider:model` id of a model made by resolveModel, and the setting that holds its
 * credential, for error messages that tell the operator what to check.
 */
export function describeModel(model: LanguageModel): { id: string; credentialHint?: string } {
  if (typeof model === 'string') return { id: model };
  const providerId = model.provider.split('.')[0] ?? model.provider;
  const credentialHint = providers.get(providerId as ProviderId)?.credentialHint;
  return { id: `${providerId}:${model.modelId}`, ...(credentialHint && { credentialHint }) };
}

function nonBlank(v: string | undefined): string | undefined {
  return present(v) ? v : undefined;
}

// Ids come from API clients; keep echoes of them short.
function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
