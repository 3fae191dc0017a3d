// Admin API for a project's secrets, under /v2/admin/projects/{id}/secrets: PUT one by name
// (create or replace), list them, delete one. A value goes in and never comes out: the answers
// carry names, exposures and times. The schemas check the body's shape; the secrets service
// checks the name, the value and what needs the server (ERRAND_SECRET_KEY, the project). The
// setup command gets every secret: a change asks for the environment to be built again.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditAfter, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { afterSecretChanged } from '../../projects/environment-builds.ts';
import {
  deleteSecret,
  listSecrets,
  MAX_SECRET_VALUE_BYTES,
  MAX_SECRETS_PER_PROJECT,
  putSecret,
} from '../../projects/secrets.ts';
import { SECRET_EXPOSURES, secretRecord } from '../../records/secret.ts';
import { errorBody, errors, json } from '../../responses.ts';
import { MIN_SECRET_CHARS } from '../../secrets/scrub.ts';

const VALUE = `"value" must be a string of ${MIN_SECRET_CHARS} characters to ${MAX_SECRET_VALUE_BYTES} bytes`;
const EXPOSURE = `"exposure" must be one of ${SECRET_EXPOSURES.join(', ')}`;

const putBody = z.strictObject(
  {
    value: z
      .string({
        error: (issue) => (issue.input === undefined ? '"value" is required' : VALUE),
      })
      .describe(
        `The secret's value: ${MIN_SECRET_CHARS} characters to ${MAX_SECRET_VALUE_BYTES} bytes (UTF-8). Never shown again.`,
      ),
    exposure: z
      .enum(SECRET_EXPOSURES, { error: EXPOSURE })
      .optional()
      .describe(
        'setup (the default): the setup and maintenance commands only. commands: also the agent’s commands and an engine’s shell. Never a model.',
      ),
  },
  {
    error: (issue) =>
      issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
  },
);

const id = z.string().describe('The project id (prj_ and 20 characters).');
const name = z
  .string()
  .describe(
    'The secret’s name, as an environment variable’s: capitals, digits and underscores, not a digit first (NPM_TOKEN).',
  );
const projectParams = z.object({ id });
const secretParams = z.object({ id, name });

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };
const base = '/v2/admin/projects/:id/secrets';

export function registerAdminSecretRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.put(
    `${base}/:name`,
    {
      config: { ...access('maintainer'), audit: { action: 'secret.set', target: 'secret' } },
      schema: {
        ...admin,
        summary: 'Set secret',
        description:
          'Creates the secret, or replaces its value and exposure. Sealed with the server’s secret key (needs ERRAND_SECRET_KEY); never returned. Names the sandbox or a program’s loader reads first (PATH, HOME, LD_*, GIT_*, ERRAND_*, …) are refused.',
        params: secretParams,
        body: putBody,
        response: {
          200: json('Replaced.', secretRecord),
          201: json('Created.', secretRecord),
          ...errors(400, 401, 403, 404, 413, 415, 503),
          409: json(`The project already has ${MAX_SECRETS_PER_PROJECT} secrets.`, errorBody),
        },
      },
    },
    async (request, reply) => {
      const { secret, created } = await putSecret(
        ctx,
        request.params.id,
        request.params.name,
        request.body,
      );
      // The secret's name and project: never its value. After putSecret's own transaction.
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'secret.set',
        target: { kind: 'secret', id: request.params.name },
        details: { projectId: request.params.id, created },
      });
      await afterSecretChanged(ctx, request.params.id);
      return reply.code(created ? 201 : 200).send(secret);
    },
  );
  typed.get(
    base,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'List secrets',
        params: projectParams,
        response: {
          200: json(
            'The project’s secrets by name, without their values.',
            z.object({ secrets: z.array(secretRecord) }),
          ),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => ({ secrets: await listSecrets(ctx, request.params.id) }),
  );
  typed.delete(
    `${base}/:name`,
    {
      config: { ...access('maintainer'), audit: { action: 'secret.delete', target: 'secret' } },
      schema: {
        ...admin,
        summary: 'Delete secret',
        description: 'Removes the secret: turns that start from now on do not get it.',
        params: secretParams,
        response: {
          204: z.null().describe('Deleted.'),
          ...errors(400, 401, 403, 404, 503),
        },
      },
    },
    async (request, reply) => {
      await deleteSecret(ctx, request.params.id, request.params.name);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'secret.delete',
        target: { kind: 'secret', id: request.params.name },
        details: { projectId: request.params.id },
      });
      await afterSecretChanged(ctx, request.params.id);
      return reply.code(204).send(null);
    },
  );
}
