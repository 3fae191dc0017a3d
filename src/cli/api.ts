// The CLI as a client of Errand's API, through the typed client (src/client/): the address in
// ERRAND_URL, the key in ERRAND_API_KEY or else the data directory's admin.key, and the API's
// refusals as one line for the terminal.
import { readFile } from 'node:fs/promises';
import { ErrandClient, ErrandError } from '../client/index.ts';
import { type Config, loadConfig } from '../config.ts';
import { adminKeyPath } from '../keys/bootstrap.ts';
import { errandVersion } from '../version.ts';
import type { Io } from './command.ts';
import { CliError } from './errors.ts';

/** What the admin commands' pages say about where they send their requests. */
export const ADMIN_NOTE = `  --json             exactly one JSON document on stdout: the record, or the list

A client of the admin API at ERRAND_URL, with the key in ERRAND_API_KEY (default: <data-dir>/admin.key).`;

/** The settings of a client command: the environment, and --data-dir for admin.key. */
export function cliConfig(io: Io, dataDir: string | undefined): Config {
  return loadConfig(io.env, dataDir === undefined ? {} : { dataDir });
}

/** The key the CLI sends: ERRAND_API_KEY, else the data directory's admin.key. */
async function cliApiKey(config: Config): Promise<string> {
  const fromEnv = config.client.apiKey?.trim();
  if (fromEnv) return fromEnv;
  const file = adminKeyPath(config.dataDir);
  const key = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (key) return key;
  throw new CliError(
    `no API key: set ERRAND_API_KEY, or run 'errand serve' once so that ${file} exists`,
  );
}

/** A client of ERRAND_URL with the CLI's key, in `projectId` when given. */
export async function cliClient(config: Config, projectId?: string): Promise<ErrandClient> {
  const apiKey = await cliApiKey(config);
  try {
    return new ErrandClient({
      baseUrl: config.client.url,
      apiKey,
      ...(projectId === undefined ? {} : { projectId }),
      userAgent: `errand-cli/${errandVersion()}`,
    });
  } catch (err) {
    throw new CliError(
      `invalid setting ERRAND_URL: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/**
 * A refusal of the job API as one line: the client's message (the call, the status and the
 * server's message), the code and the request id to quote.
 */
export function jobApiError(err: ErrandError): CliError {
  const detail = [err.code, err.requestId ? `request ${err.requestId}` : undefined]
    .filter(Boolean)
    .join(', ');
  const retry =
    err.retryAfterSeconds !== undefined ? `; try again in ${err.retryAfterSeconds} s` : '';
  const hint = err.code === 'network_error' ? "; is 'errand serve' running? (ERRAND_URL)" : '';
  return new CliError(`${err.message} (${detail})${retry}${hint}`);
}

/** What Node said when the connection failed: ECONNREFUSED, ENOTFOUND, or its message. */
function connectionFailure(err: ErrandError): string {
  const cause =
    err.cause instanceof Error && err.cause.cause instanceof Error ? err.cause.cause : err.cause;
  if (cause instanceof Error)
    return (cause as Error & { code?: unknown }).code?.toString() ?? cause.message;
  return String(cause);
}

/** A refusal of the admin API as one line: the server's message and the HTTP status. */
function adminApiError(err: ErrandError, base: string): CliError {
  if (err.code === 'network_error')
    return new CliError(
      `cannot reach Errand at ${base} (${connectionFailure(err)}); is 'errand serve' running? (ERRAND_URL)`,
    );
  if (err.status === 0 || err.code === 'invalid_response') return new CliError(err.message);
  return new CliError(`${err.serverMessage ?? `HTTP ${err.status}`} (HTTP ${err.status})`);
}

/**
 * Runs admin calls with the CLI's client (in `projectId` when given); their refusals become
 * CliErrors in the admin commands' words.
 */
export async function withAdminClient<T>(
  io: Io,
  dataDir: string | undefined,
  call: (client: ErrandClient) => Promise<T>,
  projectId?: string,
): Promise<T> {
  const config = cliConfig(io, dataDir);
  const client = await cliClient(config, projectId);
  try {
    return await call(client);
  } catch (err) {
    if (err instanceof ErrandError) throw adminApiError(err, config.client.url.replace(/\/+$/, ''));
    throw err;
  }
}
