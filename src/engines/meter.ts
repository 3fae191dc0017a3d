// What each model call used, read by the model proxy from the vendor's answer as it passes: the
// usage the vendor bills, whatever the engine reports of it and whenever it reports it (Codex
// says only when its turn ends). Anthropic Messages, OpenAI Responses and chat completions, each
// streamed (server-sent events) or whole (JSON).
import { isRecord } from '../client/records.ts';
import { NO_TOKENS, type TokenUsage } from '../jobs/usage.ts';
import type { AnswerObserver, ObservedAnswer } from '../sandbox/model-proxy.ts';

/** The API a path belongs to, as its answers carry usage. */
type Protocol = 'messages' | 'responses' | 'chat';

/** A whole JSON answer is read up to this size; no real answer comes near it. */
const MAX_JSON_BYTES = 16 * 1024 * 1024;
/** One server-sent event's data is read up to this size (a usage event is a few hundred bytes). */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

function protocolOf(path: string): Protocol | undefined {
  if (path === '/v1/messages') return 'messages';
  if (path === '/v1/responses') return 'responses';
  if (path === '/v1/chat/completions') return 'chat';
  return undefined;
}

/**
 * An observer for one answer of the model API, or undefined when the answer carries no usage
 * Errand can read (another path, an error status, a compressed body). `done` is called once, when
 * the answer has ended or was cut, with the tokens it named, or undefined when it named none.
 */
export function meterAnswer(
  answer: ObservedAnswer,
  done: (tokens: TokenUsage | undefined) => void,
): AnswerObserver | undefined {
  const protocol = protocolOf(answer.path);
  if (protocol === undefined || answer.status < 200 || answer.status > 299) return undefined;
  if (answer.contentEncoding !== '' && answer.contentEncoding !== 'identity') return undefined;
  const usage = new CallUsage(protocol);
  const streamed = answer.contentType.startsWith('text/event-stream');
  const decoder = new TextDecoder();
  let text = '';
  let tooLarge = false;
  let ended = false;
  return {
    data(chunk) {
      if (tooLarge) return;
      text += decoder.decode(chunk, { stream: true });
      if (streamed) text = readEvents(text, usage);
      if (text.length > (streamed ? MAX_EVENT_BYTES : MAX_JSON_BYTES)) {
        tooLarge = true;
        text = '';
      }
    },
    end() {
      if (ended) return;
      ended = true;
      if (!tooLarge) {
        text += decoder.decode();
        if (streamed) readEvents(`${text}\n\n`, usage);
        else usage.readWhole(parseJson(text));
      }
      done(usage.tokens());
    },
  };
}

/** Reads the complete events at the head of `text`; returns what is left (a partial event). */
function readEvents(text: string, usage: CallUsage): string {
  let rest = text.replace(/\r\n/g, '\n');
  for (let end = rest.indexOf('\n\n'); end !== -1; end = rest.indexOf('\n\n')) {
    const data = rest
      .slice(0, end)
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
      .join('\n');
    rest = rest.slice(end + 2);
    if (data !== '' && data !== '[DONE]') usage.readEvent(parseJson(data));
  }
  return rest;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Not an answer with usage (a keep-alive, a truncated body): it names no tokens.
    return undefined;
  }
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** The usage one call's answer has named so far, in the vendor's own fields. */
class CallUsage {
  readonly #protocol: Protocol;
  #input: number | undefined;
  #output: number | undefined;
  #cacheRead: number | undefined;
  #cacheWrite: number | undefined;

  constructor(protocol: Protocol) {
    this.#protocol = protocol;
  }

  /** A whole JSON answer. */
  readWhole(body: unknown): void {
    if (isRecord(body)) this.#read(body.usage);
  }

  /** One streamed event's data. */
  readEvent(event: unknown): void {
    if (!isRecord(event)) return;
    switch (this.#protocol) {
      case 'messages':
        // message_start carries the input (and the first output) counts; each message_delta
        // the counts so far, which end as the call's.
        if (event.type === 'message_start' && isRecord(event.message)) {
          this.#read(event.message.usage);
        } else if (event.type === 'message_delta') this.#read(event.usage);
        return;
      case 'responses':
        // The response's last event (completed, incomplete or failed) holds its usage.
        if (isRecord(event.response) && isRecord(event.response.usage)) {
          this.#read(event.response.usage);
        }
        return;
      case 'chat':
        // With stream_options.include_usage, the last chunk before [DONE].
        this.#read(event.usage);
        return;
    }
  }

  #read(usage: unknown): void {
    if (!isRecord(usage)) return;
    if (this.#protocol === 'messages') {
      this.#input = num(usage.input_tokens) ?? this.#input;
      this.#output = num(usage.output_tokens) ?? this.#output;
      this.#cacheRead = num(usage.cache_read_input_tokens) ?? this.#cacheRead;
      this.#cacheWrite = num(usage.cache_creation_input_tokens) ?? this.#cacheWrite;
      return;
    }
    const chat = this.#protocol === 'chat';
    const details = chat ? usage.prompt_tokens_details : usage.input_tokens_details;
    this.#input = num(chat ? usage.prompt_tokens : usage.input_tokens) ?? this.#input;
    this.#output = num(chat ? usage.completion_tokens : usage.output_tokens) ?? this.#output;
    this.#cacheRead =
      (isRecord(details) ? num(details.cached_tokens) : undefined) ?? this.#cacheRead;
  }

  /** As Errand counts tokens (inputTokens includes the cached ones), or undefined if none named. */
  tokens(): TokenUsage | undefined {
    if (this.#input === undefined && this.#output === undefined) return undefined;
    const cacheRead = this.#cacheRead ?? 0;
    const cacheWrite = this.#cacheWrite ?? 0;
    return {
      ...NO_TOKENS,
      // Anthropic's input_tokens leaves out what was read from or written to the cache; OpenAI's
      // counts the cached ones already.
      inputTokens:
        (this.#input ?? 0) + (this.#protocol === 'messages' ? cacheRead + cacheWrite : 0),
      outputTokens: this.#output ?? 0,
      cacheReadTokens: cacheRead,
      cacheWriteTokens: cacheWrite,
    };
  }
}
