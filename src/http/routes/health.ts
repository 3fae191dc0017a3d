// GET /healthz: liveness for load balancers and start-up scripts (the process answers; no
// database). GET /readyz: readiness (the database answers and has every migration this code
// needs), 503 otherwise. No authentication on either.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { loadMigrations, missingMigrations } from '../../db/migrate.ts';
import { AppError } from '../../errors.ts';
import { access } from '../../keys/route-access.ts';
import { errors } from '../../responses.ts';

const ok = z.object({ ok: z.literal(true) });

export async function registerHealth(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const migrations = await loadMigrations();
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    '/healthz',
    {
      config: access('open'),
      schema: {
        summary: 'Liveness',
        description: 'The process answers; the database is not asked.',
        tags: ['health'],
        response: { 200: ok.describe('Alive.') },
      },
    },
    async () => ({ ok: true as const }),
  );
  const readiness = {
    summary: 'Readiness',
    description: 'The database answers and has every migration this code needs.',
    tags: ['health'],
    response: { 200: ok.describe('Ready.'), ...errors(503) },
  };
  typed.get('/readyz', { config: access('open'), schema: readiness }, async () => {
    // A database that is down or too slow is a 503 through the one error mapping.
    const missing = await missingMigrations(ctx.db, migrations);
    if (missing.length > 0)
      throw new AppError(
        'unavailable',
        `the database lacks migrations ${missing.join(', ')}; run errand migrate (or start errand serve, which applies them)`,
      );
    return { ok: true as const };
  });
}
