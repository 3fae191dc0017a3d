// A forge's issue as the admin API returns it, declared once: the OpenAPI component ForgeIssue
// and the typed client's ForgeIssue.
import { z } from 'zod';

export const forgeIssueRecord = z
  .object({
    forge: z.enum(['github', 'gitlab', 'gitea']).describe('The forge that answered.'),
    number: z
      .number()
      .int()
      .describe('The issue’s number (GitLab: its iid), or the pull request’s.'),
    title: z.string(),
    body: z
      .string()
      .describe('Its description, as the forge keeps it (Markdown); empty when none.'),
    state: z.enum(['open', 'closed']),
    url: z.string().describe('The page a person opens.'),
    pullRequest: z
      .boolean()
      .describe(
        'Whether the number is a pull request’s: GitHub’s and Gitea’s issues answer those too, with the pull request’s description.',
      ),
  })
  .meta({
    id: 'ForgeIssue',
    description: 'An issue of the project’s repository, as its forge tells it now.',
  });

export type ForgeIssueRecord = z.infer<typeof forgeIssueRecord>;
