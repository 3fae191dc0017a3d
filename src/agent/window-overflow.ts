// A provider's refusal of a request for its length: whether an error is one, and the window and
// request size it names, in each provider's wording.

const OVERFLOW_PATTERNS = [
  /prompt is too long/i, // Anthropic
  /exceed context limit/i, // Anthropic: input plus max_tokens
  /context_length_exceeded/i, // OpenAI, Azure, Groq, LiteLLM
  /maximum context length/i, // OpenAI, vLLM, DeepSeek, Mistral
  /exceeds the maximum number of tokens/i, // Google
  /context (?:size|window|length)[^.]{0,40}(?:exceed|too (?:long|large|small))/i,
  /exceeds? (?:the )?(?:available )?context (?:size|window|length)/i, // llama.cpp, others
  /exceed_context_size/i, // llama.cpp
  /(?:input|prompt) is too long/i, // Bedrock
  /too many (?:input )?tokens/i,
];

function errorTexts(error: unknown): string {
  const parts: string[] = [];
  let e: unknown = error;
  for (let depth = 0; depth < 3 && typeof e === 'object' && e !== null; depth++) {
    const record = e as {
      message?: unknown;
      responseBody?: unknown;
      lastError?: unknown;
      cause?: unknown;
    };
    if (typeof record.message === 'string') parts.push(record.message);
    if (typeof record.responseBody === 'string') parts.push(record.responseBody);
    e = record.lastError ?? record.cause;
  }
  return parts.join('\n');
}

function statusOf(error: unknown): number | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 3 && typeof e === 'object' && e !== null; depth++) {
    const record = e as { statusCode?: unknown; lastError?: unknown; cause?: unknown };
    if (typeof record.statusCode === 'number') return record.statusCode;
    e = record.lastError ?? record.cause;
  }
  return undefined;
}

/**
 * Whether a provider refused a request for being longer than the model's context window: a
 * 400 or 413 whose message says so in one of the providers' wordings.
 */
export function isWindowOverflow(error: unknown): boolean {
  const status = statusOf(error);
  if (status !== undefined && status !== 400 && status !== 413) return false;
  const text = errorTexts(error);
  return OVERFLOW_PATTERNS.some((p) => p.test(text));
}

/** The window and the request's tokens, where the refusal names them. */
export function overflowFacts(error: unknown): { windowTokens?: number; promptTokens?: number } {
  const text = errorTexts(error);
  const num = (re: RegExp, group = 1): number | undefined => {
    const m = text.match(re)?.[group];
    return m === undefined ? undefined : Number(m);
  };
  const windowTokens =
    num(/(\d+) tokens > (\d+) maximum/, 2) ?? // Anthropic
    num(/\d+ \+ \d+ > (\d+)/) ?? // Anthropic, with max_tokens
    num(/maximum context length is (\d+)/i) ?? // OpenAI, vLLM
    num(/maximum number of tokens allowed \((\d+)\)/i) ?? // Google
    num(/"n_ctx"\s*:\s*(\d+)/); // llama.cpp
  const promptTokens =
    num(/(\d+) tokens > \d+ maximum/) ??
    num(/(\d+) \+ \d+ > \d+/) ??
    num(/\((\d+) in the messages/) ??
    num(/resulted in (\d+) tokens/) ??
    num(/input token count \((\d+)\)/i) ??
    num(/"n_prompt_tokens"\s*:\s*(\d+)/);
  return {
    ...(windowTokens && windowTokens > 0 ? { windowTokens } : {}),
    ...(promptTokens && promptTokens > 0 ? { promptTokens } : {}),
  };
}
