// GET /healthz: liveness for load balancers and start-up scripts; no authentication.
import type { FastifyInstance } from 'fastify';

export function registerHealth(app: FastifyInstance): void {
  app.get('/healthz', async () => ({ ok: true }));
}
