// Applies the numbered SQL files in ./migrations in order, each in its own transaction and
// recorded in errand_migrations. An advisory lock makes two processes starting at once safe:
// the second waits, then finds the migration recorded and skips it.
import { readdir, readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import type { DatabaseHandle, Db } from './database.ts';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
// Any constant works; it only has to be the same in every Errand process.
const LOCK_KEY = 7_281_001;

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export async function loadMigrations(): Promise<Migration[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      id: Number.parseInt(file.slice(0, 4), 10),
      name: file.replace(/\.sql$/, ''),
      sql: await readFile(new URL(file, MIGRATIONS_DIR), 'utf8'),
    })),
  );
}

/** Returns the names of the migrations this call applied. */
export async function migrate(handle: DatabaseHandle): Promise<string[]> {
  const applied: string[] = [];
  for (const migration of await loadMigrations()) {
    const ran = await handle.transaction(async (run) => {
      await run.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
      await run.exec(
        'CREATE TABLE IF NOT EXISTS errand_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const done = await run.query('SELECT 1 FROM errand_migrations WHERE id = $1', [migration.id]);
      if (done.length > 0) return false;
      await run.exec(migration.sql);
      await run.query('INSERT INTO errand_migrations (id, name) VALUES ($1, $2)', [
        migration.id,
        migration.name,
      ]);
      return true;
    });
    if (ran) applied.push(migration.name);
  }
  return applied;
}

/** The migrations this code needs that the database does not have yet (for readiness). */
export async function missingMigrations(
  db: Db,
  migrations: readonly Migration[],
): Promise<string[]> {
  const table = await sql<{ present: boolean }>`
    SELECT to_regclass('errand_migrations') IS NOT NULL AS present`.execute(db);
  if (!table.rows[0]?.present) return migrations.map((m) => m.name);
  const applied = await sql<{ id: number }>`SELECT id FROM errand_migrations`.execute(db);
  const ids = new Set(applied.rows.map((r) => r.id));
  return migrations.filter((m) => !ids.has(m.id)).map((m) => m.name);
}
