// The CLI's HTTP client of the admin API: ERRAND_URL, and ERRAND_API_KEY or the data
// directory's admin.key.
import { readFile } from 'node:fs/promises';
import type { Config } from '../config.ts';
import { adminKeyPath } from '../keys/bootstrap.ts';

export class CliError extends Error {
  override name = 'CliError';
}

/** The key the CLI sends: ERRAND_API_KEY, else the data directory's admin.key. */
export async function cliApiKey(config: Config): Promise<string> {
  if (config.client.apiKey) return config.client.apiKey;
  const file = adminKeyPath(config.dataDir);
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    throw new CliError(
      `no API key: set ERRAND_API_KEY, or run 'errand serve' once so that ${file} exists`,
    );
  }
}

export class ApiClient {
  readonly #base: string;
  readonly #key: string;

  constructor(base: string, key: string) {
    this.#base = base.replace(/\/+$/, '');
    this.#key = key;
  }

  static async fromConfig(config: Config): Promise<ApiClient> {
    return new ApiClient(config.client.url, await cliApiKey(config));
  }

  async request<T>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.#base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.#key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new CliError(
        `cannot reach Errand at ${this.#base} (${err instanceof Error ? err.message : String(err)}); is 'errand serve' running? (ERRAND_URL)`,
      );
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      throw new CliError(`unexpected response from ${this.#base} (${response.status})`);
    }
    if (!response.ok) {
      const message =
        typeof parsed === 'object' &&
        parsed !== null &&
        typeof (parsed as { error?: unknown }).error === 'string'
          ? (parsed as { error: string }).error
          : `HTTP ${response.status}`;
      throw new CliError(`${message} (HTTP ${response.status})`);
    }
    return parsed as T;
  }
}
