// Reads a text/event-stream body into messages, as the WHATWG specification parses it (lines
// ending in \n, \r\n or \r; comments and unknown fields skipped), without EventSource: Node has
// none, and an EventSource cannot send the Authorization header.

export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

/** The messages of a stream in order; ends when the body ends. */
export async function* sseMessages(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<SseMessage, void, undefined> {
  const reader = body.getReader();
  // One decoder for the whole body: a character split across two chunks stays whole.
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | undefined;
  let event = '';
  let data: string[] = [];
  let sawField = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer);
        // A lone \r at the end may be the first half of \r\n: wait for more, if more can come.
        if (!match || (!done && match[0] === '\r' && match.index === buffer.length - 1)) break;
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === '') {
          if (sawField && data.length > 0)
            yield { id, event: event || 'message', data: data.join('\n') };
          event = '';
          data = [];
          sawField = false;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        const raw = colon < 0 ? '' : line.slice(colon + 1);
        const fieldValue = raw.startsWith(' ') ? raw.slice(1) : raw;
        if (name === 'data') data.push(fieldValue);
        else if (name === 'event') event = fieldValue;
        else if (name === 'id' && !fieldValue.includes('\0')) id = fieldValue;
        else continue;
        sawField = true;
      }
      // What is left is an unfinished message, which the format says to drop.
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
