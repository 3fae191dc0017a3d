// Seeds jobs for the job-list row straight into Errand's database, after the service has
// migrated it: N jobs of one project, one in every N/ACTIVE active (spread over time, the
// worst case for a list that reads newest first), the rest completed. Runs as its own process,
// beside the running service: on the embedded server of its data directory (through the server's
// socket) or on PostgreSQL:
//   node bench/perf/seed.ts (--data-dir DIR | --database-url URL) PROJECT_ID:COUNT …
import { parseArgs } from 'node:util';
import { openDatabase } from '../../src/db/database.ts';

/** How many of a seeded project's jobs are active (the status the list filters on). */
export const ACTIVE_JOBS = 20;

const SEED = `
INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, pr_link, pr_number,
                  error, turn_count, created_at, updated_at, archived_at)
SELECT 'job_' || substr(md5(p.id || ':' || i), 1, 20),
       p.id,
       CASE WHEN i % ($2::int / ${ACTIVE_JOBS}) = 0 THEN 'active' ELSE 'completed' END,
       p.repository, p.ref,
       'errand/job_' || substr(md5(p.id || ':' || i), 1, 20),
       coalesce(p.model, 'openai-compatible:perf-model'),
       NULL, NULL, NULL, 1,
       now() - make_interval(secs => $2::int - i),
       now() - make_interval(secs => $2::int - i),
       NULL
  FROM projects p, generate_series(1, $2::int) AS i
 WHERE p.id = $1`;

export async function seed(
  target: { dataDir: string; databaseUrl: string | undefined },
  projects: { id: string; count: number }[],
): Promise<void> {
  const handle = await openDatabase({
    dataDir: target.dataDir,
    databaseUrl: target.databaseUrl,
    // The embedded server the service runs (else one started here, on a stopped service's data).
    shareRunning: true,
  });
  try {
    await handle.transaction(async (run) => {
      for (const p of projects) {
        if (p.count % ACTIVE_JOBS !== 0) throw new Error(`${p.count} is not a multiple of 20`);
        await run.query(SEED, [p.id, p.count]);
      }
    });
    // As autovacuum would soon: the planner sees the table as it now is.
    await handle.transaction((run) => run.exec('ANALYZE jobs'));
  } finally {
    await handle.close();
  }
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    options: { 'data-dir': { type: 'string' }, 'database-url': { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  const projects = positionals.map((p) => {
    const [id = '', count = ''] = p.split(':');
    if (!id || !/^\d+$/.test(count)) throw new Error(`expected PROJECT_ID:COUNT, got ${p}`);
    return { id, count: Number(count) };
  });
  if (!values['data-dir'] && !values['database-url'])
    throw new Error('give --data-dir or --database-url');
  await seed({ dataDir: values['data-dir'] ?? '', databaseUrl: values['database-url'] }, projects);
  process.stdout.write('seeded\n');
}
