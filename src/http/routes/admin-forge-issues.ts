// GET /v2/admin/projects/{id}/forge-issues/{number}: an issue of the project's repository, read
// from its forge with the project's credentials (`errand eval from-git` puts a fixed issue's
// text in the task's prompt). A maintainer's read: the project's token sees what the caller
// might not. A plain git project has no forge and is refused; a forge's failure is its own
// error (502 forge_failed), never the caller's fault.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { ForgeError, type ForgeIssue } from '../../forges/types.ts';
import { access } from '../../keys/route-access.ts';
import { getProject } from '../../projects/service.ts';
import { type ForgeIssueRecord, forgeIssueRecord } from '../../records/forge-issue.ts';
import { errors, json } from '../../responses.ts';

const NUMBER = '"number" must be a whole number from 1 to 2147483647';

const params = z.object({
  id: z.string().describe('The project id (prj_ and 20 characters).'),
  number: z.coerce
    .number({ error: NUMBER })
    .int({ error: NUMBER })
    .min(1, { error: NUMBER })
    .max(2_147_483_647, { error: NUMBER })
    .describe('The issue’s number (GitLab: its iid; GitHub and Gitea: a pull request’s too).'),
});
const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };

/** The project's issue `number`, read from its forge now. */
async function readIssue(
  ctx: AppContext,
  projectId: string,
  number: number,
): Promise<ForgeIssueRecord> {
  const project = await getProject(ctx, projectId);
  const forge = ctx.forges.client(project, project.repository);
  if (!forge.client || forge.kind === 'git')
    throw new AppError(
      'bad_request',
      `project ${projectId} has no forge (its repository is a plain git remote): there are no issues to read`,
    );
  const name = forge.provider.name;
  let issue: ForgeIssue | undefined;
  try {
    issue = await forge.client.issue(number);
  } catch (err) {
    // The forge's messages name the call and what to fix, never a credential.
    // A failure that waiting may mend (the forge down, its rate limit) is a 503 to try again;
    // a refusal (credentials, permissions) is a 502 that trying again will not change.
    if (err instanceof ForgeError)
      throw new AppError(err.transient ? 'unavailable' : 'forge_failed', err.message);
    throw err;
  }
  if (!issue)
    throw new AppError(
      'not_found',
      `${name} has no issue #${number} in the project's repository, or the project's credentials cannot see it`,
    );
  return { forge: forge.kind, ...issue };
}

export function registerAdminForgeIssueRoute(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v2/admin/projects/:id/forge-issues/:number',
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'Get forge issue',
        description:
          "An issue of the project's repository as its forge (GitHub, GitLab, Gitea) tells it now, read with the project's forge credentials: title, body, state and page. GitHub and Gitea answer a pull request's number too, with its description. 404 when the forge has no such issue (or the credentials cannot see it); 400 for a project on a plain git remote; 502 when the forge refuses or fails.",
        params,
        response: {
          200: json('The issue.', forgeIssueRecord),
          ...errors(400, 401, 403, 404, 502, 503),
        },
      },
    },
    async (request) => readIssue(ctx, request.params.id, request.params.number),
  );
}
