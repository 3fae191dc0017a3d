// The model catalog: each model's context window and list prices, from a maintained offline
// data package, overridden field by field by the operator's file (ERRAND_MODEL_CATALOG) for the
// models the package does not know (local and OpenAI-compatible ones) or knows wrong; and
// whether each takes images (vision.ts's rule, or the operator's `images`).

import { readFileSync } from 'node:fs';
import { calcPrice } from '@pydantic/genai-prices';
import { z } from 'zod';
import { ConfigError } from '../config.ts';
import type { TokenUsage } from '../jobs/usage.ts';
import { takesImagesByName } from './vision.ts';

/** List prices in US dollars per million tokens; a cache price is undefined when unknown. */
export interface ModelPrices {
  inputUsdPerMTok: number;
  outputUsdPerMTok: number;
  cacheReadUsdPerMTok: number | undefined;
  cacheWriteUsdPerMTok: number | undefined;
}

/** What the catalog knows of one model; each part is undefined when unknown. */
export interface ModelInfo {
  contextTokens: number | undefined;
  prices: ModelPrices | undefined;
  /** Whether a turn may give it images (docs/images.md). */
  images: boolean;
}

/** One entry of the operator's file: every field optional, each wins over the package. */
interface CatalogOverride {
  contextTokens?: number;
  inputUsdPerMTok?: number;
  outputUsdPerMTok?: number;
  cacheReadUsdPerMTok?: number;
  cacheWriteUsdPerMTok?: number;
  images?: boolean;
}

/** The operator's entries by `provider:model` id. */
export type CatalogOverrides = Readonly<Record<string, CatalogOverride>>;

const price = z.number().min(0).max(1_000_000);
const entrySchema = z.strictObject({
  contextTokens: z.number().int().min(1).max(1_000_000_000).optional(),
  inputUsdPerMTok: price.optional(),
  outputUsdPerMTok: price.optional(),
  cacheReadUsdPerMTok: price.optional(),
  cacheWriteUsdPerMTok: price.optional(),
  images: z.boolean().optional(),
});
const fileSchema = z.record(
  z.string().regex(/^[^:\s]+:\S+$/, 'must be a model id like provider:model'),
  entrySchema,
);

/**
 * The operator's catalog file (ERRAND_MODEL_CATALOG), read once at start-up. A file that cannot
 * be read or does not fit stops the start with a ConfigError naming the file and the field.
 */
export function readCatalogFile(file: string): CatalogOverrides {
  const fail = (why: string) =>
    new ConfigError(`invalid setting ERRAND_MODEL_CATALOG: ${file}: ${why}`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw fail(`cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw fail(`is not JSON (${(err as Error).message})`);
  }
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success) {
    throw fail(describeIssue(parsed.error.issues[0]));
  }
  return parsed.data;
}

// Names the model and the field, in the words of the file's own format.
function describeIssue(issue: z.core.$ZodIssue | undefined): string {
  if (!issue) return 'invalid value';
  const [model, field] = issue.path.map(String);
  const known = Object.keys(entrySchema.shape).join(', ');
  if (model === undefined) return 'must be a JSON object of "provider:model": { … } entries';
  if (issue.code === 'invalid_key') return `"${model}" is not a model id like provider:model`;
  if (issue.code === 'unrecognized_keys')
    return `"${model}": unknown field ${issue.keys.join(', ')} (known: ${known})`;
  if (field === undefined) return `"${model}": must be an object with some of ${known}`;
  const wanted = field === 'images' ? 'must be true or false' : 'must be a number';
  return `"${model}".${field}: ${issue.code === 'invalid_type' ? wanted : issue.message}`;
}

/** The catalog of one process: the package's data under the operator's overrides. */
export class ModelCatalog {
  readonly #overrides: CatalogOverrides;

  constructor(overrides: CatalogOverrides = {}) {
    this.#overrides = overrides;
  }

  /** What is known of `modelId` (`provider:model`). */
  info(modelId: string): ModelInfo {
    const over = this.#overrides[modelId];
    return {
      ...merge(fromPackage(modelId), over),
      images: over?.images ?? takesImagesByName(modelId),
    };
  }
}

// Errand's providers as the package names them. An OpenAI-compatible server (Ollama, vLLM,
// LiteLLM) serves models at prices only its operator knows, so those come from the file only.
const packageProviders: Readonly<Record<string, string>> = {
  anthropic: 'anthropic',
  openai: 'openai',
  google: 'google',
};

// Asked at each use rather than once: the package's prices can change on a date it knows.
function fromPackage(id: string): CatalogOverride {
  const colon = id.indexOf(':');
  const providerId = packageProviders[id.slice(0, colon)];
  if (colon <= 0 || providerId === undefined) return {};
  const found = calcPrice({}, id.slice(colon + 1), { providerId });
  if (!found) return {};
  const price = found.model_price;
  return {
    contextTokens: found.model.context_window,
    inputUsdPerMTok: basePrice(price.input_mtok),
    outputUsdPerMTok: basePrice(price.output_mtok),
    cacheReadUsdPerMTok: basePrice(price.cache_read_mtok),
    cacheWriteUsdPerMTok: basePrice(price.cache_write_mtok),
  };
}

// A price that rises past a number of input tokens in one request (long-context tiers) counts
// at its base: Errand keeps its requests under the model's standard window.
function basePrice(price: number | { base: number } | undefined): number | undefined {
  return typeof price === 'number' ? price : price?.base;
}

function merge(
  base: CatalogOverride,
  over: CatalogOverride | undefined,
): Omit<ModelInfo, 'images'> {
  const m: CatalogOverride = { ...base };
  for (const [key, value] of Object.entries(over ?? {})) {
    if (typeof value === 'number') m[key as Exclude<keyof CatalogOverride, 'images'>] = value;
  }
  const prices =
    m.inputUsdPerMTok === undefined || m.outputUsdPerMTok === undefined
      ? undefined
      : {
          inputUsdPerMTok: m.inputUsdPerMTok,
          outputUsdPerMTok: m.outputUsdPerMTok,
          cacheReadUsdPerMTok: m.cacheReadUsdPerMTok,
          cacheWriteUsdPerMTok: m.cacheWriteUsdPerMTok,
        };
  return { contextTokens: m.contextTokens, prices };
}

/**
 * What `usage` costs at `prices`, in US dollars: uncached input, cache reads, cache writes and
 * output, each at its own price. Null when the prices are unknown, or when tokens of a cache
 * kind were used whose price is unknown: a figure is never a guess.
 */
export function costOf(prices: ModelPrices | undefined, usage: TokenUsage): number | null {
  if (!prices) return null;
  const { cacheReadUsdPerMTok: readPrice, cacheWriteUsdPerMTok: writePrice } = prices;
  if (usage.cacheReadTokens > 0 && readPrice === undefined) return null;
  if (usage.cacheWriteTokens > 0 && writePrice === undefined) return null;
  const uncached = Math.max(0, usage.inputTokens - usage.cacheReadTokens - usage.cacheWriteTokens);
  const micros =
    uncached * prices.inputUsdPerMTok +
    usage.cacheReadTokens * (readPrice ?? 0) +
    usage.cacheWriteTokens * (writePrice ?? 0) +
    usage.outputTokens * prices.outputUsdPerMTok;
  return micros / 1_000_000;
}
