// A Server-Sent Events client for tests, on node:http so a test controls the socket (pause a
// slow reader, see comments and the end of the stream). eventsource-parser reads the
// text/event-stream format as the WHATWG specification describes it, comments included, which
// browsers drop. (errand/client has a parser of its own: it may depend on nothing.)
import http from 'node:http';
import { createParser } from 'eventsource-parser';

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body as text, when the answer was not a stream (an error). */
  body: string;
  events: SseEvent[];
  comments: string[];
  /** Resolves when the server ended the stream (or the connection closed). */
  ended: Promise<void>;
  /** Resolves with the events once `count` have arrived; rejects after `timeoutMs`. */
  take(count: number, timeoutMs?: number): Promise<SseEvent[]>;
  /** The response, to pause or resume reading. */
  response: http.IncomingMessage | undefined;
  close(): void;
}

export interface SseOptions {
  key?: string;
  headers?: Record<string, string>;
}

export function openSse(url: string, opts: SseOptions = {}): Promise<SseStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers });
    request.on('error', reject);
    request.on('response', (response) => {
      const events: SseEvent[] = [];
      const comments: string[] = [];
      const waiters: Array<() => void> = [];
      let body = '';
      const parser = createParser({
        onEvent: ({ id, event, data }) => {
          events.push({ id, event: event ?? 'message', data });
        },
        onComment: (comment) => {
          comments.push(comment.trim());
        },
      });
      let endResolve: () => void = () => {};
      const ended = new Promise<void>((r) => {
        endResolve = r;
      });
      const isStream = String(response.headers['content-type']).startsWith('text/event-stream');
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        if (!isStream) {
          body += chunk;
          return;
        }
        parser.feed(chunk);
        for (const wake of waiters.splice(0)) wake();
      });
      const finish = () => {
        endResolve();
        for (const wake of waiters.splice(0)) wake();
      };
      response.on('end', finish);
      response.on('close', finish);
      response.on('error', finish);
      let done = false;
      void ended.then(() => {
        done = true;
      });
      const stream: SseStream = {
        status: response.statusCode ?? 0,
        headers: response.headers,
        get body() {
          return body;
        },
        events,
        comments,
        ended,
        response,
        async take(count, timeoutMs = 10_000) {
          const deadline = Date.now() + timeoutMs;
          while (events.length < count) {
            if (done) throw new Error(`stream ended after ${events.length} of ${count} events`);
            const left = deadline - Date.now();
            if (left <= 0) throw new Error(`timed out with ${events.length} of ${count} events`);
            await new Promise<void>((wake) => {
              const timer = setTimeout(wake, left);
              waiters.push(() => {
                clearTimeout(timer);
                wake();
              });
            });
          }
          return events.slice(0, count);
        },
        close() {
          request.destroy();
        },
      };
      if (!isStream) response.on('end', () => resolve(stream));
      else resolve(stream);
    });
  });
}
