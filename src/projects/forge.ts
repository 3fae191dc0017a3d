// What a project says about its forge, below the providers that talk to one (src/forges/): the
// kinds a project may name, the credentials it stores, the kind its repository's host implies,
// and what it asks of the providers (ForgeTargets, answered by src/forges/clients.ts).
import type { ProjectRow } from '../db/schema.ts';
import type { FORGE_KINDS } from '../records/project.ts';
import { parseRepositoryUrl } from '../repository/url.ts';

/** A forge a project may name (the list is the project record's, src/records/project.ts). */
export type ForgeKind = (typeof FORGE_KINDS)[number];

/** What a project stores (encrypted at rest) to talk to its forge. Never returned by the API. */
export interface ForgeCredentials {
  /** A personal/project access token. */
  token?: string;
  /** GitHub App: installation tokens are minted from the app's private key as needed. */
  githubApp?: { appId: string; privateKey: string; installationId: string };
}

/** What projects ask of the forge providers, which live above them. */
export interface ForgeTargets {
  /** The API base URL for a repository on the forge's public instance, when known (github.com → api.github.com). */
  defaultApiUrl(kind: ForgeKind, repository: string): string | undefined;
  /** Throws, without needing credentials, when the forge cannot work with the repository at this API URL. */
  check(kind: ForgeKind, apiUrl: string, repository: string): void;
}

function hostOf(repository: string): string | undefined {
  const parsed = parseRepositoryUrl(repository);
  return parsed.ok && parsed.url.hostname !== '' ? parsed.url.hostname : undefined;
}

/** The forge a repository's host implies (github.com, gitlab.com); anything else is a plain git remote. */
export function inferForgeKind(repository: string): ForgeKind {
  const host = hostOf(repository);
  if (host === 'github.com') return 'github';
  if (host === 'gitlab.com') return 'gitlab';
  return 'git';
}

export interface ProjectForge {
  kind: ForgeKind;
  /** Set for github, gitlab and gitea (explicit, or the public instance's). */
  apiUrl: string | undefined;
  inferred: boolean;
}

export function projectForge(
  project: Pick<ProjectRow, 'repository' | 'forge_kind' | 'forge_api_url'>,
  forges: Pick<ForgeTargets, 'defaultApiUrl'>,
): ProjectForge {
  const kind = project.forge_kind ?? inferForgeKind(project.repository);
  const apiUrl =
    kind === 'git'
      ? undefined
      : (project.forge_api_url ?? forges.defaultApiUrl(kind, project.repository));
  return { kind, apiUrl, inferred: project.forge_kind === null };
}
