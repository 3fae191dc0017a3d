// Which repository locations a project may name. The rules are the workspace's (the same
// check guards every git call); a project additionally needs a local path to be absolute.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type RepositoryKind, validateRepositoryUrl } from '../repository/url.ts';

export type RepositoryCheck =
  | { ok: true; kind: RepositoryKind; localPath?: string }
  | { ok: false; reason: string };

export function checkRepository(value: string, allowLocal: boolean): RepositoryCheck {
  const check = validateRepositoryUrl(value, allowLocal);
  if (!check.ok || check.kind !== 'local') return check;
  let local: string;
  try {
    local = value.startsWith('file:') ? fileURLToPath(value) : value;
  } catch {
    return { ok: false, reason: 'file:// URL must name a local path' };
  }
  if (!path.isAbsolute(local)) {
    return { ok: false, reason: 'a local repository must be an absolute path or a file:// URL' };
  }
  return { ok: true, kind: 'local', localPath: path.normalize(local) };
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
