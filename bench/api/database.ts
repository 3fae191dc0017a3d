// How a benchmark reaches the database a service under test uses, for its own statements and for
// pgbench: a PostgreSQL URL (DATABASE_URL mode), or the embedded server that `serve` runs in its
// data directory, through that server's Unix socket with Errand's role and password.
import { type EmbeddedConnection, runningConnection } from '../../src/db/embedded/server.ts';

export interface BenchDatabase {
  /** node-postgres's connection settings. */
  client: { connectionString: string } | EmbeddedConnection;
  /** pgbench's database argument (a URL or a conninfo string) and its environment. */
  pgbench: { database: string; env: NodeJS.ProcessEnv };
  /** The database's name, as its backends' process titles show it. */
  name: string;
}

export function urlDatabase(url: string): BenchDatabase {
  return {
    client: { connectionString: url },
    pgbench: { database: url, env: process.env },
    name: new URL(url).pathname.slice(1),
  };
}

/** The embedded server of the `serve` process running on `dataDir`. */
export async function embeddedDatabase(dataDir: string): Promise<BenchDatabase> {
  const connection = await runningConnection(dataDir);
  if (!connection)
    throw new Error(`no embedded PostgreSQL runs for ${dataDir} (is its serve process running?)`);
  // The password goes in pgbench's environment, not on its command line.
  const conninfo = `host='${connection.host}' port=${connection.port} user=${connection.user} dbname=${connection.database}`;
  return {
    client: connection,
    pgbench: { database: conninfo, env: { ...process.env, PGPASSWORD: connection.password } },
    name: connection.database,
  };
}
