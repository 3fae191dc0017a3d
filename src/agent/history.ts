// What a turn stores and the next one reads back: Errand's marks on stored messages, the job's
// conversation rebuilt from its turns, and the key order that makes a stored turn read back as
// its requests sent it.

import type { JSONValue, ModelMessage } from 'ai';
import { isToolResult } from './tool-results.ts';

/** Errand's own marks on stored messages, under providerOptions (no provider reads them). */
export const ERRAND = 'errand';

/**
 * What Errand keeps on the first message of a turn's stored messages when they stand for the
 * whole conversation before them (`fromStart`), on a compaction's summary message (`summary`,
 * and every user prompt it stands for, word for word), and on a turn's last message (the
 * provider's tokens per character of a request, so the next turn's first estimate is right).
 */
export interface ErrandMark {
  fromStart?: boolean;
  summary?: string;
  prompts?: string[];
  tokensPerChar?: number;
}

/**
 * The job's conversation as its next turn starts from it: each earlier turn's stored messages
 * in order, from the last turn whose messages stand for the whole conversation (it compacted or
 * masked earlier turns' messages).
 */
export function jobHistory(turns: readonly { messages: readonly unknown[] }[]): ModelMessage[] {
  let history: ModelMessage[] = [];
  for (const turn of turns) {
    const messages = turn.messages as ModelMessage[];
    if (messages.length > 0 && markOf(messages[0])?.fromStart) history = [...messages];
    else history.push(...messages);
  }
  return history;
}

export function markOf(message: ModelMessage | undefined): ErrandMark | undefined {
  const mark = message?.providerOptions?.[ERRAND];
  return mark && typeof mark === 'object' ? (mark as ErrandMark) : undefined;
}

export function withMark(message: ModelMessage, mark: ErrandMark): ModelMessage {
  const merged = { ...markOf(message), ...mark } as Record<
    string,
    string | boolean | number | string[]
  >;
  return { ...message, providerOptions: { ...message.providerOptions, [ERRAND]: merged } };
}

// --- the bytes of a request ---

/**
 * The message with the objects a provider sends as JSON (tool-call arguments, JSON tool output)
 * in the key order PostgreSQL's jsonb gives them back (shorter keys first, then by their UTF-8
 * bytes): a stored turn then reads back byte for byte as its requests sent it, and the next
 * turn's requests share the cached prefix.
 */
export function inStoredOrder(message: ModelMessage): ModelMessage {
  if (message.role === 'assistant' && typeof message.content !== 'string') {
    return {
      ...message,
      content: message.content.map((part) =>
        part.type === 'tool-call' ? { ...part, input: jsonbOrder(part.input) } : part,
      ),
    };
  }
  if (message.role === 'tool') {
    return {
      ...message,
      content: message.content.map((part) =>
        isToolResult(part) && (part.output.type === 'json' || part.output.type === 'error-json')
          ? {
              ...part,
              output: { ...part.output, value: jsonbOrder(part.output.value) as JSONValue },
            }
          : part,
      ),
    };
  }
  return message;
}

function jsonbOrder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(jsonbOrder);
  if (typeof value !== 'object' || value === null) return value;
  const keys = Object.keys(value).sort((a, b) => {
    const byLength = Buffer.byteLength(a) - Buffer.byteLength(b);
    return byLength !== 0 ? byLength : Buffer.compare(Buffer.from(a), Buffer.from(b));
  });
  const record = value as Record<string, unknown>;
  return Object.fromEntries(keys.map((k) => [k, jsonbOrder(record[k])]));
}
