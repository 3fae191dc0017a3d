// An issue of the repository as GitHub tells it, for `errand eval from-git`'s prompts: its
// title, body, state and page. GitHub's issues endpoint answers a pull request's number too
// (with `pull_request`), and a pull request's description is as good a statement of the task.

import { z } from 'zod';
import type { ForgeClient, ForgeIssue } from '../types.ts';
import { ForgeError } from '../types.ts';
import type { GitHubApi } from './api.ts';

// Only the fields Errand reads; GitHub's issues carry dozens more.
const issueSchema = z.object({
  number: z.number().int().positive(),
  html_url: z.url(),
  title: z.string(),
  body: z.string().nullable().optional(),
  state: z.enum(['open', 'closed']),
  pull_request: z.object({}).loose().nullable().optional(),
});

/** GitHub's answers for an issue that is not there: 404, and 410 when it was deleted or issues are off. */
const GONE = [404, 410];

export function githubIssues(api: GitHubApi): Pick<ForgeClient, 'issue'> {
  const { call, octokit, target, repository } = api;
  return {
    async issue(number, signal): Promise<ForgeIssue | undefined> {
      try {
        const issue = await call(
          {
            action: `read issue #${number}`,
            method: 'GET',
            path: `/repos/${repository}/issues/${number}`,
            permission: 'Issues: read',
          },
          issueSchema,
          (headers, request) =>
            octokit.rest.issues.get({
              owner: target.owner,
              repo: target.repo,
              issue_number: number,
              headers,
              request,
            }),
          signal,
        );
        return {
          number: issue.number,
          title: issue.title,
          body: issue.body ?? '',
          state: issue.state,
          url: issue.html_url,
          pullRequest: issue.pull_request != null,
        };
      } catch (err) {
        if (err instanceof ForgeError && err.status !== undefined && GONE.includes(err.status))
          return undefined;
        throw err;
      }
    },
  };
}
