// A project's secrets: named values its setup commands get in their environment (exposure
// "setup"), or also the agent's commands and an engine's shell ("commands"), never a model.
// Stored sealed with the service's secret key (secrets/box.ts) and never returned: the admin API
// lists names, exposures and times. The one writer of project_secrets; turns read the values
// through turnSecrets.
import type { Transaction } from 'kysely';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { SECRET_EXPOSURES, SecretRecord } from '../records/secret.ts';
import { open, seal } from '../secrets/box.ts';
import { MIN_SECRET_CHARS } from '../secrets/scrub.ts';

export type SecretExposure = (typeof SECRET_EXPOSURES)[number];

/** An environment variable's name: capitals, digits and underscores, not a digit first. */
const SECRET_NAME_PATTERN = /^[A-Z_][A-Z0-9_]*$/;
/** As long as a path segment of the API may be (Fastify's maxParamLength). */
const MAX_SECRET_NAME_CHARS = 100;
/** In UTF-8 bytes: every secret of a project fits an environment, beside a command line. */
export const MAX_SECRET_VALUE_BYTES = 16 * 1024;
export const MAX_SECRETS_PER_PROJECT = 50;

/**
 * Names a secret may not have, because the sandbox, its shell or a program's loader reads them
 * before the command does: the sandbox's own variables (its egress proxy's too), the shell's
 * start-up and parsing, the dynamic loader and locale, runtimes' options that load code, git's
 * and Errand's own.
 */
const RESERVED_NAMES: ReadonlySet<string> = new Set([
  'PATH',
  'HOME',
  'LANG',
  'LANGUAGE',
  'TERM',
  'TMPDIR',
  'PWD',
  'OLDPWD',
  'SHELL',
  'USER',
  'LOGNAME',
  'ENV',
  'IFS',
  'CDPATH',
  'PS4',
  'SHELLOPTS',
  'BASHOPTS',
  'GLOBIGNORE',
  'PROMPT_COMMAND',
  'GCONV_PATH',
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_REPL_EXTERNAL_MODULE',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'RUBYOPT',
  'RUBYLIB',
  // The egress proxy's, which the sandbox sets for a run with an allowlist.
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'ALL_PROXY',
  'NO_PROXY',
  'YARN_HTTP_PROXY',
  'YARN_HTTPS_PROXY',
]);
/** Prefixes of reserved names: LD_PRELOAD, LC_ALL, BASH_ENV, PYTHONPATH, GIT_DIR, ERRAND_… */
const RESERVED_PREFIXES = ['LD_', 'LC_', 'BASH_', 'PYTHON', 'GIT_', 'ERRAND_'] as const;

/** A secret as a turn uses it. */
export interface TurnSecret {
  name: string;
  value: string;
  exposure: SecretExposure;
}

interface SecretsContext {
  db: Db;
  config: Pick<Config, 'secretKey'>;
}

/** Why `name` cannot be a secret's name, or undefined when it can. */
function secretNameRefusal(name: string): string | undefined {
  if (name.length === 0 || name.length > MAX_SECRET_NAME_CHARS)
    return `a secret's name is 1 to ${MAX_SECRET_NAME_CHARS} characters`;
  if (!SECRET_NAME_PATTERN.test(name))
    return `${JSON.stringify(name)} is not a secret's name: capital letters, digits and underscores, not a digit first (as NPM_TOKEN)`;
  const prefix = RESERVED_PREFIXES.find((p) => name.startsWith(p));
  if (RESERVED_NAMES.has(name) || prefix)
    return `${name} is reserved${prefix ? ` (as every name starting with ${prefix})` : ''}: the sandbox, its shell or a program's loader reads it before the command does; choose another name`;
  return undefined;
}

/** Why `value` cannot be a secret's value, or undefined when it can. */
function secretValueRefusal(value: string): string | undefined {
  if (value.length < MIN_SECRET_CHARS)
    return `"value" must be at least ${MIN_SECRET_CHARS} characters: a shorter one could not be told apart from ordinary text, so it could not be kept out of outputs`;
  if (Buffer.byteLength(value, 'utf8') > MAX_SECRET_VALUE_BYTES)
    return `"value" must be at most ${MAX_SECRET_VALUE_BYTES} bytes (UTF-8)`;
  if (value.includes('\0')) return '"value" contains a NUL character, which no environment holds';
  return undefined;
}

function checkName(name: string): void {
  const refusal = secretNameRefusal(name);
  if (refusal) throw new AppError('bad_request', refusal);
}

function secretKey(ctx: SecretsContext): string {
  if (!ctx.config.secretKey)
    throw new AppError(
      'bad_request',
      'storing secrets needs ERRAND_SECRET_KEY set on the server (they are encrypted with it)',
    );
  return ctx.config.secretKey;
}

/** Locks the project's row, so that its secrets are counted and changed one writer at a time. */
async function lockProject(trx: Transaction<Database>, projectId: string): Promise<void> {
  const row = await trx
    .selectFrom('projects')
    .select('id')
    .where('id', '=', projectId)
    .forUpdate()
    .executeTakeFirst();
  if (!row) throw new AppError('not_found', `project ${projectId} not found`);
}

/** A secret's row as the admin API shows it (src/records/secret.ts): never its value. */
export function toSecretRecord(row: {
  name: string;
  exposure: SecretExposure;
  created_at: Date;
  updated_at: Date;
}): SecretRecord {
  return {
    name: row.name,
    exposure: row.exposure,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/**
 * Creates the secret or replaces its value and exposure (the default, "setup", when none is
 * given). `created` says which; the project's row lock makes the answer and the count exact.
 */
export async function putSecret(
  ctx: SecretsContext,
  projectId: string,
  name: string,
  input: { value: string; exposure?: SecretExposure | undefined },
): Promise<{ secret: SecretRecord; created: boolean }> {
  checkName(name);
  const refusal = secretValueRefusal(input.value);
  if (refusal) throw new AppError('bad_request', refusal);
  const sealed = seal(secretKey(ctx), input.value);
  const exposure = input.exposure ?? 'setup';
  return ctx.db.transaction().execute(async (trx) => {
    await lockProject(trx, projectId);
    const names = await trx
      .selectFrom('project_secrets')
      .select('name')
      .where('project_id', '=', projectId)
      .execute();
    const created = !names.some((row) => row.name === name);
    if (created && names.length >= MAX_SECRETS_PER_PROJECT)
      throw new AppError(
        'conflict',
        `project ${projectId} already has ${MAX_SECRETS_PER_PROJECT} secrets, the most a project may have; delete one first`,
      );
    const row = await trx
      .insertInto('project_secrets')
      .values({ project_id: projectId, name, sealed_value: sealed, exposure })
      .onConflict((oc) =>
        oc.columns(['project_id', 'name']).doUpdateSet((eb) => ({
          sealed_value: eb.ref('excluded.sealed_value'),
          exposure: eb.ref('excluded.exposure'),
          updated_at: eb.fn('now'),
        })),
      )
      .returning(['name', 'exposure', 'created_at', 'updated_at'])
      .executeTakeFirstOrThrow();
    return { secret: toSecretRecord(row), created };
  });
}

/** The project's secrets by name, without their values. */
export async function listSecrets(ctx: SecretsContext, projectId: string): Promise<SecretRecord[]> {
  const project = await ctx.db
    .selectFrom('projects')
    .select('id')
    .where('id', '=', projectId)
    .executeTakeFirst();
  if (!project) throw new AppError('not_found', `project ${projectId} not found`);
  const rows = await ctx.db
    .selectFrom('project_secrets')
    .select(['name', 'exposure', 'created_at', 'updated_at'])
    .where('project_id', '=', projectId)
    .orderBy('name')
    .execute();
  return rows.map(toSecretRecord);
}

/** Removes the secret; the next turn's commands no longer get it. */
export async function deleteSecret(
  ctx: SecretsContext,
  projectId: string,
  name: string,
): Promise<void> {
  checkName(name);
  await ctx.db.transaction().execute(async (trx) => {
    await lockProject(trx, projectId);
    const deleted = await trx
      .deleteFrom('project_secrets')
      .where('project_id', '=', projectId)
      .where('name', '=', name)
      .executeTakeFirst();
    if (deleted.numDeletedRows === 0n)
      throw new AppError('not_found', `project ${projectId} has no secret ${name}`);
  });
}

/** A secret that cannot be opened: the turn cannot run as the project means it to. */
export class SecretUnavailableError extends Error {
  override name = 'SecretUnavailableError';
}

/**
 * The project's secrets with their values, for a turn. A value that does not open (the secret
 * key is not set, or is not the one it was sealed with) is an error naming the secret.
 */
export async function turnSecrets(ctx: SecretsContext, projectId: string): Promise<TurnSecret[]> {
  const rows = await ctx.db
    .selectFrom('project_secrets')
    .select(['name', 'sealed_value', 'exposure'])
    .where('project_id', '=', projectId)
    .orderBy('name')
    .execute();
  const key = ctx.config.secretKey;
  return rows.map((row) => {
    if (!key)
      throw new SecretUnavailableError(
        `secret ${row.name} cannot be opened: ERRAND_SECRET_KEY is not set on this worker`,
      );
    try {
      return { name: row.name, value: open(key, row.sealed_value), exposure: row.exposure };
    } catch {
      throw new SecretUnavailableError(
        `secret ${row.name} cannot be opened: ERRAND_SECRET_KEY on this worker is not the key it was stored with; set it again`,
      );
    }
  });
}
