// What model calls used, said once for a step, a turn, a job and a project's month: tokens as
// the providers count them, and the cost in US dollars when the model's prices are known.
// `inputTokens` counts every input token; of those, `cacheReadTokens` were served from the
// provider's prompt cache and `cacheWriteTokens` were written to it (both priced apart).

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** Tokens and their cost: null when a price of the model is unknown (never a guess). */
export interface Usage extends TokenUsage {
  costUsd: number | null;
}

export const NO_TOKENS: TokenUsage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
});

/** The sum of two counts of tokens. */
export function addTokens(a: TokenUsage, b: TokenUsage): TokenUsage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  };
}

/** Nothing used yet: no tokens, and nothing spent. */
export const NO_USAGE: Usage = Object.freeze({ ...NO_TOKENS, costUsd: 0 });

/** The four counts of tokens of `usage`, and nothing else it carries. */
export function tokensOf(usage: TokenUsage): TokenUsage {
  const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens } = usage;
  return { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens };
}

/**
 * A stored usage (a jsonb column, an event's data) as a Usage: a count it lacks is 0 (turns
 * recorded before cache tokens were counted), a cost it lacks is unknown; undefined when it is
 * not a usage at all. Costs are given to the micro-dollar: sums of floating-point figures
 * otherwise show their rounding.
 */
export function readUsage(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const v = value as Record<string, unknown>;
  const count = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : 0);
  if (typeof v.inputTokens !== 'number' && typeof v.outputTokens !== 'number') return undefined;
  return {
    inputTokens: count(v.inputTokens),
    outputTokens: count(v.outputTokens),
    cacheReadTokens: count(v.cacheReadTokens),
    cacheWriteTokens: count(v.cacheWriteTokens),
    costUsd:
      typeof v.costUsd === 'number' && Number.isFinite(v.costUsd) ? roundUsd(v.costUsd) : null,
  };
}

/** US dollars to the micro-dollar. */
export function roundUsd(usd: number): number {
  return Math.round(usd * 1e6) / 1e6;
}
