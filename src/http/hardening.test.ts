// Hostile clients against a real service: bodies nested far deeper than any route needs,
// clients that stall while sending, and requests malformed at the level of HTTP itself. Each
// gets an answer in Errand's {error, code, requestId} shape where HTTP allows a body, the
// connection is closed when the client is too slow, and nothing is written.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  assertRawError,
  parseResponses,
  type RawExchange,
  rawExchange,
} from '../../test/support/raw-http.ts';
import {
  assertError,
  createRouteFixture,
  type RouteFixture,
  unchanged,
} from '../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../test/support/service.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { MAX_BODY_DEPTH } from './nul.ts';

// Short enough for a test, long enough that a loaded machine does not trip them by accident.
const REQUEST_TIMEOUT_S = 4;
const HEADERS_TIMEOUT_S = 3;
const KEEP_ALIVE_TIMEOUT_S = 2;
// Without the timeouts these connections stay open for minutes; with them, a few seconds.
const CLOSED_WITHIN_MS = 30_000;
// How long a shape test waits for a connection the server should close at once.
const ANSWER_WITHIN_MS = 15_000;

/**
 * A chunk for rawExchange that sends one character of `text` every 300 ms, until the server
 * closes: the connection is never idle, so only the request and headers timeouts can end it.
 */
function trickle(text: string): (socket: Socket) => void {
  return (socket) => {
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < text.length && !socket.destroyed) socket.write(text[sent++] ?? '');
    }, 300);
    socket.on('close', () => clearInterval(timer));
  };
}

function nestedArrays(levels: number, inner: unknown = 1): unknown {
  let value: unknown = inner;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

describe('HTTP hardening', () => {
  let svc: TestService;
  let fx: RouteFixture;
  let port: number;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: {
        ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS: String(REQUEST_TIMEOUT_S),
        ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS: String(HEADERS_TIMEOUT_S),
        ERRAND_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: String(KEEP_ALIVE_TIMEOUT_S),
      },
    });
    fx = await createRouteFixture(svc);
    port = Number(new URL(svc.url).port);
  });
  after(async () => {
    await svc?.close();
  });

  /** The routes that read a JSON body, each with a key that may use it. */
  const bodyRoutes = () => [
    { method: 'POST', path: `/v2/agent/${fx.project.id}/job`, key: fx.projectKey },
    {
      method: 'POST',
      path: `/v2/agent/${fx.project.id}/job/${fx.jobId}/message`,
      key: fx.projectKey,
    },
    { method: 'POST', path: '/v2/admin/projects', key: svc.adminKey },
    { method: 'PATCH', path: `/v2/admin/projects/${fx.project.id}`, key: svc.adminKey },
    { method: 'POST', path: '/v2/admin/keys', key: svc.adminKey },
  ];

  describe('settings', () => {
    test('the server runs with the configured timeouts', () => {
      const server = svc.service.app?.server;
      assert.ok(server);
      assert.equal(server.requestTimeout, REQUEST_TIMEOUT_S * 1000);
      assert.equal(server.headersTimeout, HEADERS_TIMEOUT_S * 1000);
      assert.equal(server.keepAliveTimeout, KEEP_ALIVE_TIMEOUT_S * 1000);
    });

    test('defaults, and settings that cannot work are refused with their name', () => {
      assert.deepEqual(loadConfig({}).httpTimeouts, {
        requestSeconds: 60,
        headersSeconds: 15,
        keepAliveSeconds: 72,
      });
      for (const [env, name] of [
        [{ ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS: '0' }, 'ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS'],
        [
          { ERRAND_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: '1.5' },
          'ERRAND_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS',
        ],
        [{ ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS: 'soon' }, 'ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS'],
        // Node refuses headers that may take longer than the whole request.
        [
          {
            ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS: '10',
            ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS: '11',
          },
          'ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS',
        ],
      ] as const) {
        assert.throws(
          () => loadConfig(env),
          (err: unknown) => err instanceof ConfigError && err.message.includes(name),
          JSON.stringify(env),
        );
      }
    });
  });

  describe('deeply nested JSON bodies', () => {
    const tooDeep = async (method: string, path: string, key: string, rawBody: string) => {
      const res = await unchanged(svc, () =>
        svc.request(method, path, {
          key,
          rawBody,
          headers: { 'content-type': 'application/json' },
        }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', new RegExp(`deeper than ${MAX_BODY_DEPTH} levels`));
    };

    test('8,000 nested arrays are a 400 on every route that reads a body, not a 500', async () => {
      // The recursive NUL check overflowed the stack on this body.
      const body = `${'['.repeat(8000)}${']'.repeat(8000)}`;
      for (const { method, path, key } of bodyRoutes()) await tooDeep(method, path, key, body);
    });

    test('the deepest body the body limit allows is a 400, not a crash', async () => {
      const limit = svc.service.app?.initialConfig.bodyLimit ?? 0;
      const levels = Math.floor(limit / 2);
      assert.ok(levels >= 250_000, `body limit ${limit}`);
      const arrays = `${'['.repeat(levels)}${']'.repeat(levels)}`;
      // {"a":{"a":…1…}}: objects parse and are checked the same way.
      const objectLevels = Math.floor((limit - 1) / 6);
      const objects = `${'{"a":'.repeat(objectLevels)}1${'}'.repeat(objectLevels)}`;
      for (const { method, path, key } of bodyRoutes().slice(0, 3)) {
        await tooDeep(method, path, key, arrays);
        await tooDeep(method, path, key, objects);
      }
      // The service still answers.
      assert.equal((await svc.request('GET', '/healthz', { key: null })).status, 200);
    });

    test(`one level past ${MAX_BODY_DEPTH} is refused on every route, even beside a valid prompt`, async () => {
      const body = JSON.stringify({
        prompt: 'a prompt',
        name: 'a name',
        projectId: fx.project.id,
        meta: nestedArrays(MAX_BODY_DEPTH),
      });
      for (const { method, path, key } of bodyRoutes()) await tooDeep(method, path, key, body);
    });

    test(`a body nested exactly ${MAX_BODY_DEPTH} levels passes the depth check`, async () => {
      const res = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
        key: fx.projectKey,
        body: { prompt: 'nested metadata', meta: nestedArrays(MAX_BODY_DEPTH - 1) },
      });
      // Changed by issue 9: a field Errand does not know is now refused, naming it, where it
      // was ignored (and the job created). No Errand body has a field that nests this deep,
      // so what this test shows is that the depth check let the body through to the route's
      // schema, whose refusal names the field.
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /unknown field "meta"/);
      assert.doesNotMatch(res.json.error ?? '', /deeper than/);
    });
  });

  describe('slow clients', { concurrency: true }, () => {
    /** Asserts the server closed the connection, within a generous bound and not at once. */
    const assertClosedBySlowClientLimit = (ex: RawExchange) => {
      assert.ok(ex.closed, `the server kept the connection open for ${ex.elapsedMs} ms`);
      assert.ok(ex.elapsedMs >= 1000, `closed after ${ex.elapsedMs} ms, before any limit`);
    };

    test('a body that never completes gets a 408 in JSON and the connection is closed', async () => {
      // Sent a character at a time: the connection is busy, the request just never ends.
      const ex = await unchanged(svc, () =>
        rawExchange(
          port,
          [
            `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\n` +
              `Authorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n` +
              'Content-Length: 1000\r\n\r\n{"prompt": "',
            trickle('x'.repeat(900)),
          ],
          CLOSED_WITHIN_MS,
        ),
      );
      assertClosedBySlowClientLimit(ex);
      const responses = parseResponses(ex.data);
      assert.equal(responses.length, 1, ex.data);
      assertRawError(responses[0], 408, 'request_timeout');
      assert.equal(responses[0]?.headers.connection, 'close');
    });

    test('headers that never complete get a 408 in JSON and the connection is closed', async () => {
      const ex = await rawExchange(
        port,
        [
          `GET /v2/agent/${fx.project.id}/jobs HTTP/1.1\r\nHost: errand\r\n`,
          trickle(`X-Slow: ${'s'.repeat(500)}`),
        ],
        CLOSED_WITHIN_MS,
      );
      assertClosedBySlowClientLimit(ex);
      const responses = parseResponses(ex.data);
      assert.equal(responses.length, 1, ex.data);
      assertRawError(responses[0], 408, 'request_timeout');
    });

    test('a connection that never sends a byte is closed', async () => {
      const ex = await rawExchange(port, [], CLOSED_WITHIN_MS);
      assertClosedBySlowClientLimit(ex);
      // Node answers it as a request whose headers did not arrive; in Errand's shape if at all.
      for (const res of parseResponses(ex.data)) assertRawError(res, 408, 'request_timeout');
    });

    test('an idle kept-alive connection is closed after its response', async () => {
      const ex = await rawExchange(
        port,
        ['GET /healthz HTTP/1.1\r\nHost: errand\r\n\r\n'],
        CLOSED_WITHIN_MS,
      );
      assertClosedBySlowClientLimit(ex);
      const responses = parseResponses(ex.data);
      assert.deepEqual(
        responses.map((r) => [r.status, r.body]),
        [[200, '{"ok":true}']],
      );
      assert.match(responses[0]?.headers['keep-alive'] ?? '', /timeout=2\b/);
    });

    test('a request answered before its body stalls is closed without a second answer', async () => {
      // No key: the 401 goes out before the body is read. The body then trickles in and never
      // ends, and the request timeout must not write a 408 after the 401 the client has.
      const ex = await unchanged(svc, () =>
        rawExchange(
          port,
          [
            `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\n` +
              'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"prompt":',
            trickle('x'.repeat(900)),
          ],
          CLOSED_WITHIN_MS,
        ),
      );
      assertClosedBySlowClientLimit(ex);
      const responses = parseResponses(ex.data);
      assert.equal(responses.length, 1, `more than one answer: ${ex.data}`);
      assertRawError(responses[0], 401, 'unauthorized');
    });
  });

  describe('clients within the limits', () => {
    test('a request that completes in time is answered normally', async () => {
      // The body comes in two parts, well inside the limits.
      const body = JSON.stringify({ prompt: 'sent in two parts' });
      const ex = await rawExchange(
        port,
        [
          `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\n` +
            `Authorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
          (socket) => {
            setTimeout(() => socket.write(body.slice(5)), 300);
          },
        ],
        CLOSED_WITHIN_MS,
      );
      const responses = parseResponses(ex.data);
      assert.equal(responses[0]?.status, 201, ex.data);
    });
  });

  describe('errors at the level of HTTP', () => {
    /** Sends `request` and asserts the one answer: an Errand error with `status` and `code`. */
    const answered = async (request: string, status: number, code: string) => {
      const ex = await unchanged(svc, () => rawExchange(port, [request], ANSWER_WITHIN_MS));
      assert.ok(ex.closed, `no close after the answer to ${JSON.stringify(request.slice(0, 80))}`);
      const responses = parseResponses(ex.data);
      assert.equal(responses.length, 1, ex.data);
      assertRawError(responses[0], status, code);
      return responses[0];
    };
    const get = (path: string, headers = '') =>
      `GET ${path} HTTP/1.1\r\nHost: errand\r\nConnection: close\r\n${headers}\r\n`;

    test('a path that is not valid percent-encoding is a 400 on every route', async () => {
      const auth = `Authorization: Bearer ${svc.adminKey}\r\n`;
      for (const path of [
        '/v2/agent/%zz/job/x',
        `/v2/agent/${fx.project.id}/job/%zz`,
        `/v2/agent/${fx.project.id}/job/${fx.jobId}/events%zz`,
        '/v2/admin/projects/%zz',
        '/review/%zz',
        '/review/%C3%28',
        '/%zz',
      ]) {
        const res = await answered(get(path, auth), 400, 'bad_request');
        assert.match(res?.body ?? '', /percent-encod/);
        await answered(get(path), 400, 'bad_request');
      }
      await answered(
        `POST /v2/agent/%zz/job HTTP/1.1\r\nHost: errand\r\nConnection: close\r\n${auth}` +
          'Content-Type: application/json\r\nContent-Length: 15\r\n\r\n{"prompt":"hi"}',
        400,
        'bad_request',
      );
    });

    test('an over-long path parameter is a 404, like any malformed id', async () => {
      const long = 'a'.repeat(300);
      const auth = `Authorization: Bearer ${svc.adminKey}\r\n`;
      for (const path of [
        `/v2/agent/${long}/job/x`,
        `/v2/agent/${fx.project.id}/job/${long}`,
        `/v2/agent/${fx.project.id}/job/${long}/events`,
        `/v2/admin/projects/${long}`,
        `/review/${long}`,
      ]) {
        await answered(get(path, auth), 404, 'not_found');
      }
      await answered(
        `POST /v2/admin/keys/${long}/revoke HTTP/1.1\r\nHost: errand\r\nConnection: close\r\n` +
          `${auth}Content-Length: 0\r\n\r\n`,
        404,
        'not_found',
      );
    });

    test('a duplicate Content-Length is a 400 and the connection is closed', async () => {
      const res = await answered(
        `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\n` +
          `Authorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n` +
          'Content-Length: 15\r\nContent-Length: 16\r\n\r\n{"prompt":"hi"}',
        400,
        'bad_request',
      );
      assert.equal(res?.headers.connection, 'close');
      assert.match(res?.body ?? '', /Content-Length/);
    });

    test('Content-Length with Transfer-Encoding, a bad chunk and a bad Content-Length are 400s', async () => {
      const head = `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\nAuthorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n`;
      await answered(
        `${head}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n`,
        400,
        'bad_request',
      );
      await answered(`${head}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n`, 400, 'bad_request');
      await answered(`${head}Content-Length: 1x\r\n\r\n{}`, 400, 'bad_request');
    });

    test('an Expect other than 100-continue is a 417', async () => {
      await answered(
        `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\n` +
          `Authorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n` +
          'Expect: something-else\r\nContent-Length: 15\r\n\r\n{"prompt":"hi"}',
        417,
        'expectation_failed',
      );
    });

    test('Expect: 100-continue still works', async () => {
      const body = JSON.stringify({ prompt: 'after 100 Continue' });
      const ex = await rawExchange(
        port,
        [
          `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nHost: errand\r\n` +
            `Authorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n` +
            `Expect: 100-continue\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n`,
          (socket, received) => {
            const wait = setInterval(() => {
              if (!received().includes('100 Continue')) return;
              clearInterval(wait);
              socket.write(body);
            }, 20);
            socket.on('close', () => clearInterval(wait));
          },
        ],
        ANSWER_WITHIN_MS,
      );
      const responses = parseResponses(ex.data);
      assert.deepEqual(
        responses.map((r) => r.status),
        [100, 201],
        ex.data,
      );
    });

    test('headers or a request line over the size limit are a 431', async () => {
      await answered(get('/healthz', `X-Big: ${'a'.repeat(20_000)}\r\n`), 431, 'header_too_large');
      await answered(get(`/healthz?${'q'.repeat(20_000)}`), 431, 'header_too_large');
      const many = Array.from({ length: 2000 }, (_, i) => `X-H${i}: ${'v'.repeat(10)}\r\n`);
      await answered(get('/healthz', many.join('')), 431, 'header_too_large');
    });

    test('requests that are not HTTP/1.1 at all are 400s', async () => {
      for (const request of [
        'FOO / HTTP/1.1\r\nHost: errand\r\n\r\n',
        'hello\r\n\r\n',
        'GET /healthz HTTP/2.7\r\nHost: errand\r\n\r\n',
        'GET /healthz HTTP/1.1\r\nHost: errand\r\nBad Header: x\r\n\r\n',
        'GET /healthz HTTP/1.1\r\nHost: errand\r\nX-Ctl: a\u0001b\r\n\r\n',
        'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
      ]) {
        const res = await answered(request, 400, 'bad_request');
        assert.match(res?.body ?? '', /malformed HTTP request/);
      }
    });

    test('an HTTP/1.1 request without a Host header is a 400', async () => {
      await answered('GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n', 400, 'bad_request');
      await answered(
        `POST /v2/agent/${fx.project.id}/job HTTP/1.1\r\nConnection: close\r\n` +
          `Authorization: Bearer ${fx.projectKey}\r\nContent-Type: application/json\r\n` +
          'Content-Length: 15\r\n\r\n{"prompt":"hi"}',
        400,
        'bad_request',
      );
      // HTTP/1.0 has no Host header.
      const ex = await rawExchange(port, ['GET /healthz HTTP/1.0\r\n\r\n'], ANSWER_WITHIN_MS);
      assert.equal(parseResponses(ex.data)[0]?.status, 200, ex.data);
    });

    test('CONNECT is a 404: Errand is not a proxy', async () => {
      await answered(
        'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
        404,
        'not_found',
      );
    });
  });
});

describe('shutting down', () => {
  test("a request that arrives while the server drains is a 503 in Errand's shape, then the close", async () => {
    const svc = await startTestService({ worker: false });
    try {
      const port = Number(new URL(svc.url).port);
      let closing: Promise<unknown> | undefined;
      const ex = await rawExchange(
        port,
        [
          // The first request's headers are complete, so it is routed before the stop
          // begins; its body (and a second request behind it) arrive during the drain.
          `POST /v2/admin/projects HTTP/1.1\r\nHost: errand\r\nAuthorization: Bearer ${svc.adminKey}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{',
          (socket) => {
            const app = svc.service.app;
            assert.ok(app);
            // Fastify's listener comes first: when this one runs, the request is routed.
            app.server.once('request', () => {
              closing = app.close();
              // The drain has begun once the server stops listening (Fastify marks itself
              // closing just before); the rest is written then.
              const drained = () => {
                if (app.server.listening) setTimeout(drained, 5);
                else socket.write('}GET /healthz HTTP/1.1\r\nHost: errand\r\n\r\n');
              };
              drained();
            });
          },
        ],
        ANSWER_WITHIN_MS,
      );
      await closing;
      assert.ok(ex.closed, 'the server kept the connection open');
      const responses = parseResponses(ex.data);
      assert.equal(responses.length, 2, ex.data);
      assertRawError(responses[0], 400, 'bad_request');
      assertRawError(responses[1], 503, 'unavailable');
      assert.equal(responses[1]?.headers.connection, 'close');
      assert.equal(responses[1]?.headers['retry-after'], '5');
    } finally {
      await svc.close();
    }
  });

  test('a connection that never sent a request does not hold the stop', async () => {
    const svc = await startTestService({ worker: false });
    const { port, hostname } = new URL(svc.url);
    // A client's spare connection: opened, then silent. Before, the stop waited out the
    // connection timeout (two minutes by default) for it.
    const socket = connect(Number(port), hostname);
    socket.on('error', () => {});
    await new Promise((resolve) => socket.once('connect', resolve));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    const started = Date.now();
    try {
      await svc.stop();
      assert.ok(Date.now() - started < 5_000, `the stop took ${Date.now() - started} ms`);
      await closed;
    } finally {
      socket.destroy();
      await svc.close();
    }
  });
});
