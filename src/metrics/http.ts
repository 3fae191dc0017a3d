// Serves /metrics where the operator chose: on the API's port behind ERRAND_METRICS_TOKEN,
// and/or on a listener of its own (ERRAND_METRICS_HOST/PORT) that a worker process, which has
// no API, can open too. Without either, no metrics are served. That listener also answers
// GET /healthz without a token, as the API does: a worker's liveness for health checks.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import type { Logger } from '../log.ts';
import { errors } from '../responses.ts';
import type { Metrics } from './metrics.ts';

/** Whether an Authorization header carries the metrics token (compared in constant time). */
function metricsAuthorized(header: string | undefined, token: string | undefined): boolean {
  if (token === undefined) return true;
  const given = Buffer.from(header?.startsWith('Bearer ') ? header.slice(7) : '');
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** GET /metrics on the API's port: only with a token, since that port faces the API's clients. */
export function registerMetricsRoute(app: FastifyInstance, config: Config, metrics: Metrics): void {
  const token = config.metrics.token;
  if (token === undefined) return;
  const schema = {
    summary: 'Prometheus metrics',
    description:
      'Served here only when ERRAND_METRICS_TOKEN is set; the token, not an API key, opens it.',
    tags: ['metrics'],
    security: [{ metricsToken: [] }],
    response: {
      200: {
        description: 'The Prometheus text exposition format.',
        content: { 'text/plain': { schema: z.string() } },
      },
      ...errors(401),
    },
  };
  app.get('/metrics', { config: access('open'), schema }, async (request, reply) => {
    if (!metricsAuthorized(request.headers.authorization, token))
      throw new AppError(
        'unauthorized',
        'GET /metrics needs Authorization: Bearer <ERRAND_METRICS_TOKEN>',
      );
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * The metrics listener of ERRAND_METRICS_PORT: GET /metrics, behind the token if one is set,
 * and GET /healthz (the process answers, as the API's /healthz says; no token, no database).
 */
export async function startMetricsServer(
  config: Config,
  metrics: Metrics,
  log: Logger,
): Promise<MetricsServer | undefined> {
  const port = config.metrics.port;
  if (port === undefined) return undefined;
  const send = (res: ServerResponse, status: number, code: string, error: string) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ error, code }));
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ ok: true }));
      return;
    }
    if (req.method !== 'GET' || path !== '/metrics') {
      send(res, 404, 'not_found', 'only GET /metrics and GET /healthz are served here');
      return;
    }
    if (!metricsAuthorized(req.headers.authorization, config.metrics.token)) {
      res.setHeader('www-authenticate', 'Bearer realm="errand-metrics"');
      send(
        res,
        401,
        'unauthorized',
        'GET /metrics needs Authorization: Bearer <ERRAND_METRICS_TOKEN>',
      );
      return;
    }
    metrics.render().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType });
        res.end(body);
      },
      (err: unknown) => {
        log.error({ err }, 'metrics scrape failed');
        send(res, 500, 'internal', 'the scrape failed; the server log has the details');
      },
    );
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, config.metrics.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  const host = config.metrics.host.includes(':') ? `[${config.metrics.host}]` : config.metrics.host;
  return {
    url: `http://${host}:${bound}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
