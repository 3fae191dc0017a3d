// Real databases for tests: a fresh PGlite data directory per service (copied from a template
// made once per machine, since creating one takes seconds), and when DATABASE_URL is set a
// fresh PostgreSQL database per service on that server, dropped afterwards.
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';

export type BackendName = 'pglite' | 'postgres';

export const postgresUrl: string | undefined = process.env.DATABASE_URL || undefined;

/** The backends to run storage and API tests on; PostgreSQL only when DATABASE_URL is set. */
export const backends: BackendName[] = postgresUrl ? ['pglite', 'postgres'] : ['pglite'];

export const POSTGRES_SKIP_REASON = 'PostgreSQL tests skipped: DATABASE_URL is not set';

// The template is per PGlite version: a data directory from another version may not open.
const pgliteVersion: string = (
  JSON.parse(
    await readFile(
      new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url),
      'utf8',
    ),
  ) as { version: string }
).version;

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

async function pgliteTemplate(): Promise<string> {
  const template = path.join(os.tmpdir(), `errand-test-pglite-${pgliteVersion}`);
  if (await exists(template)) return template;
  const building = `${template}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const db = await PGlite.create(building);
  await db.close();
  // Several test processes may build it at once: the first rename wins, the rest clean up.
  await rename(building, template).catch(() => rm(building, { recursive: true, force: true }));
  return template;
}

export interface TestDatabase {
  /** The data directory: always set (admin.key and workspaces live there too). */
  dataDir: string;
  /** Set for PostgreSQL. */
  databaseUrl: string | undefined;
  drop(): Promise<void>;
}

export async function createTestDatabase(backend: BackendName): Promise<TestDatabase> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'errand-test-'));
  if (backend === 'pglite') {
    await cp(await pgliteTemplate(), path.join(dataDir, 'pgdata'), { recursive: true });
    return {
      dataDir,
      databaseUrl: undefined,
      drop: () => rm(dataDir, { recursive: true, force: true }),
    };
  }
  if (!postgresUrl) throw new Error(POSTGRES_SKIP_REASON);
  const name = `errand_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: postgresUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(postgresUrl);
  url.pathname = `/${name}`;
  return {
    dataDir,
    databaseUrl: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: postgresUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
