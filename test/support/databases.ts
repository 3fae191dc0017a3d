// Real databases for tests. Storage and API tests get a fresh PostgreSQL database per service,
// dropped afterwards, on the test server: the one of DATABASE_URL, else the embedded PostgreSQL
// that `npm test` starts for the whole run (global-setup.ts). Tests of the embedded mode itself
// get a data directory only, where the service starts its own embedded PostgreSQL.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** Where the run's embedded test server is, set by global-setup.ts for every test process. */
export const TEST_SERVER_VARIABLE = 'ERRAND_TEST_DATABASE_URL';

/** The PostgreSQL server tests make their databases on. */
export function testServerUrl(): string {
  const url = process.env.DATABASE_URL || process.env[TEST_SERVER_VARIABLE];
  if (!url)
    throw new Error(
      'no test database server: run tests with `npm test` or `npm run test:file -- FILE` (they start an embedded PostgreSQL for the run), or set DATABASE_URL',
    );
  return url;
}

export interface TestDatabase {
  /** The data directory: always set (admin.key and workspaces live there too). */
  dataDir: string;
  /** Unset for a data directory whose service runs the embedded PostgreSQL itself. */
  databaseUrl: string | undefined;
  drop(): Promise<void>;
}

/** A fresh database on the test server, and a data directory beside it. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const server = testServerUrl();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'errand-test-'));
  const name = `errand_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    dataDir,
    databaseUrl: url.toString(),
    async drop() {
      await dropDatabase(server, name);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Drops a test database with no more rights than making it took (CREATEDB, and owning it):
 * `WITH (FORCE)` would also terminate backends of other roles, which only a superuser may (the
 * embedded test server's role is not one, and an autovacuum worker may be on the database at
 * that moment). So the role's own backends still connected are terminated, which any role may
 * do to its own, and a plain DROP, which stops autovacuum workers itself, is tried again while
 * one of them is still going away.
 */
async function dropDatabase(server: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  try {
    for (let attempt = 1; ; attempt++) {
      await client.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = $1 AND usename = current_user AND pid <> pg_backend_pid()`,
        [name],
      );
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name}`);
        return;
      } catch (err) {
        // 55006: "being accessed by other users", a backend that has not ended yet.
        if ((err as { code?: string }).code !== '55006' || attempt >= 50) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await client.end();
  }
}

/** A fresh data directory for a service in the embedded mode (it starts its own PostgreSQL). */
export async function createEmbeddedDataDir(): Promise<TestDatabase> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'errand-test-'));
  return {
    dataDir,
    databaseUrl: undefined,
    drop: () => rm(dataDir, { recursive: true, force: true }),
  };
}
