// Admin API for eval runs, under /v2/admin/evals: start a run from a suite, list runs, read one
// with its per-agent table and results, cancel one. The routes name no project in their path:
// each checks the principal against the projects the suite's tasks run in (a maintainer of each
// to start or cancel, a reader of each to read).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { access } from '../../keys/route-access.ts';
import type { Principal } from '../../keys/service.ts';
import { errors, json } from '../../responses.ts';
import { cancelRun, createRun, getRun, listRuns } from './store.ts';
import { suiteBody } from './suite.ts';
import { evalRunRecord, evalRunSummary } from './types.ts';

const evals = { tags: ['evals'], security: [{ bearerAuth: [] }] };
const base = '/v2/admin/evals';
const runParams = z.object({ id: z.string().describe('The run id (evr_ and 20 characters).') });

function principalOf(principal: Principal | null | undefined): Principal {
  if (!principal) throw new AppError('unauthorized', 'sign in or send an API key first');
  return principal;
}

export function registerEvalRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    base,
    {
      config: { ...access('signed-in'), audit: { action: 'eval.create', target: 'eval' } },
      schema: {
        ...evals,
        summary: 'Start eval run',
        description:
          "Starts a run of the suite (docs/eval.md): each task × agent × repeat becomes a real job of the task's project, created as the API creates one (the project's rate limit and budget apply; a create refused makes that result an error), at most `concurrency` at once, judged by the task's check. Needs the maintainer role on every project the suite names. A suite that could not run is refused, and nothing is written.",
        body: suiteBody(ctx.config.maxPromptChars),
        response: {
          201: json('The new run, its results pending.', evalRunRecord),
          ...errors(400, 401, 403, 413, 415, 503),
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request.principal);
      const run = await createRun(ctx, principal, whoOf(request, principal), request.body);
      return reply.code(201).send(run);
    },
  );
  typed.get(
    base,
    {
      config: access('signed-in'),
      schema: {
        ...evals,
        summary: 'List eval runs',
        response: {
          200: json(
            'The runs on projects the caller may read, newest first, without their results.',
            z.object({ runs: z.array(evalRunSummary) }),
          ),
          ...errors(401, 503),
        },
      },
    },
    async (request) => ({ runs: await listRuns(ctx, principalOf(request.principal)) }),
  );
  typed.get(
    `${base}/:id`,
    {
      config: access('signed-in'),
      schema: {
        ...evals,
        summary: 'Get eval run',
        params: runParams,
        response: {
          200: json('The run, its per-agent table and its results.', evalRunRecord),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => getRun(ctx, principalOf(request.principal), request.params.id),
  );
  typed.post(
    `${base}/:id/cancel`,
    {
      config: { ...access('signed-in'), audit: { action: 'eval.cancel', target: 'eval' } },
      schema: {
        ...evals,
        summary: 'Cancel eval run',
        description:
          'Cancels its pending results and its running ones, whose jobs are archived. A run already over is returned as it is.',
        params: runParams,
        response: {
          200: json('The run as it is now.', evalRunRecord),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => {
      const principal = principalOf(request.principal);
      return cancelRun(ctx, principal, whoOf(request, principal), request.params.id);
    },
  );
}
