// The dashboard's schedule routes under /projects/:id/schedules, for maintainers (as the admin
// API): the form is checked by the API's body schema and the same store, and a refusal is shown
// on the form with its message. Registered inside the dashboard's signed-in scope, so its
// session, Origin check and headers apply.
import type { FastifyInstance } from 'fastify';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { type Form, given, parse, sendPage, session } from '../../dashboard/requests.ts';
import { AppError } from '../../errors.ts';
import { access } from '../../keys/route-access.ts';
import type { Principal } from '../../keys/service.ts';
import { getProject, toProjectRecord } from '../../projects/service.ts';
import type { ProjectRecord } from '../../records/project.ts';
import { emptyScheduleForm, type ScheduleForm, schedulesPage } from './pages.ts';
import { createBody } from './routes.ts';
import { createSchedule, deleteSchedule, listSchedules, updateSchedule } from './store.ts';

type ProjectParams = { Params: { id: string } };
type ScheduleParams = { Params: { id: string; scheduleId: string } };

function formValues(form: Form): ScheduleForm {
  return {
    name: form.name ?? '',
    cron: form.cron ?? '',
    timezone: form.timezone ?? '',
    prompt: form.prompt ?? '',
    mode: form.mode ?? 'code',
    model: form.model ?? '',
  };
}

/** A refusal to show on the page; anything else (a database failure) is the error page's. */
function refusal(err: unknown): AppError {
  if (err instanceof AppError && err.status < 500) return err;
  throw err;
}

async function listPage(
  ctx: AppContext,
  principal: Principal,
  current: ProjectRecord,
  opts: { values?: ScheduleForm; error?: string; notice?: string },
): Promise<string> {
  return schedulesPage(principal, current, await listSchedules(ctx, current.id), {
    values: emptyScheduleForm,
    ...opts,
  });
}

export function registerSchedulePages(pages: FastifyInstance, ctx: AppContext): void {
  const base = '/projects/:id/schedules';
  const load = async (id: string) => toProjectRecord(ctx, await getProject(ctx, id));

  pages.get<ProjectParams>(base, { config: access('maintainer') }, async (request, reply) => {
    const current = await load(request.params.id);
    return sendPage(reply, 200, await listPage(ctx, session(request), current, {}));
  });

  pages.post<ProjectParams & { Body: Form | undefined }>(
    base,
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await load(request.params.id);
      const form = request.body ?? {};
      const values = formValues(form);
      try {
        const body = parse(createBody(ctx.config.maxPromptChars), {
          cron: form.cron ?? '',
          prompt: form.prompt ?? '',
          name: given(form, 'name'),
          timezone: given(form, 'timezone'),
          mode: given(form, 'mode'),
          model: given(form, 'model'),
        });
        const made = await createSchedule(ctx, whoOf(request, principal), current.id, body);
        const notice = `Schedule ${made.name} created.`;
        return sendPage(reply, 201, await listPage(ctx, principal, current, { notice }));
      } catch (err) {
        const refused = refusal(err);
        const page = await listPage(ctx, principal, current, { values, error: refused.message });
        return sendPage(reply, refused.status, page);
      }
    },
  );

  pages.post<ScheduleParams & { Body: Form | undefined }>(
    `${base}/:scheduleId/paused`,
    { config: access('maintainer') },
    async (request, reply) => {
      const current = await load(request.params.id);
      const paused = request.body?.paused;
      if (paused !== 'true' && paused !== 'false')
        throw new AppError('bad_request', '"paused" must be true or false');
      const who = whoOf(request, session(request));
      await updateSchedule(ctx, who, current.id, request.params.scheduleId, {
        paused: paused === 'true',
      });
      return reply.redirect(`/projects/${current.id}/schedules`, 303);
    },
  );

  pages.post<ScheduleParams>(
    `${base}/:scheduleId/delete`,
    { config: access('maintainer') },
    async (request, reply) => {
      const current = await load(request.params.id);
      const who = whoOf(request, session(request));
      await deleteSchedule(ctx, who, current.id, request.params.scheduleId);
      return reply.redirect(`/projects/${current.id}/schedules`, 303);
    },
  );
}
