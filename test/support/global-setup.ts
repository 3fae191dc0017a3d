// Run once by `npm test` before any test file (node --test-global-setup): without DATABASE_URL,
// starts the embedded PostgreSQL that every test process makes its databases on, the same
// server `errand serve` runs, and stops it when the run ends.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedPostgres } from '../../src/db/embedded/server.ts';
import { createLogger } from '../../src/log.ts';
import { TEST_SERVER_VARIABLE } from './databases.ts';

let server: EmbeddedPostgres | undefined;
let dataDir: string | undefined;

export async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) return;
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'errand-test-server-'));
  server = await EmbeddedPostgres.start({
    dataDir,
    log: createLogger('warn'),
    createdb: true,
    // Each test process opens pools of its own for every service it starts.
    settings: { max_connections: '500', shared_buffers: '128MB' },
  });
  const { host, user, password, database } = server.connection;
  const url = new URL(`postgres://localhost/${database}`);
  url.username = user;
  url.password = password;
  url.searchParams.set('host', host);
  process.env[TEST_SERVER_VARIABLE] = url.toString();
  process.stdout.write(
    `tests: no DATABASE_URL, so every test runs on an embedded PostgreSQL started for this run (${dataDir})\n`,
  );
}

export async function globalTeardown(): Promise<void> {
  await server?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}
