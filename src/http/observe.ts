// What every answered request leaves behind: one log line (route, status, latency, requestId)
// and the request metrics. Probes (/healthz, /readyz, /metrics) log at debug, so a load
// balancer polling every few seconds does not drown the requests that matter.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { AppContext } from '../context.ts';

const PROBES = new Set(['/healthz', '/readyz', '/metrics']);

export function observeResponse(ctx: AppContext) {
  const { log, metrics } = ctx;
  // A callback hook, like onSend: it runs on every response of the polling hot path.
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    // The route's template, never the raw URL: ids in paths would make a series per job, and
    // a path that matched no route is one series however it was spelled.
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const ms = reply.elapsedTime;
    const labels = { method: request.method, route, status: String(status) };
    metrics.httpRequests.inc(labels);
    metrics.httpDuration.observe(labels, ms / 1000);
    const line = {
      requestId: request.id,
      method: request.method,
      route,
      status,
      ms: Math.round(ms * 10) / 10,
    };
    if (PROBES.has(route)) log.debug(line, 'request');
    else log.info(line, 'request');
    done();
  };
}
