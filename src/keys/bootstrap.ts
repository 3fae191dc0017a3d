// The first admin key. On the first start against an empty database, serve mints one,
// prints it once and writes it to <data-dir>/admin.key (0600) for the CLI to use.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { createKey } from './service.ts';

const BOOTSTRAP_LOCK = 7_281_002;

export function adminKeyPath(dataDir: string): string {
  return path.join(dataDir, 'admin.key');
}

/** Returns the new key when this call created it, undefined when keys already existed. */
export async function ensureAdminKey(db: Db, dataDir: string): Promise<string | undefined> {
  const key = await db.transaction().execute(async (trx) => {
    // Two processes starting on an empty PostgreSQL must not both mint a first key.
    await sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`.execute(trx);
    const existing = await trx.selectFrom('api_keys').select('id').limit(1).executeTakeFirst();
    if (existing) return undefined;
    return (await createKey(trx, { projectId: null, name: 'bootstrap admin key' })).key;
  });
  if (key) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    await writeFile(adminKeyPath(dataDir), `${key}\n`, { mode: 0o600 });
  }
  return key;
}
