// HTTP/1.1 over a raw TCP socket, for tests of what fetch cannot send or see: malformed
// requests, requests that stall half-way, connections the server closes, and every byte the
// server wrote back (so that a second, unexpected response shows).
import assert from 'node:assert/strict';
import net from 'node:net';

export interface RawExchange {
  /** Everything the server wrote, as latin1 text. */
  data: string;
  /** Whether the server closed the connection before `waitMs`. */
  closed: boolean;
  /** Milliseconds from connecting to the close (or to giving up). */
  elapsedMs: number;
}

/**
 * Connects to `port` on loopback, writes `chunks` (a string or a function of the socket, for
 * writes that wait for an answer), then reads until the server closes or `waitMs` passes.
 */
export function rawExchange(
  port: number,
  chunks: (string | ((socket: net.Socket, received: () => string) => void))[],
  waitMs: number,
): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ data, closed, elapsedMs: Date.now() - started });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1');
    });
    // A reset after the server's answer still counts as the server closing.
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') finish(true);
      else if (!done) {
        done = true;
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on('close', () => finish(true));
    socket.on('connect', () => {
      for (const chunk of chunks) {
        if (typeof chunk === 'string') socket.write(chunk);
        else chunk(socket, () => data);
      }
    });
  });
}

export interface RawResponse {
  status: number;
  statusLine: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/**
 * Splits what a server wrote into responses. Only Content-Length bodies are read (every
 * Errand response has one); anything else fails the assertion, so a response without a body
 * length, or trailing garbage, shows as a test failure.
 */
export function parseResponses(data: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = data;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    assert.ok(end > 0, `an incomplete response head: ${JSON.stringify(rest.slice(0, 300))}`);
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const match = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
    assert.ok(match, `not a status line: ${JSON.stringify(statusLine)}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(match[1]);
    // 1xx answers have no body.
    if (status < 200) {
      responses.push({ status, statusLine, headers, body: '' });
      rest = rest.slice(end + 4);
      continue;
    }
    const length = headers['content-length'];
    assert.ok(
      length !== undefined && /^\d+$/.test(length),
      `a response without Content-Length: ${JSON.stringify(rest.slice(0, 300))}`,
    );
    const body = rest.slice(end + 4, end + 4 + Number(length));
    assert.equal(body.length, Number(length), 'the response body was cut short');
    responses.push({ status, statusLine, headers, body });
    rest = rest.slice(end + 4 + Number(length));
  }
  return responses;
}

/** Asserts one of Errand's JSON errors: status, code, exactly {error, code, requestId}. */
export function assertRawError(res: RawResponse | undefined, status: number, code: string): void {
  assert.ok(res, `expected a ${status} ${code} response, got none`);
  assert.equal(
    res.status,
    status,
    `expected ${status} ${code}, got ${res.statusLine}: ${res.body}`,
  );
  assert.match(res.headers['content-type'] ?? '', /^application\/json/);
  const body: unknown = JSON.parse(res.body);
  assert.ok(typeof body === 'object' && body !== null && !Array.isArray(body));
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'requestId']);
  const fields = body as { error: unknown; code: unknown; requestId: unknown };
  assert.equal(fields.code, code);
  assert.ok(typeof fields.error === 'string' && fields.error.length > 0, 'empty error message');
  assert.ok(typeof fields.requestId === 'string');
  assert.match(fields.requestId, /^req_[0-9A-Za-z]{16}$/);
  assert.equal(res.headers['x-request-id'], fields.requestId);
}
