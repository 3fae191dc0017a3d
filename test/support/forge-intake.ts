// What the tests of the forge intake's route share (src/features/forge-intake/route*.test.ts):
// each forge's fake started on the same repositories and token, the project's webhook secret
// made through the API, the route's address, and the events the route queued. Apart from
// forge-requests.ts, which the fakes themselves import: this file starts the fakes.
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { ForgeEvent } from '../../src/forges/events.ts';
import { startFakeGitea } from './fake-gitea.ts';
import { startFakeGitHub } from './fake-github.ts';
import { startFakeGitLab } from './fake-gitlab.ts';
import type { SendWebhook } from './forge-requests.ts';
import type { TestService } from './service.ts';

/** The token every fake takes, and projects give. */
export const FORGE_TOKEN = 'forge-token-0123456789';
/** The repository every project of these tests is on. */
export const FORGE_REPO = 'acme/app';

/** A forge's fake as the route's tests drive it. */
export interface WebhookFake {
  /** The web address, under which the repositories are. */
  url: string;
  apiUrl: string;
  sendWebhook: SendWebhook;
  /** Opens pull request 1 (errand/job into main) through the fake's API, as a turn would. */
  openPull(): Promise<void>;
  close(): Promise<void>;
}

export interface FakeForge {
  forge: 'github' | 'gitlab' | 'gitea';
  name: string;
  /** The fake, serving FORGE_REPO and `others`. */
  start(others?: readonly string[]): Promise<WebhookFake>;
  /** The forge's request header that names the event. */
  eventHeader: string;
  /** A signature covers the body (GitLab sends the secret itself: a changed body passes). */
  signsBody: boolean;
}

/** Opens a pull request through a fake's own API. */
async function openPull(url: string, init: RequestInit): Promise<void> {
  const res = await fetch(url, init);
  assert.ok(res.ok, `the fake refused to open a pull request: ${res.status} ${await res.text()}`);
}

/** GitHub and Gitea open a pull request alike: POST /repos/{owner}/{repo}/pulls. */
const openRepoPull = (apiUrl: string) =>
  openPull(`${apiUrl}/repos/${FORGE_REPO}/pulls`, {
    method: 'POST',
    headers: { authorization: `token ${FORGE_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'Job', head: 'errand/job', base: 'main', body: 'b' }),
  });

/** Gitea's fake, as Gitea or as Forgejo. */
async function startGitea(forgejo: boolean, others: readonly string[]): Promise<WebhookFake> {
  const fake = await startFakeGitea({
    token: FORGE_TOKEN,
    repos: [FORGE_REPO, ...others],
    forgejo,
  });
  return { ...fake, openPull: () => openRepoPull(fake.apiUrl) };
}

/** Every forge that sends webhooks, Gitea both as itself and as Forgejo. */
export const FAKE_FORGES: readonly FakeForge[] = [
  {
    forge: 'github',
    name: 'GitHub',
    eventHeader: 'x-github-event',
    signsBody: true,
    async start(others = []) {
      const fake = await startFakeGitHub({ repos: [FORGE_REPO, ...others], token: FORGE_TOKEN });
      return { ...fake, openPull: () => openRepoPull(fake.apiUrl) };
    },
  },
  {
    forge: 'gitlab',
    name: 'GitLab',
    eventHeader: 'x-gitlab-event',
    signsBody: false,
    async start(others = []) {
      const fake = await startFakeGitLab({ token: FORGE_TOKEN, projects: [FORGE_REPO, ...others] });
      return {
        ...fake,
        openPull: () =>
          openPull(`${fake.apiUrl}/projects/${encodeURIComponent(FORGE_REPO)}/merge_requests`, {
            method: 'POST',
            headers: { 'private-token': FORGE_TOKEN, 'content-type': 'application/json' },
            body: JSON.stringify({
              title: 'Job',
              source_branch: 'errand/job',
              target_branch: 'main',
              description: 'b',
            }),
          }),
      };
    },
  },
  {
    forge: 'gitea',
    name: 'Gitea',
    eventHeader: 'x-gitea-event-type',
    signsBody: true,
    start: (others = []) => startGitea(false, others),
  },
  {
    forge: 'gitea',
    name: 'Forgejo',
    eventHeader: 'x-gitea-event-type',
    signsBody: true,
    start: (others = []) => startGitea(true, others),
  },
];

/** Makes the project a webhook secret through the admin API; returns it. */
export async function makeForgeWebhookSecret(svc: TestService, projectId: string): Promise<string> {
  const res = await svc.request('POST', `/v2/admin/projects/${projectId}/forge-webhook-secret`);
  assert.equal(res.status, 200, res.text);
  const { secret } = res.json as { secret?: unknown };
  assert.equal(typeof secret, 'string', res.text);
  return String(secret);
}

/** Where the project's forge sends its webhook requests. */
export const forgeWebhookAddress = (svc: TestService, projectId: string) =>
  `${svc.url}/v2/forges/${projectId}/webhook`;

/** The events queued for the forge-events worker for `projectId`, oldest first. */
export async function queuedForgeEvents(
  svc: TestService,
  projectId: string,
): Promise<ForgeEvent[]> {
  const rows = await sql<{ data: { projectId: string; event: ForgeEvent } }>`
    SELECT data FROM pgboss.job WHERE name = 'forge-events' ORDER BY created_on, id`.execute(
    svc.service.ctx.db,
  );
  return rows.rows.filter((r) => r.data.projectId === projectId).map((r) => r.data.event);
}
