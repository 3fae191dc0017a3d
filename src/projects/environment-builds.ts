// When a project's environment is to be built again in the background, as the admin API and the
// dashboard ask after a change has committed: a project created with a setup command, an update
// of what the setup runs with (the command, its network, the key files), a secret set or
// removed (the setup gets every secret), a push that moved the project's base ref (the forge's
// webhook), and an admin's rebuild. The build queue
// (src/queue/environment-builds.ts) is seen here through the one method used, so that this
// layer does not import the queue's.
import type { Db } from '../db/database.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId } from '../ids.ts';
import type { Logger } from '../log.ts';

/** Why a build is asked for. */
type EnvironmentRequestReason = 'created' | 'settings' | 'base-moved' | 'rebuild';

interface EnvironmentRequestContext {
  db: Db;
  log: Logger;
  queue: {
    environmentBuilds: {
      request(projectId: string, reason: EnvironmentRequestReason): Promise<void>;
    };
  };
}

/**
 * Whether an update from `before` to `after` changes what the environment is built from: the
 * setup command, its network or the allowlist, the key files. The maintenance command runs
 * after a restore and is not part of it. A build asked for in vain finds its snapshot and
 * builds nothing, so a change of the allowlist counts whatever network the setup has.
 */
function environmentSettingsChanged(before: ProjectRow, after: ProjectRow): boolean {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  return (
    before.setup_command !== after.setup_command ||
    before.network_setup !== after.network_setup ||
    !same(before.network_allow, after.network_allow) ||
    !same(before.environment_key_files, after.environment_key_files)
  );
}

/**
 * Asks for a build of the project's environment; false when the queue refused. The change it
 * follows has committed, so a refusal is logged, never thrown: the next turn builds the
 * environment anyway.
 */
async function requestBuild(
  ctx: EnvironmentRequestContext,
  projectId: string,
  reason: EnvironmentRequestReason,
): Promise<boolean> {
  try {
    await ctx.queue.environmentBuilds.request(projectId, reason);
    return true;
  } catch (err) {
    ctx.log.warn(
      { projectId, reason, err: err instanceof Error ? err.message : String(err) },
      'environment build request failed',
    );
    return false;
  }
}

/** After a create: a build when the project has a setup command. */
export async function afterProjectCreated(
  ctx: EnvironmentRequestContext,
  row: ProjectRow,
): Promise<void> {
  if (row.setup_command !== null) await requestBuild(ctx, row.id, 'created');
}

/** After an update: a build when the project has a setup command and what it runs with changed. */
export async function afterProjectUpdated(
  ctx: EnvironmentRequestContext,
  before: ProjectRow,
  after: ProjectRow,
): Promise<void> {
  if (after.setup_command !== null && environmentSettingsChanged(before, after))
    await requestBuild(ctx, after.id, 'settings');
}

/**
 * After a secret was set or removed: a build when the project has a setup command, which gets
 * every secret whatever its exposure. A project that is gone by now needs none.
 */
export async function afterSecretChanged(
  ctx: EnvironmentRequestContext,
  projectId: string,
): Promise<void> {
  const row = await ctx.db
    .selectFrom('projects')
    .select('setup_command')
    .where('id', '=', projectId)
    .executeTakeFirst()
    // The change has committed: a failed read is logged like a refused request.
    .catch((err: unknown) => {
      ctx.log.warn(
        { projectId, err: err instanceof Error ? err.message : String(err) },
        'environment build request failed',
      );
      return undefined;
    });
  if (row?.setup_command) await requestBuild(ctx, projectId, 'settings');
}

/**
 * After a push moved the project's base ref: a build when the project has a setup command and
 * runs commands (without them no turn runs the setup, so there is no environment to keep).
 * True when one was asked for. A push delivered twice asks twice, which is harmless: a build
 * already waiting is the answer to the second, and a builder that has the snapshot builds
 * nothing.
 */
export async function afterBaseMoved(
  ctx: EnvironmentRequestContext,
  row: ProjectRow,
): Promise<boolean> {
  if (!row.setup_command || !row.commands_enabled) return false;
  return requestBuild(ctx, row.id, 'base-moved');
}

/**
 * An admin's rebuild: refused for an unknown project (404) and one without a setup command
 * (400), which has no environment. Here a refusal of the queue is the answer's, thrown.
 */
export async function rebuildEnvironment(
  ctx: EnvironmentRequestContext,
  projectId: string,
): Promise<void> {
  const row = isId('prj', projectId)
    ? await ctx.db
        .selectFrom('projects')
        .select('setup_command')
        .where('id', '=', projectId)
        .executeTakeFirst()
    : undefined;
  if (!row) throw new AppError('not_found', `project ${projectId} not found`);
  if (row.setup_command === null)
    throw new AppError(
      'bad_request',
      `project ${projectId} has no setup command, so it has no environment to build: set "setupCommand" first`,
    );
  await ctx.queue.environmentBuilds.request(projectId, 'rebuild');
}
