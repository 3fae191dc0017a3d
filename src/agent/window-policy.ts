// The conversation's thresholds: how much of a model's window a turn's requests may fill before tool
// results are capped, masked or compacted. Only numbers here; Conversation (conversation.ts) applies them.

/** The window of a model the catalog does not know: that of most current open-weight models. */
export const DEFAULT_WINDOW_TOKENS = 128_000;

/**
 * The thresholds of one turn, in tokens, from the model's window (docs/turns.md says why):
 * - a request leaves room for its reply: `outputTokens` (the configured output limit, at most a
 *   quarter of the window), since providers count it against the window too;
 * - one tool result is capped at `resultCapTokens` (head and tail kept), like Claude Code's 25k
 *   for a file read;
 * - once a request passes `maskAt` (half the window, at most 128k), every tool result older
 *   than the most recent `keepToolTokens` of them (a tenth of the window, at most 20k) is masked
 *   at once: a batch, so the prefix stays the same until the next one;
 * - a request that would still pass `compactAt` (80 % of the window, and 95 % of what the reply
 *   leaves) compacts the older history, keeping the last `keepAfterCompaction` tokens of work.
 */
export interface WindowPolicy {
  windowTokens: number;
  outputTokens: number;
  resultCapTokens: number;
  keepToolTokens: number;
  maskAt: number;
  compactAt: number;
  keepAfterCompaction: number;
}

export function windowPolicy(windowTokens: number, maxOutputTokens: number): WindowPolicy {
  const outputTokens = Math.max(1, Math.min(maxOutputTokens, Math.floor(windowTokens / 4)));
  return {
    windowTokens,
    outputTokens,
    resultCapTokens: Math.min(25_000, Math.floor(windowTokens * 0.15)),
    keepToolTokens: Math.min(20_000, Math.floor(windowTokens * 0.1)),
    maskAt: Math.min(128_000, Math.floor(windowTokens * 0.5)),
    compactAt: Math.min(
      Math.floor(windowTokens * 0.8),
      Math.floor((windowTokens - outputTokens) * 0.95),
    ),
    keepAfterCompaction: Math.floor(windowTokens * 0.25),
  };
}

/**
 * Characters per token where a size must not depend on the turn (caps of tool results): a
 * little under what tokenizers give for code, so a cap errs on the small side.
 */
export const CAP_CHARS_PER_TOKEN = 3.5;
/** Tool results shorter than this are never masked: the placeholder would be as long. */
export const MASK_MIN_CHARS = 1_000;
/** Output of the summary that replaces the older history. */
export const SUMMARY_MAX_TOKENS = 8_000;
