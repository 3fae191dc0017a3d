// The forges as the application context holds them: built once at start-up with this
// process's settings and metrics, so a turn asks for its project's client instead of building
// one, and a client (with a GitHub App's installation token) serves every turn of the project
// until the project's forge settings change.
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { Metrics } from '../metrics/metrics.ts';
import {
  type ForgeCredentials,
  type ForgeKind,
  type ForgeTargets,
  projectForge,
} from '../projects/forge.ts';
import { forgeCredentials, forgeProviders } from './registry.ts';
import type { ForgeClient, ForgeProvider } from './types.ts';

/** A project's forge for one repository; a plain git remote has no provider and no client. */
export type ProjectForgeClient =
  | { kind: ForgeKind; provider: ForgeProvider; client: ForgeClient; credentials: ForgeCredentials }
  | { kind: ForgeKind; provider: undefined; client: undefined; credentials: undefined };

/** Clients kept at most; past it the least recently used goes (a project's next turn remakes it). */
const MAX_CLIENTS = 256;

export class Forges implements ForgeTargets {
  readonly #config: Config;
  readonly #metrics: Metrics;
  readonly #clients = new LRUCache<string, ProjectForgeClient>({ max: MAX_CLIENTS });

  constructor(config: Config, metrics: Metrics) {
    this.#config = config;
    this.#metrics = metrics;
  }

  /**
   * Checks, without credentials, that the forge can work with this repository at this API
   * URL: a project is refused when it is saved, not at its first job.
   */
  check(kind: ForgeKind, apiUrl: string, repository: string): void {
    forgeProviders.get(kind)?.checkTarget(apiUrl, repository);
  }

  defaultApiUrl(kind: ForgeKind, repository: string): string | undefined {
    return forgeProviders.get(kind)?.defaultApiUrl(repository);
  }

  /**
   * The client for `repository` (the job's, which may predate a change of the project's) with
   * the project's forge settings and credentials as they are now.
   */
  client(project: ProjectRow, repository: string): ProjectForgeClient {
    const forge = projectForge({ ...project, repository }, this);
    const provider = forge.kind === 'git' ? undefined : forgeProviders.get(forge.kind);
    if (!provider || !forge.apiUrl)
      return { kind: forge.kind, provider: undefined, client: undefined, credentials: undefined };
    // Every setting the client is made from is in the key: a project whose forge or
    // credentials change, by the API or in the database, gets a new client.
    const key = JSON.stringify([
      project.id,
      repository,
      forge.kind,
      forge.apiUrl,
      project.forge_token_env,
      project.forge_secret,
    ]);
    const kept = this.#clients.get(key);
    if (kept) return kept;
    const credentials = forgeCredentials(this.#config, project, forge.kind);
    const client = provider.create({
      apiUrl: forge.apiUrl,
      repository,
      credentials,
      fetch: this.#metrics.forgeFetch(forge.kind),
    });
    const made: ProjectForgeClient = { kind: forge.kind, provider, client, credentials };
    this.#clients.set(key, made);
    return made;
  }
}
