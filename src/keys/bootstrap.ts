// The first admin key. Given by the operator (ERRAND_ADMIN_KEY, e.g. from a Kubernetes Secret),
// its hash is stored on the first start against an empty database, and nothing is printed or
// written. Without it, serve mints one, prints it once and writes it to <data-dir>/admin.key
// (0600) for the CLI to use.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { type Config, ConfigError } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { Logger } from '../log.ts';
import { hashKey, isWellFormedKey } from './format.ts';
import { createKey, storeKey } from './service.ts';

const BOOTSTRAP_LOCK = 7_281_002;

export function adminKeyPath(dataDir: string): string {
  return path.join(dataDir, 'admin.key');
}

/**
 * Returns the new key when this call minted it, undefined when keys already existed or the
 * operator gave it (ERRAND_ADMIN_KEY): a key the operator holds is never printed.
 */
export async function ensureAdminKey(
  db: Db,
  config: Pick<Config, 'dataDir' | 'adminKey'>,
  log: Logger,
): Promise<string | undefined> {
  if (config.adminKey !== undefined) {
    await ensureGivenAdminKey(db, config.adminKey, log);
    return undefined;
  }
  const key = await db.transaction().execute(async (trx) => {
    // Two processes starting on an empty PostgreSQL must not both mint a first key.
    await sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`.execute(trx);
    const existing = await trx.selectFrom('api_keys').select('id').limit(1).executeTakeFirst();
    if (existing) return undefined;
    return (await createKey(trx, { projectId: null, name: 'bootstrap admin key' })).key;
  });
  if (key) {
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    await writeFile(adminKeyPath(config.dataDir), `${key}\n`, { mode: 0o600 });
  }
  return key;
}

/**
 * Stores the operator's key as the first admin key when there is no key yet. Keys made before
 * it was set stay as they are: the key is then only checked, and a warning says why it will
 * not open the API. Neither the key nor its hash is ever in a message.
 */
async function ensureGivenAdminKey(db: Db, key: string, log: Logger): Promise<void> {
  // The API refuses a key without Errand's shape and checksum before any lookup: stored, it
  // could never be used.
  if (!isWellFormedKey(key))
    throw new ConfigError(
      'invalid setting ERRAND_ADMIN_KEY: not an Errand API key ("errand_" and 38 letters and digits, the last 6 a checksum); make one with `errand key generate`',
    );
  const outcome = await db.transaction().execute(async (trx) => {
    // The same lock as a minted key's: one first key, whichever process starts first.
    await sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`.execute(trx);
    const existing = await trx.selectFrom('api_keys').select('id').limit(1).executeTakeFirst();
    if (!existing) {
      const { row } = await storeKey(trx, key, {
        projectId: null,
        name: 'bootstrap admin key (ERRAND_ADMIN_KEY)',
      });
      return { stored: row.id } as const;
    }
    const same = await trx
      .selectFrom('api_keys')
      .select(['id', 'project_id', 'revoked_at'])
      .where('hash', '=', hashKey(key))
      .executeTakeFirst();
    return { found: same } as const;
  });
  if ('stored' in outcome) {
    log.info({ keyId: outcome.stored }, 'bootstrap admin key stored from ERRAND_ADMIN_KEY');
    return;
  }
  const row = outcome.found;
  if (row === undefined)
    log.warn(
      'ERRAND_ADMIN_KEY is not one of the stored keys: keys existed before it was set, so it was not stored and opens nothing; use an existing admin key, or make one with errand key create --admin',
    );
  else if (row.revoked_at !== null)
    log.warn({ keyId: row.id }, 'ERRAND_ADMIN_KEY is a revoked key: it opens nothing');
  else if (row.project_id !== null)
    log.warn(
      { keyId: row.id, projectId: row.project_id },
      "ERRAND_ADMIN_KEY is a project's key, not an admin key",
    );
}
