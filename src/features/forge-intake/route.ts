// POST /v2/forges/{projectId}/webhook: where a project's forge (GitHub, GitLab, Gitea/Forgejo)
// sends its webhook requests. No API key: the forge's signature with the project's webhook
// secret is the authentication, checked over the body's exact bytes, so this route takes its
// JSON body raw (a content-type parser of its own scope) and parses it only once it is let in.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { findBodyProblem } from '../../http/nul.ts';
import { access } from '../../keys/route-access.ts';
import { errors } from '../../responses.ts';
import { receiveRequest, verifyRequest } from './receive.ts';

/** The largest request taken: forges' payloads of a comment or an issue are tens of kB. */
const MAX_DELIVERY_BYTES = 5 * 1024 * 1024;

const answer = z.object({
  outcome: z
    .enum(['queued', 'duplicate', 'build', 'watch', 'ignored'])
    .describe(
      "queued: its events will be worked on; duplicate: every event of it was taken before (a redelivery, or the same signed events under another delivery id); build: a push that moved the project's base ref, and a background build of the project's environment was asked for; watch: a check, a pipeline, a pull request's change or a push of a base that concerns pull requests Errand watches, which it looks at now; ignored: a ping, a push that asks for nothing, or an event Errand has no use for.",
    ),
  events: z
    .number()
    .int()
    .describe('How many events were queued; for watch, how many watched pull requests it names.'),
});

/** The verified body as JSON, or the 400 that says why it is not usable. */
function parseBody(raw: Buffer): unknown {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new AppError('invalid_json', 'request body is not valid JSON');
  }
  const problem = findBodyProblem(body);
  if (problem)
    throw new AppError(
      'bad_request',
      problem.kind === 'nul'
        ? `"${problem.path}" contains a NUL character (\\u0000), which cannot be stored`
        : 'the delivery is nested deeper than Errand reads',
    );
  return body;
}

export async function registerForgeWebhook(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await app.register(async (scope) => {
    // The bytes as sent: a signature is over them, not over a re-serialisation of the JSON.
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser(
      'application/json',
      { parseAs: 'buffer', bodyLimit: MAX_DELIVERY_BYTES },
      (_request, body, done) => done(null, body),
    );
    scope.withTypeProvider<ZodTypeProvider>().post(
      '/v2/forges/:projectId/webhook',
      {
        config: access('open'),
        bodyLimit: MAX_DELIVERY_BYTES,
        schema: {
          tags: ['forges'],
          summary: 'Forge webhook',
          description:
            "Where the project's forge sends webhook deliveries (Content-Type: application/json). Authenticated by the forge's signature with the project's forgeWebhookSecret: GitHub X-Hub-Signature-256, GitLab X-Gitlab-Token, Gitea/Forgejo X-Gitea-Signature or X-Forgejo-Signature. An unknown project, a project without a secret and a bad or missing signature are all the same 401. Each event is taken once, by what the forge signed that names it (a comment's, review's or note's id; an issue, its label and the issue's time of change), never by the delivery id header, which no signature covers: a redelivery, or the same signed body under another delivery id, is acknowledged (200, duplicate) and not acted on twice. A push to the project's base ref (a branch, not deleted) asks for a background build of the project's environment when it has a setup command and runs commands (202, build); a redelivered push asks again, which builds nothing twice (at most one build of a project waits, and a snapshot already there is not built again). Other pushes are ignored (200).",
          params: z.object({ projectId: z.string().describe('The project id.') }),
          response: {
            200: answer.describe(
              'Events taken before, or an event Errand has no use for: nothing queued.',
            ),
            202: answer.describe(
              "The events were queued, or a build of the project's environment was asked for.",
            ),
            ...errors(400, 401, 413, 415, 503),
          },
        },
      },
      async (request, reply) => {
        const raw = request.body;
        if (!Buffer.isBuffer(raw))
          throw new AppError(
            'unsupported_media_type',
            'the delivery must be JSON (Content-Type: application/json)',
          );
        const verified = await verifyRequest(ctx, request.params.projectId, request.headers, raw);
        const result = await receiveRequest(ctx, verified, request.headers, parseBody(raw));
        const accepted = result.outcome !== 'duplicate' && result.outcome !== 'ignored';
        return reply.code(accepted ? 202 : 200).send(result);
      },
    );
  });
}
