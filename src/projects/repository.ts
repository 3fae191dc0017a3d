// Which repository locations a project may name. Git accepts far more than URLs (ext::
// transports run commands, `-`-leading strings become options), so anything not known to be
// safe is refused before it is stored.
import { stat } from 'node:fs/promises';
import path from 'node:path';

export type RepositoryKind = 'https' | 'ssh' | 'scp' | 'local';

export type RepositoryCheck =
  | { ok: true; kind: RepositoryKind; localPath?: string }
  | { ok: false; reason: string };

const SCP_STYLE = /^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!\/\/)[A-Za-z0-9._~/-]+$/;

export function checkRepository(value: string, allowLocal: boolean): RepositoryCheck {
  if (value.length === 0 || value.length > 2048) {
    return { ok: false, reason: 'repository must be 1 to 2048 characters' };
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
  if (/[\u0000-\u0020\u007f]/.test(value)) {
    return { ok: false, reason: 'repository must not contain spaces or control characters' };
  }
  if (value.startsWith('-')) return { ok: false, reason: "repository must not start with '-'" };
  if (value.includes('::')) {
    return { ok: false, reason: "git transport helpers ('ext::', 'fd::', …) are not allowed" };
  }
  const local = (p: string): RepositoryCheck =>
    allowLocal
      ? { ok: true, kind: 'local', localPath: p }
      : {
          ok: false,
          reason:
            'local repositories are disabled on this server (set ERRAND_ALLOW_LOCAL_REPOS=true to allow them)',
        };
  if (value.startsWith('/')) return local(path.normalize(value));
  if (SCP_STYLE.test(value)) return { ok: true, kind: 'scp' };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return {
      ok: false,
      reason:
        'repository must be an https:// or ssh:// URL, git@host:path, or an absolute path to a local repository',
    };
  }
  switch (url.protocol) {
    case 'https:':
      if (url.username || url.password) {
        return {
          ok: false,
          reason: 'repository URL must not contain credentials; give the forge token separately',
        };
      }
      if (!url.hostname) return { ok: false, reason: 'repository URL has no host' };
      return { ok: true, kind: 'https' };
    case 'ssh:':
      if (url.password) return { ok: false, reason: 'repository URL must not contain a password' };
      if (!url.hostname) return { ok: false, reason: 'repository URL has no host' };
      return { ok: true, kind: 'ssh' };
    case 'file:':
      if (url.host !== '') return { ok: false, reason: 'file:// URLs must name a local path' };
      return local(decodeURIComponent(url.pathname));
    case 'http:':
      return {
        ok: false,
        reason: 'plain http:// sends credentials and code unencrypted; use https://',
      };
    default:
      return { ok: false, reason: `unsupported repository scheme '${url.protocol}'` };
  }
}

/** A local repository must exist when the project is created, or the first job would fail. */
export async function localRepositoryExists(localPath: string): Promise<boolean> {
  try {
    return (await stat(localPath)).isDirectory();
  } catch {
    return false;
  }
}

// Refs as git check-ref-format would accept them, minus anything that could be an option.
const REF_PATTERN = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*@\{)(?!\/)(?!.*[/.]$)[A-Za-z0-9._/+-]{1,255}$/;

export function isValidRef(ref: string): boolean {
  return (
    REF_PATTERN.test(ref) &&
    !ref.split('/').some((part) => part.startsWith('.') || part.endsWith('.lock'))
  );
}

const MODEL_PATTERN = /^[a-z][a-z0-9-]*:[A-Za-z0-9._:/@-]{1,200}$/;

export function isValidModelId(model: string): boolean {
  return MODEL_PATTERN.test(model);
}
