// GET /healthz: liveness for load balancers and start-up scripts (the process answers; no
// database). GET /readyz: readiness (the database answers and has every migration this code
// needs), 503 otherwise. No authentication on either.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { loadMigrations, missingMigrations } from '../../db/migrate.ts';
import { AppError } from '../../errors.ts';

export async function registerHealth(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const migrations = await loadMigrations();
  app.get('/healthz', async () => ({ ok: true }));
  app.get('/readyz', async () => {
    // A database that is down or too slow is a 503 through the one error mapping.
    const missing = await missingMigrations(ctx.db, migrations);
    if (missing.length > 0)
      throw new AppError(
        'unavailable',
        `the database lacks migrations ${missing.join(', ')}; run errand migrate (or start errand serve, which applies them)`,
      );
    return { ok: true };
  });
}
