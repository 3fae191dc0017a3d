// The project pages' routes: the list with the new-project form, and a project's settings. The
// forms are checked by the admin API's schemas (src/projects/schemas.ts) and saved through the
// project service; a refusal is shown on the form with its message.
import type { FastifyInstance } from 'fastify';
import { auditedChange, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { jobCounts } from '../jobs/read.ts';
import { type MonthUsage, monthUsage } from '../jobs/spend.ts';
import { access } from '../keys/route-access.ts';
import { isServerAdmin, type Principal } from '../keys/service.ts';
import type { ProjectFields } from '../projects/changes.ts';
import { afterProjectCreated, afterProjectUpdated } from '../projects/environment-builds.ts';
import { projectCreateBody, projectUpdateBody } from '../projects/schemas.ts';
import {
  createProject,
  getProject,
  listProjects,
  toProjectRecord,
  updateProject,
} from '../projects/service.ts';
import { DEFAULT_AUTOFIX_ATTEMPTS, type ProjectRecord } from '../records/project.ts';
import { projectsPage } from './project-pages.ts';
import { type Form, given, parse, sendPage, session } from './requests.ts';
import { projectSettingsPage } from './settings-page.ts';

/** The admin API's create body from the new-project form. */
function createFields(form: Form): ProjectFields {
  return parse(projectCreateBody, {
    name: form.name ?? '',
    repository: form.repository ?? '',
    ...optional(form, [
      'ref',
      'model',
      'engine',
      'forge',
      'forgeUrl',
      'forgeTokenEnv',
      'forgeToken',
    ]),
    draftPullRequests: form.draftPullRequests === '1',
    ...commandFields(form, undefined),
    ...networkFields(form),
    ...budgetFields(form),
    ...prWatchFields(form),
  });
}

/** The network policy of a project form: the two modes and the patterns, one a line. */
function networkFields(form: Form): Record<string, unknown> {
  return {
    network: {
      setup: given(form, 'networkSetup') ?? 'none',
      commands: given(form, 'networkCommands') ?? 'none',
      allow: (form.networkAllow ?? '').split(/[\s,]+/).filter(Boolean),
    },
  };
}

/** The budgets of a project form: an empty field is no budget. */
function budgetFields(form: Form): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const name of ['jobBudgetUsd', 'monthlyBudgetUsd'] as const) {
    const value = given(form, name)?.replace(/^\$/, '');
    // The schema refuses what is not a number above 0, naming the field.
    body[name] =
      value === undefined ? null : /^\d+(\.\d*)?$|^\.\d+$/.test(value) ? Number(value) : value;
  }
  return body;
}

/**
 * The pull request watch of a project form: an empty count is the default, no check globs
 * (one a line, since check names hold spaces and commas) every check. A select not sent keeps
 * the setting.
 */
function prWatchFields(form: Form): Record<string, unknown> {
  const attempts = given(form, 'autofixAttempts');
  const checks = (form.autofixChecks ?? '')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean);
  return {
    // The schema refuses what is not a whole number in range, naming the field.
    autofixAttempts:
      attempts === undefined
        ? DEFAULT_AUTOFIX_ATTEMPTS
        : /^\d+$/.test(attempts)
          ? Number(attempts)
          : attempts,
    autofixChecks: checks.length > 0 ? checks : null,
    ...optional(form, ['autoMerge', 'mergeMethod', 'conflictStrategy']),
  };
}

/**
 * The key files of a project form, one glob a line; none is the default (null). The schema
 * checks each glob, naming it.
 */
function keyFiles(form: Form): string[] | null {
  const globs = (form.environmentKeyFiles ?? '')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean);
  return globs.length > 0 ? globs : null;
}

const LIMIT_FIELDS = [
  'commandTimeoutSeconds',
  'commandCpuSeconds',
  'commandMemoryMb',
  'commandProcesses',
  'commandFileSizeMb',
  'commandDiskMb',
] as const;

/**
 * The command settings of a project form. A limit left empty is the default; on the settings
 * form a limit shown and saved unchanged is left alone, so saving does not pin today's default.
 */
function commandFields(form: Form, current: ProjectRecord | undefined): Record<string, unknown> {
  const body: Record<string, unknown> = {
    commandsEnabled: form.commandsEnabled === '1',
    setupCommand: given(form, 'setupCommand') ?? null,
    maintenanceCommand: given(form, 'maintenanceCommand') ?? null,
    checkCommand: given(form, 'checkCommand') ?? null,
  };
  const globs = keyFiles(form);
  // An empty field shows both the default (null) and no key files ([], set through the API):
  // saved empty, the latter is kept.
  if (!(globs === null && current?.environmentKeyFiles?.length === 0))
    body.environmentKeyFiles = globs;
  for (const name of LIMIT_FIELDS) {
    const value = given(form, name);
    // The schema refuses what is not a whole number in range, naming the field.
    if (value === undefined) body[name] = null;
    else if (current === undefined || value !== String(current[name])) body[name] = Number(value);
  }
  return body;
}

/**
 * The admin API's update body from the settings form: an emptied field resets it (null), and
 * empty credential fields keep the stored credentials.
 */
function updateFields(form: Form, current: ProjectRecord): ProjectFields {
  const body: Record<string, unknown> = {
    name: form.name ?? '',
    repository: form.repository ?? '',
    draftPullRequests: form.draftPullRequests === '1',
    ...commandFields(form, current),
    ...networkFields(form),
    ...budgetFields(form),
    ...prWatchFields(form),
  };
  for (const name of ['ref', 'model', 'forge', 'forgeUrl'] as const) {
    body[name] = given(form, name) ?? null;
  }
  const engine = given(form, 'engine');
  if (engine !== undefined) body.engine = engine;
  const tokenEnv = given(form, 'forgeTokenEnv');
  const token = given(form, 'forgeToken');
  if (form.clearCredentials === '1') body.forgeToken = null;
  else if (token !== undefined) body.forgeToken = token;
  else if (tokenEnv !== undefined) {
    if (tokenEnv !== current.forge.tokenEnv) body.forgeTokenEnv = tokenEnv;
  } else if (current.forge.credentials === 'token-env') body.forgeTokenEnv = null;
  return parse(projectUpdateBody, body);
}

function spent(months: Map<string, MonthUsage>, projectId: string): MonthUsage {
  const month = months.get(projectId);
  if (!month) throw new Error(`no month's usage for ${projectId}`);
  return month;
}

function optional(form: Form, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = given(form, name);
    if (value !== undefined) out[name] = value;
  }
  return out;
}

export function registerProjectRoutes(pages: FastifyInstance, ctx: AppContext): void {
  const projectRows = async (principal: Principal) => {
    const projects = isServerAdmin(principal)
      ? await listProjects(ctx)
      : principal.kind === 'key'
        ? [await getProject(ctx, principal.projectId ?? '')]
        : (await listProjects(ctx)).filter((row) => principal.roles.has(row.id));
    const ids = projects.map((row) => row.id);
    const counts = await jobCounts(ctx, ids);
    const months = await monthUsage(ctx, ids);
    return projects.map((row) => ({
      project: toProjectRecord(ctx, row),
      activeJobs: counts.get(row.id)?.active ?? 0,
      totalJobs: counts.get(row.id)?.total ?? 0,
      month: spent(months, row.id),
    }));
  };

  pages.get('/projects', { config: access('signed-in') }, async (request, reply) => {
    const principal = session(request);
    return sendPage(
      reply,
      200,
      // A new project has commands on, as the API's default.
      projectsPage(principal, await projectRows(principal), {
        values: { commandsEnabled: '1' },
      }),
    );
  });

  pages.post<{ Body: Form | undefined }>(
    '/projects',
    { config: access('admin') },
    async (request, reply) => {
      const principal = session(request);
      const form = request.body ?? {};
      try {
        const row = await auditedChange(ctx, whoOf(request, principal), async (db) => {
          const created = await createProject({ ...ctx, db }, createFields(form));
          return {
            result: created,
            entry: {
              action: 'project.create',
              target: { kind: 'project', id: created.id },
              details: { name: created.name },
            },
          };
        });
        await afterProjectCreated(ctx, row);
        return reply.redirect('/projects', 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        const { forgeToken, ...values } = form;
        return sendPage(
          reply,
          err.status,
          projectsPage(principal, await projectRows(principal), { values, error: err.message }),
        );
      }
    },
  );

  const project = async (id: string): Promise<ProjectRecord> =>
    toProjectRecord(ctx, await getProject(ctx, id));

  pages.get<{
    Params: { id: string };
    Querystring: {
      saved?: string;
      secret?: string;
      deleted?: string;
      rebuilt?: string;
      dropped?: string;
    };
  }>('/projects/:id/settings', { config: access('maintainer') }, async (request, reply) => {
    const principal = session(request);
    const current = await project(request.params.id);
    const { secret, deleted, rebuilt, dropped } = request.query;
    return sendPage(
      reply,
      200,
      await projectSettingsPage(ctx, principal, current, {
        saved: request.query.saved === '1',
        secrets: { saved: secret, deleted },
        environments: { rebuilt: rebuilt === '1', dropped },
      }),
    );
  });

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/settings',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      const form = request.body ?? {};
      try {
        const fields = updateFields(form, current);
        const { before, row } = await auditedChange(ctx, whoOf(request, principal), async (db) => ({
          result: await updateProject({ ...ctx, db }, current.id, fields),
          // Which fields, never their values: a repository's URL can carry a credential.
          entry: {
            action: 'project.update',
            target: { kind: 'project', id: current.id },
            details: { fields: Object.keys(fields).sort() },
          },
        }));
        await afterProjectUpdated(ctx, before, row);
        return reply.redirect(`/projects/${current.id}/settings?saved=1`, 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        const { forgeToken, ...values } = form;
        return sendPage(
          reply,
          err.status,
          await projectSettingsPage(ctx, principal, current, { values, error: err.message }),
        );
      }
    },
  );
}
