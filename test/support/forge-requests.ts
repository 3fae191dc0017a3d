// Webhook requests as GitHub, GitLab and Gitea/Forgejo send them, for the forge fakes: the
// headers each forge sets (event name, delivery id, signature or token), and the payload of
// each event Errand reads in the forge's own shape, built from the fake's state (its
// repositories and pull requests). A fake's `sendWebhook(url, secret, request)` POSTs one to
// Errand and returns the answer; `redeliver()` sends the same bytes again, as a forge's
// "Redeliver" button does, and `replay()` the same bytes and signature under a new delivery id,
// as someone who saw the delivery could (no signature covers the id).
import { createHash, createHmac, randomUUID } from 'node:crypto';

/** Someone on the forge. */
export interface FakeUser {
  login: string;
  id: number;
  /** A bot or app account (GitHub `type: Bot`, GitLab project access token, Gitea `[bot]`). */
  bot?: boolean;
}

/** A person with write access, by default the author of every delivery. */
export const REVIEWER: FakeUser = { login: 'reviewer', id: 4242 };

/** An issue a delivery is about (the fakes keep no issues of their own). */
export interface FakeIssue {
  number: number;
  title: string;
  body: string;
  author?: FakeUser;
}

export type ForgeRequest =
  /** GitHub's ping when a webhook is made; GitLab and Gitea send a push-like test instead. */
  | { type: 'ping' }
  /** A comment in a pull request's conversation. */
  | { type: 'comment'; pull: number; body: string; author?: FakeUser }
  /** A comment on an issue. */
  | { type: 'issue-comment'; issue: FakeIssue; body: string; author?: FakeUser }
  /** A comment on a line of a pull request's diff. */
  | {
      type: 'review-comment';
      pull: number;
      body: string;
      path: string;
      line: number;
      diffHunk?: string;
      author?: FakeUser;
    }
  /** A review submitted with a body (GitLab has no review body: it is a comment there). */
  | { type: 'review'; pull: number; body: string; author?: FakeUser }
  /** A label added to an issue; `others` are labels the issue had already. */
  | { type: 'labeled'; issue: FakeIssue; label: string; others?: string[]; author?: FakeUser }
  /**
   * A push of `ref` (`refs/heads/<branch>` or `refs/tags/<tag>`) to the commit `after` (a
   * default one when not given), or its deletion.
   */
  | { type: 'push'; ref: string; after?: string; deleted?: boolean; author?: FakeUser }
  /**
   * A check of commit `sha` on `branch` ended with `state` (GitHub `check_run` completed,
   * GitLab `Pipeline Hook`, Gitea/Forgejo `status`); `pulls` are the pull requests the forge
   * names with it (GitHub's `pull_requests`, GitLab's `merge_request`), default none.
   */
  | {
      type: 'check';
      sha: string;
      branch: string;
      name: string;
      state: 'pending' | 'success' | 'failure';
      pulls?: number[];
      author?: FakeUser;
    }
  /** Something happened to a pull request (GitHub/Gitea `pull_request`, GitLab `Merge Request Hook`). */
  | {
      type: 'pull-request';
      pull: number;
      action: 'closed' | 'merged' | 'reopened' | 'synchronize' | 'labeled';
      /** For `labeled`. */
      label?: string;
      author?: FakeUser;
    }
  /** A review approving the pull request (GitHub/Gitea review submitted, GitLab `approved`). */
  | { type: 'approval'; pull: number; author?: FakeUser }
  /**
   * An event Errand takes no action on: GitHub a star; GitLab and Gitea the push of `main` their
   * Test button sends, which asks for nothing of a project without a setup command.
   */
  | { type: 'unused' };

/** The commit a push names when the test gives none. */
const PUSHED = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
/** The commit a pushed ref was at before. */
const PREVIOUS = 'f0e1d2c3b4a5968778695a4b3c2d1e0f98765432';
/** What forges give as `before` of a new ref and `after` of a deleted one. */
const ZEROS = '0000000000000000000000000000000000000000';

/** A push's `after` as its forge says it: zeros for a deletion. */
const pushedAfter = (push: { after?: string; deleted?: boolean }) =>
  push.deleted ? ZEROS : (push.after ?? PUSHED);

export interface SendOptions {
  /** The repository the event is for; default the fake's first. */
  repo?: string;
  /** The delivery id; default a new UUID. */
  deliveryId?: string;
  /** `none`: sent without its signature or token; `tampered`: the body changed after signing. */
  signature?: 'none' | 'tampered';
  /** Send the body as this text instead of the payload (signed as it is). */
  rawBody?: string;
}

export interface RequestAnswer {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, unknown>;
  deliveryId: string;
  /** The event's name as the forge's event header gives it. */
  event: string;
  /** The payload sent. */
  payload: unknown;
  /** Sends the same request again, byte for byte. */
  redeliver(): Promise<RequestAnswer>;
  /**
   * Sends the same body with the same signature (GitLab: token) under a new delivery id (in
   * every header the forge names the delivery by): a replay by someone who saw the delivery.
   */
  replay(deliveryId?: string): Promise<RequestAnswer>;
}

/**
 * A comment a delivery says was written: the fake keeps it, so that Errand's reactions and
 * replies to it find it as on the real forge.
 */
export interface WrittenComment {
  repo: string;
  /** The issue's or pull request's number (GitLab: iid). */
  number: number;
  on: 'issue' | 'pull';
  /** The comment's id as the payload gives it (GitLab: the note's; a review's for `review`). */
  id: number;
  kind: 'comment' | 'line' | 'review';
  /** The author's login as the payload gives it. */
  author: string;
  body: string;
  /** GitLab: the note's discussion. */
  discussionId?: string;
  path?: string;
  line?: number;
  diffHunk?: string;
}

/** What a fake tells the builders about its state. */
export interface RequestSource {
  /** Told of each comment a delivery says was written, before the delivery is sent. */
  written?(comment: WrittenComment): void;
  /** The forge's web address, e.g. http://127.0.0.1:1234 (with a base path where served under one). */
  web: string;
  /** The repository a delivery is for unless told otherwise. */
  repo: string;
  /** The pull request (merge request) as the forge's API gives it, or undefined. */
  pull(repo: string, number: number): Record<string, unknown> | undefined;
}

interface Built {
  event: string;
  payload: unknown;
  headers: Record<string, string>;
}

/** The headers a forge names a delivery by (GitLab: also the event's own uuid). */
type IdHeaders = readonly string[];

const hmac = (algorithm: 'sha1' | 'sha256', secret: string, body: string) =>
  createHmac(algorithm, secret).update(body).digest('hex');

async function post(
  target: string,
  built: Built,
  body: string,
  deliveryId: string,
  idHeaders: IdHeaders,
): Promise<RequestAnswer> {
  const response = await fetch(target, { method: 'POST', headers: built.headers, body });
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = {};
  }
  return {
    status: response.status,
    headers: response.headers,
    text,
    json,
    deliveryId,
    event: built.event,
    payload: built.payload,
    redeliver: () => post(target, built, body, deliveryId, idHeaders),
    replay: (id = randomUUID()) => {
      const headers = { ...built.headers };
      for (const name of idHeaders) if (name in headers) headers[name] = id;
      return post(target, { ...built, headers }, body, id, idHeaders);
    },
  };
}

/** Signs (via `sign`) and sends a built delivery. */
async function send(
  target: string,
  secret: string,
  options: SendOptions,
  deliveryId: string,
  build: () => Built,
  sign: (headers: Record<string, string>, secret: string, body: string) => void,
  idHeaders: IdHeaders,
): Promise<RequestAnswer> {
  const built = build();
  const body = options.rawBody ?? JSON.stringify(built.payload);
  if (options.signature !== 'none') sign(built.headers, secret, body);
  // Still JSON, no longer the bytes that were signed.
  const sent = options.signature === 'tampered' ? `${body.slice(0, -1)} }` : body;
  return post(target, built, sent, deliveryId, idHeaders);
}

/** What a forge's builder is given for one delivery. */
interface BuildInput {
  delivery: ForgeRequest;
  deliveryId: string;
  /** The repository (GitLab: project path) the delivery is for. */
  repo: string;
  /** Who the delivery says did it. */
  author: FakeUser;
  /** The forge's web address. */
  web: string;
}

export type SendWebhook = (
  target: string,
  secret: string,
  delivery: ForgeRequest,
  options?: SendOptions,
) => Promise<RequestAnswer>;

/** A fake's `sendWebhook`: builds the forge's request from the fake's state, signs and sends it. */
function sender(
  source: RequestSource,
  build: (input: BuildInput) => Built,
  sign: (headers: Record<string, string>, secret: string, body: string) => void,
  idHeaders: IdHeaders,
): SendWebhook {
  return (target, secret, delivery, options = {}) => {
    const deliveryId = options.deliveryId ?? randomUUID();
    const input = (): BuildInput => ({
      delivery,
      deliveryId,
      repo: options.repo ?? source.repo,
      author: 'author' in delivery && delivery.author ? delivery.author : REVIEWER,
      web: source.web,
    });
    return send(target, secret, options, deliveryId, () => build(input()), sign, idHeaders);
  };
}

/** A counter for the ids a forge gives comments, notes and reviews. */
function ids(start: number): () => number {
  let next = start;
  return () => next++;
}

const iso = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

function pullOf(source: RequestSource, repo: string, number: number, forge: string) {
  const pull = source.pull(repo, number);
  if (!pull) throw new Error(`${forge}: no pull request ${repo}#${number} to comment on`);
  return pull;
}

// ---- GitHub -----------------------------------------------------------------------------------

function githubUser(web: string, user: FakeUser) {
  return {
    login: user.login,
    id: user.id,
    node_id: `U_fake${user.id}`,
    avatar_url: `${web}/avatars/${user.login}`,
    url: `${web}/api/users/${user.login}`,
    html_url: `${web}/${user.login}`,
    type: user.bot ? 'Bot' : 'User',
    site_admin: false,
  };
}

/** A change to a pull request that a GitHub delivery says happened (`approved`: by `login`). */
export interface GitHubPullChange {
  repo: string;
  number: number;
  action: 'closed' | 'merged' | 'reopened' | 'synchronize' | 'labeled' | 'approved';
  label?: string;
  login?: string;
}

/** What the GitHub fake tells its sender beyond a RequestSource. */
export interface GitHubRequestSource extends RequestSource {
  /**
   * The check run of that name on the commit, as the API gives it, in `state`: the fake's own
   * when it has one in that state, else one it makes then (the delivery says it ran).
   */
  checkRun?(
    repo: string,
    sha: string,
    name: string,
    state: 'pending' | 'success' | 'failure',
  ): Record<string, unknown>;
  /** Told of a change a delivery says happened, before the delivery is built: the API agrees. */
  pullChanged?(change: GitHubPullChange): void;
}

/** The GitHub Actions app, the sender of its check runs' deliveries. */
const GITHUB_ACTIONS: FakeUser = { login: 'github-actions[bot]', id: 41898282, bot: true };

/** Sends GitHub's deliveries (github.com and Enterprise Server alike) for the fake. */
export function githubSender(source: GitHubRequestSource) {
  const nextId = ids(2_000_000_001);
  const build = ({ delivery, deliveryId, repo, author, web }: BuildInput): Built => {
    const [owner = '', name = ''] = repo.split('/');
    const repository = {
      id: 1000,
      node_id: 'R_fake',
      name,
      full_name: repo,
      private: true,
      owner: githubUser(web, { login: owner, id: 7 }),
      html_url: `${web}/${repo}`,
      url: `${web}/api/repos/${repo}`,
      default_branch: 'main',
    };
    const sender = githubUser(web, author);
    const issueJson = (issue: FakeIssue, labels: string[]) => ({
      url: `${repository.url}/issues/${issue.number}`,
      html_url: `${repository.html_url}/issues/${issue.number}`,
      id: 3_000_000 + issue.number,
      node_id: `I_fake${issue.number}`,
      number: issue.number,
      title: issue.title,
      user: githubUser(web, issue.author ?? REVIEWER),
      labels: labels.map((label, i) => ({
        id: 90 + i,
        name: label,
        color: 'ededed',
        default: false,
      })),
      state: 'open',
      locked: false,
      comments: 0,
      created_at: iso(),
      updated_at: iso(),
      closed_at: null,
      author_association: 'COLLABORATOR',
      body: issue.body,
    });
    const headers = (event: string): Record<string, string> => ({
      'content-type': 'application/json',
      'user-agent': 'GitHub-Hookshot/fake',
      'x-github-event': event,
      'x-github-delivery': deliveryId,
      'x-github-hook-id': '4200',
      'x-github-hook-installation-target-id': String(repository.id),
      'x-github-hook-installation-target-type': 'repository',
    });
    const now = iso();
    switch (delivery.type) {
      case 'ping':
        return {
          event: 'ping',
          headers: headers('ping'),
          payload: {
            zen: 'Design for failure.',
            hook_id: 4200,
            hook: { type: 'Repository', id: 4200, active: true, events: ['issue_comment'] },
            repository,
            sender,
          },
        };
      case 'unused':
        return {
          event: 'star',
          headers: headers('star'),
          payload: { action: 'created', starred_at: now, repository, sender },
        };
      case 'push': {
        const after = pushedAfter(delivery);
        return {
          event: 'push',
          headers: headers('push'),
          payload: {
            ref: delivery.ref,
            before: PREVIOUS,
            after,
            repository,
            pusher: { name: author.login, email: `${author.login}@users.noreply.github.com` },
            sender,
            created: false,
            deleted: delivery.deleted === true,
            forced: false,
            base_ref: null,
            compare: `${repository.html_url}/compare/${after.slice(0, 12)}`,
            commits: [],
            head_commit: null,
          },
        };
      }
      case 'comment':
      case 'issue-comment': {
        const pull =
          delivery.type === 'comment'
            ? pullOf(source, repo, delivery.pull, 'fake-github')
            : undefined;
        const issue =
          delivery.type === 'issue-comment'
            ? issueJson(delivery.issue, [])
            : {
                ...issueJson(
                  {
                    number: delivery.pull,
                    title: String(pull?.title),
                    body: String(pull?.body ?? ''),
                    author: { login: 'errand-bot', id: 1, bot: true },
                  },
                  [],
                ),
                html_url: pull?.html_url,
                pull_request: {
                  url: pull?.url,
                  html_url: pull?.html_url,
                  diff_url: `${String(pull?.html_url)}.diff`,
                  patch_url: `${String(pull?.html_url)}.patch`,
                  merged_at: null,
                },
              };
        const id = nextId();
        source.written?.({
          repo,
          number: issue.number,
          on: delivery.type === 'comment' ? 'pull' : 'issue',
          id,
          kind: 'comment',
          author: sender.login,
          body: delivery.body,
        });
        return {
          event: 'issue_comment',
          headers: headers('issue_comment'),
          payload: {
            action: 'created',
            issue,
            comment: {
              url: `${repository.url}/issues/comments/${id}`,
              html_url: `${String(issue.html_url)}#issuecomment-${id}`,
              issue_url: issue.url,
              id,
              node_id: `IC_fake${id}`,
              user: sender,
              created_at: now,
              updated_at: now,
              author_association: 'COLLABORATOR',
              body: delivery.body,
            },
            repository,
            sender,
          },
        };
      }
      case 'review-comment': {
        const pull = pullOf(source, repo, delivery.pull, 'fake-github');
        const id = nextId();
        const head = (pull.head as { sha?: string } | undefined)?.sha ?? '';
        const diffHunk = delivery.diffHunk ?? `@@ -1,3 +1,4 @@\n line\n+added`;
        source.written?.({
          repo,
          number: delivery.pull,
          on: 'pull',
          id,
          kind: 'line',
          author: sender.login,
          body: delivery.body,
          path: delivery.path,
          line: delivery.line,
          diffHunk,
        });
        return {
          event: 'pull_request_review_comment',
          headers: headers('pull_request_review_comment'),
          payload: {
            action: 'created',
            comment: {
              url: `${repository.url}/pulls/comments/${id}`,
              pull_request_review_id: id + 1,
              id,
              node_id: `PRRC_fake${id}`,
              diff_hunk: diffHunk,
              path: delivery.path,
              commit_id: head,
              original_commit_id: head,
              user: sender,
              body: delivery.body,
              created_at: now,
              updated_at: now,
              html_url: `${String(pull.html_url)}#discussion_r${id}`,
              pull_request_url: pull.url,
              author_association: 'COLLABORATOR',
              start_line: null,
              original_start_line: null,
              start_side: null,
              line: delivery.line,
              original_line: delivery.line,
              side: 'RIGHT',
              subject_type: 'line',
            },
            pull_request: pull,
            repository,
            sender,
          },
        };
      }
      case 'review': {
        const pull = pullOf(source, repo, delivery.pull, 'fake-github');
        const id = nextId();
        source.written?.({
          repo,
          number: delivery.pull,
          on: 'pull',
          id,
          kind: 'review',
          author: sender.login,
          body: delivery.body,
        });
        return {
          event: 'pull_request_review',
          headers: headers('pull_request_review'),
          payload: {
            action: 'submitted',
            review: {
              id,
              node_id: `PRR_fake${id}`,
              user: sender,
              body: delivery.body,
              commit_id: (pull.head as { sha?: string } | undefined)?.sha ?? '',
              submitted_at: now,
              state: 'commented',
              html_url: `${String(pull.html_url)}#pullrequestreview-${id}`,
              pull_request_url: pull.url,
              author_association: 'COLLABORATOR',
            },
            pull_request: pull,
            repository,
            sender,
          },
        };
      }
      case 'labeled': {
        const labels = [...(delivery.others ?? []), delivery.label];
        const issue = issueJson(delivery.issue, labels);
        return {
          event: 'issues',
          headers: headers('issues'),
          payload: {
            action: 'labeled',
            issue,
            label: issue.labels[issue.labels.length - 1],
            repository,
            sender,
          },
        };
      }
      case 'check': {
        // GitHub Actions' check run: `created` when it starts, `completed` when it ends.
        const run = source.checkRun?.(repo, delivery.sha, delivery.name, delivery.state) ?? {
          id: nextId(),
          name: delivery.name,
          head_sha: delivery.sha,
          status: delivery.state === 'pending' ? 'in_progress' : 'completed',
          conclusion: delivery.state === 'pending' ? null : delivery.state,
        };
        const pulls = (delivery.pulls ?? []).map((number) => {
          const pull = source.pull(repo, number);
          const base = (pull?.base as { ref?: string } | undefined)?.ref ?? 'main';
          return {
            url: `${repository.url}/pulls/${number}`,
            id: 5000 + number,
            number,
            head: {
              ref: delivery.branch,
              sha: delivery.sha,
              repo: { id: 1000, url: repository.url, name },
            },
            base: { ref: base, sha: PREVIOUS, repo: { id: 1000, url: repository.url, name } },
          };
        });
        const done = delivery.state !== 'pending';
        return {
          event: 'check_run',
          headers: headers('check_run'),
          payload: {
            action: done ? 'completed' : 'created',
            check_run: {
              ...run,
              pull_requests: pulls,
              check_suite: {
                id: Number(run.id) - 1,
                node_id: `CS_fake${String(run.id)}`,
                head_branch: delivery.branch,
                head_sha: delivery.sha,
                status: done ? 'completed' : 'in_progress',
                conclusion: done ? delivery.state : null,
                url: `${repository.url}/check-suites/${Number(run.id) - 1}`,
                before: PREVIOUS,
                after: delivery.sha,
                pull_requests: pulls,
                app: run.app ?? null,
                created_at: now,
                updated_at: now,
              },
            },
            repository,
            sender: githubUser(web, delivery.author ?? GITHUB_ACTIONS),
          },
        };
      }
      case 'pull-request': {
        source.pullChanged?.({
          repo,
          number: delivery.pull,
          action: delivery.action,
          ...(delivery.label === undefined ? {} : { label: delivery.label }),
        });
        const pull = pullOf(source, repo, delivery.pull, 'fake-github');
        const head = pull.head as { sha?: string } | undefined;
        const extra =
          delivery.action === 'labeled'
            ? {
                label: {
                  id: 600,
                  node_id: 'LA_fake',
                  url: `${repository.url}/labels/${encodeURIComponent(delivery.label ?? '')}`,
                  name: delivery.label ?? '',
                  color: 'ededed',
                  default: false,
                  description: null,
                },
              }
            : delivery.action === 'synchronize'
              ? { before: PREVIOUS, after: head?.sha ?? '' }
              : {};
        return {
          event: 'pull_request',
          headers: headers('pull_request'),
          payload: {
            // A merge is a pull request `closed` with `merged: true`.
            action: delivery.action === 'merged' ? 'closed' : delivery.action,
            number: delivery.pull,
            pull_request: pull,
            ...extra,
            repository,
            sender,
          },
        };
      }
      case 'approval': {
        source.pullChanged?.({
          repo,
          number: delivery.pull,
          action: 'approved',
          login: author.login,
        });
        const pull = pullOf(source, repo, delivery.pull, 'fake-github');
        const id = nextId();
        const html = `${String(pull.html_url)}#pullrequestreview-${id}`;
        return {
          event: 'pull_request_review',
          headers: headers('pull_request_review'),
          payload: {
            action: 'submitted',
            review: {
              id,
              node_id: `PRR_fake${id}`,
              user: sender,
              // An approval without words: no comment for Errand to answer.
              body: null,
              commit_id: (pull.head as { sha?: string } | undefined)?.sha ?? '',
              submitted_at: now,
              state: 'approved',
              html_url: html,
              pull_request_url: pull.url,
              author_association: 'COLLABORATOR',
              _links: { html: { href: html }, pull_request: { href: pull.url } },
            },
            pull_request: pull,
            repository,
            sender,
          },
        };
      }
    }
  };
  return sender(
    source,
    build,
    (headers, key, body) => {
      headers['x-hub-signature'] = `sha1=${hmac('sha1', key, body)}`;
      headers['x-hub-signature-256'] = `sha256=${hmac('sha256', key, body)}`;
    },
    ['x-github-delivery'],
  );
}

// ---- GitLab -----------------------------------------------------------------------------------

function gitlabUser(web: string, user: FakeUser) {
  // A bot is a project access token's user, named as GitLab names them.
  const username = user.bot
    ? `project_12_bot_${createHash('sha256').update(user.login).digest('hex').slice(0, 32)}`
    : user.login;
  return {
    id: user.id,
    name: user.bot ? `${user.login} token` : user.login,
    username,
    avatar_url: `${web}/uploads/-/system/user/avatar/${user.id}/avatar.png`,
    email: '[REDACTED]',
  };
}

/** A commit's newest pipeline as GitLab's API gives it, with its current jobs. */
interface GitLabPipelineSource {
  id: number;
  iid: number;
  jobs: Array<{ id: number; name: string; status: string }>;
}

/** A check's state as a GitLab job or pipeline status says it. */
const gitlabStatus = { pending: 'running', success: 'success', failure: 'failed' } as const;

/**
 * Sends GitLab's deliveries for the fake; `projectId` gives a project path's numeric id,
 * `pipeline` the commit's newest pipeline when the fake has one (its ids and jobs go into a
 * Pipeline Hook).
 */
export function gitlabSender(
  source: RequestSource & {
    projectId(path: string): number;
    pipeline?(path: string, sha: string): GitLabPipelineSource | undefined;
  },
) {
  const nextId = ids(7_000_001);
  const build = ({ delivery, deliveryId, repo: path, author, web }: BuildInput): Built => {
    const projectWeb = `${web}/${path}`;
    const projectId = source.projectId(path);
    const project = {
      id: projectId,
      name: path.split('/').pop() ?? path,
      description: null,
      web_url: projectWeb,
      avatar_url: null,
      git_ssh_url: `git@127.0.0.1:${path}.git`,
      git_http_url: `${projectWeb}.git`,
      namespace: path.split('/').slice(0, -1).join('/'),
      visibility_level: 0,
      path_with_namespace: path,
      default_branch: 'main',
      ci_config_path: null,
      homepage: projectWeb,
      url: `git@127.0.0.1:${path}.git`,
      ssh_url: `git@127.0.0.1:${path}.git`,
      http_url: `${projectWeb}.git`,
    };
    const repository = {
      name: project.name,
      url: project.url,
      description: null,
      homepage: projectWeb,
    };
    const user = gitlabUser(web, author);
    const headers = (event: string): Record<string, string> => ({
      'content-type': 'application/json',
      'user-agent': 'GitLab/17.6.0',
      'x-gitlab-event': event,
      'x-gitlab-webhook-uuid': '2b7c6a1e-2f1a-4a0d-8a3e-5f8e6f1c0a11',
      'x-gitlab-instance': web,
      'x-gitlab-event-uuid': randomUUID(),
      // The same on every retry of the event (GitLab 17.4 and later): the delivery's id.
      'idempotency-key': deliveryId,
    });
    const now = new Date()
      .toISOString()
      .replace('T', ' ')
      .replace(/\.\d{3}Z$/, ' UTC');
    const issueJson = (issue: FakeIssue, labels: string[]) => ({
      author_id: (issue.author ?? REVIEWER).id,
      created_at: now,
      description: issue.body,
      id: 50_000 + issue.number,
      iid: issue.number,
      project_id: projectId,
      state: 'opened',
      title: issue.title,
      updated_at: now,
      url: `${projectWeb}/-/issues/${issue.number}`,
      labels: labels.map((title, i) => labelJson(title, i)),
    });
    const labelJson = (title: string, i: number) => ({
      id: 300 + i,
      title,
      color: '#428BCA',
      project_id: projectId,
      created_at: now,
      updated_at: now,
      template: false,
      description: null,
      type: 'ProjectLabel',
      group_id: null,
    });
    const note = (
      body: string,
      noteable: 'Issue' | 'MergeRequest',
      noteableId: number,
      pageUrl: string,
      diff?: { path: string; line: number },
    ) => {
      const id = nextId();
      return {
        attachment: null,
        author_id: author.id,
        change_position: null,
        commit_id: null,
        created_at: now,
        discussion_id: createHmac('sha1', 'discussion').update(String(id)).digest('hex'),
        id,
        line_code: diff
          ? `${createHmac('sha1', 'path').update(diff.path).digest('hex')}_0_${diff.line}`
          : null,
        note: body,
        noteable_id: noteableId,
        noteable_type: noteable,
        original_position: null,
        position: diff
          ? {
              base_sha: '0000000000000000000000000000000000000000',
              start_sha: '0000000000000000000000000000000000000000',
              head_sha: '1111111111111111111111111111111111111111',
              old_path: diff.path,
              new_path: diff.path,
              position_type: 'text',
              old_line: null,
              new_line: diff.line,
              line_range: null,
            }
          : null,
        project_id: projectId,
        resolved_at: null,
        resolved_by_id: null,
        resolved_by_push: null,
        st_diff: null,
        system: false,
        type: diff ? 'DiffNote' : null,
        updated_at: now,
        updated_by_id: null,
        description: body,
        url: `${pageUrl}#note_${id}`,
        action: 'create',
      };
    };
    /** A Note Hook delivery of the note, with the issue or merge request it is on. */
    const noteHook = (
      attributes: ReturnType<typeof note>,
      noteable: { merge_request: unknown } | { issue: unknown },
    ): Built => ({
      event: 'Note Hook',
      headers: headers('Note Hook'),
      payload: {
        object_kind: 'note',
        event_type: 'note',
        user,
        project_id: projectId,
        project,
        object_attributes: attributes,
        repository,
        ...noteable,
      },
    });
    const mergeRequest = (iid: number) => {
      const mr = pullOf(source, path, iid, 'fake-gitlab');
      return {
        id: mr.id,
        iid: mr.iid,
        title: mr.title,
        description: mr.description,
        state: mr.state,
        source_branch: mr.source_branch,
        target_branch: mr.target_branch,
        source_project_id: mr.source_project_id,
        target_project_id: mr.target_project_id,
        author_id: 1,
        created_at: now,
        updated_at: now,
        draft: mr.draft,
        work_in_progress: mr.work_in_progress,
        url: mr.web_url,
      };
    };
    const commitJson = (sha: string) => ({
      id: sha,
      message: 'Change the parser\n',
      title: 'Change the parser',
      timestamp: iso(),
      url: `${projectWeb}/-/commit/${sha}`,
      author: { name: author.login, email: '[REDACTED]' },
    });
    /** A Pipeline Hook: a merge request pipeline when `pulls` names one, else a branch's. */
    const pipelineHook = (check: Extract<ForgeRequest, { type: 'check' }>): Built => {
      const status = gitlabStatus[check.state];
      const known = source.pipeline?.(path, check.sha);
      const pipelineId = known?.id ?? nextId();
      const jobs = known?.jobs.some((job) => job.name === check.name)
        ? known.jobs
        : [...(known?.jobs ?? []), { id: nextId(), name: check.name, status }];
      const iid = check.pulls?.[0];
      const mr = iid === undefined ? undefined : mergeRequest(iid);
      const finished = status === 'running' ? null : now;
      return {
        event: 'Pipeline Hook',
        headers: headers('Pipeline Hook'),
        payload: {
          object_kind: 'pipeline',
          object_attributes: {
            id: pipelineId,
            iid: known?.iid ?? 1,
            name: null,
            // A merge request pipeline runs on the merge request's own ref.
            ref: iid === undefined ? check.branch : `refs/merge-requests/${iid}/head`,
            tag: false,
            sha: check.sha,
            before_sha: ZEROS,
            source: iid === undefined ? 'push' : 'merge_request_event',
            status,
            detailed_status: status === 'success' ? 'passed' : status,
            stages: ['test'],
            created_at: now,
            finished_at: finished,
            duration: finished ? 42 : null,
            queued_duration: 1,
            variables: [],
            url: `${projectWeb}/-/pipelines/${pipelineId}`,
          },
          merge_request: mr
            ? {
                id: mr.id,
                iid: mr.iid,
                title: mr.title,
                source_branch: mr.source_branch,
                source_project_id: mr.source_project_id,
                target_branch: mr.target_branch,
                target_project_id: mr.target_project_id,
                state: mr.state,
                merge_status: 'can_be_merged',
                detailed_merge_status: 'mergeable',
                url: mr.url,
              }
            : null,
          user,
          project,
          commit: commitJson(check.sha),
          source_pipeline: null,
          builds: jobs.map((job) => {
            const jobStatus = job.name === check.name ? status : job.status;
            return {
              id: job.id,
              stage: 'test',
              name: job.name,
              status: jobStatus,
              created_at: now,
              started_at: now,
              finished_at: jobStatus === 'running' ? null : now,
              duration: 40,
              queued_duration: 1,
              failure_reason: jobStatus === 'failed' ? 'script_failure' : null,
              when: 'on_success',
              manual: false,
              allow_failure: false,
              user,
              runner: null,
              artifacts_file: { filename: null, size: null },
              environment: null,
            };
          }),
        },
      };
    };
    /**
     * A Merge Request Hook: `close`, `merge`, `reopen`, `approved`, or `update` (new commits
     * with `oldrev`, a label with `changes.labels`).
     */
    const mergeRequestHook = (
      iid: number,
      action: 'close' | 'merge' | 'reopen' | 'approved' | 'update',
      extra: { oldrev?: string; label?: string } = {},
    ): Built => {
      const mr = mergeRequest(iid);
      const api = pullOf(source, path, iid, 'fake-gitlab');
      const head = typeof api.sha === 'string' ? api.sha : PUSHED;
      const had = Array.isArray(api.labels) ? api.labels.map(String) : [];
      const current =
        extra.label === undefined || had.includes(extra.label) ? had : [...had, extra.label];
      const previous = current.filter((label) => label !== extra.label);
      const labels = current.map((title, i) => labelJson(title, i));
      const state = { close: 'closed', merge: 'merged', reopen: 'opened' }[
        action as 'close' | 'merge' | 'reopen'
      ];
      const changes: Record<string, unknown> = {
        updated_at: { previous: now, current: now },
      };
      if (extra.label !== undefined) {
        changes.labels = {
          previous: previous.map((title, i) => labelJson(title, i)),
          current: labels,
        };
      }
      if (state !== undefined) changes.state_id = { previous: 1, current: 2 };
      return {
        event: 'Merge Request Hook',
        headers: headers('Merge Request Hook'),
        payload: {
          object_kind: 'merge_request',
          event_type: 'merge_request',
          user,
          project,
          object_attributes: {
            ...mr,
            state: state ?? mr.state,
            action,
            merge_status: 'can_be_merged',
            detailed_merge_status: 'mergeable',
            last_commit: commitJson(head),
            labels,
            ...(extra.oldrev === undefined ? {} : { oldrev: extra.oldrev }),
          },
          labels,
          changes,
          repository,
          assignees: [],
          reviewers: [],
        },
      };
    };
    /** A Push Hook, or a Tag Push Hook for a tag; a deletion has zeros and no checkout_sha. */
    const pushHook = (push: { ref: string; after?: string; deleted?: boolean }): Built => {
      const tag = push.ref.startsWith('refs/tags/');
      const event = tag ? 'Tag Push Hook' : 'Push Hook';
      const after = pushedAfter(push);
      return {
        event,
        headers: headers(event),
        payload: {
          object_kind: tag ? 'tag_push' : 'push',
          event_name: tag ? 'tag_push' : 'push',
          before: push.deleted ? PREVIOUS : ZEROS,
          after,
          ref: push.ref,
          ref_protected: push.ref === 'refs/heads/main',
          checkout_sha: push.deleted ? null : after,
          user_id: author.id,
          user_username: user.username,
          project_id: projectId,
          project,
          commits: [],
          total_commits_count: 0,
          repository,
        },
      };
    };
    switch (delivery.type) {
      case 'ping':
      case 'unused':
        // GitLab's "Test" button sends a push of the default branch.
        return pushHook({
          ref: 'refs/heads/main',
          after: '1111111111111111111111111111111111111111',
        });
      case 'push':
        return pushHook(delivery);
      case 'comment':
      case 'review':
      case 'review-comment': {
        const mr = mergeRequest(delivery.pull);
        const diff =
          delivery.type === 'review-comment'
            ? { path: delivery.path, line: delivery.line }
            : undefined;
        const attributes = note(delivery.body, 'MergeRequest', Number(mr.id), String(mr.url), diff);
        source.written?.({
          repo: path,
          number: delivery.pull,
          on: 'pull',
          id: attributes.id,
          discussionId: attributes.discussion_id,
          kind: diff ? 'line' : 'comment',
          author: user.username,
          body: delivery.body,
          ...(diff ? { path: diff.path, line: diff.line, diffHunk: '' } : {}),
        });
        return noteHook(attributes, { merge_request: mr });
      }
      case 'issue-comment': {
        const issue = issueJson(delivery.issue, []);
        const attributes = note(delivery.body, 'Issue', issue.id, issue.url);
        source.written?.({
          repo: path,
          number: delivery.issue.number,
          on: 'issue',
          id: attributes.id,
          discussionId: attributes.discussion_id,
          kind: 'comment',
          author: user.username,
          body: delivery.body,
        });
        return noteHook(attributes, { issue });
      }
      case 'labeled': {
        const before = delivery.others ?? [];
        const after = [...before, delivery.label];
        const issue = issueJson(delivery.issue, after);
        return {
          event: 'Issue Hook',
          headers: headers('Issue Hook'),
          payload: {
            object_kind: 'issue',
            event_type: 'issue',
            user,
            project,
            object_attributes: { ...issue, action: 'update' },
            labels: issue.labels,
            changes: {
              labels: {
                previous: before.map((title, i) => labelJson(title, i)),
                current: issue.labels,
              },
            },
            repository,
          },
        };
      }
      case 'check':
        return pipelineHook(delivery);
      case 'pull-request': {
        const action = {
          closed: 'close',
          merged: 'merge',
          reopened: 'reopen',
          synchronize: 'update',
          labeled: 'update',
        } as const;
        return mergeRequestHook(delivery.pull, action[delivery.action], {
          ...(delivery.action === 'synchronize' ? { oldrev: PREVIOUS } : {}),
          ...(delivery.action === 'labeled' ? { label: delivery.label ?? 'errand' } : {}),
        });
      }
      case 'approval':
        return mergeRequestHook(delivery.pull, 'approved');
    }
  };
  return sender(
    source,
    build,
    (headers, key) => {
      headers['x-gitlab-token'] = key;
    },
    ['idempotency-key', 'x-gitlab-event-uuid'],
  );
}

// ---- Gitea and Forgejo -----------------------------------------------------------------------

function giteaUser(web: string, user: FakeUser) {
  const login = user.bot ? `${user.login}[bot]` : user.login;
  return {
    id: user.id,
    login,
    login_name: '',
    source_id: 0,
    full_name: '',
    email: `${user.login}@noreply.localhost`,
    avatar_url: `${web}/avatars/${user.id}`,
    html_url: `${web}/${login}`,
    language: '',
    is_admin: false,
    last_login: '0001-01-01T00:00:00Z',
    created: '2025-01-01T00:00:00Z',
    restricted: false,
    active: false,
    prohibit_login: false,
    location: '',
    website: '',
    description: '',
    visibility: 'public',
    followers_count: 0,
    following_count: 0,
    starred_repos_count: 0,
    username: login,
  };
}

/** A commit status as a `status` delivery names it. */
export interface GiteaStatusRecord {
  id: number;
  description: string;
  /** As the fake keeps it: a path on the instance for Gitea Actions, made absolute in the payload. */
  target_url: string;
  created_at: string;
}

/** What the fake Gitea tells its sender besides RequestSource. */
export interface GiteaRequestSource extends RequestSource {
  /** Send as Forgejo does (X-Forgejo-* headers beside the X-Gitea-* ones). */
  forgejo?: boolean;
  /**
   * The status a `check` delivery announces: Gitea sends `status` when a status is created, so
   * the fake keeps it (the latest of that name on the commit when it has that state already).
   */
  status?(
    repo: string,
    sha: string,
    check: { name: string; state: 'pending' | 'success' | 'failure' },
  ): GiteaStatusRecord;
  /**
   * Told, before the delivery is built, of what a `pull-request` or `approval` delivery says
   * happened, so that the API says the same (doing it again is harmless).
   */
  happened?(repo: string, number: number, change: GiteaChange): void;
}

export type GiteaChange =
  | { type: 'closed' | 'merged' | 'reopened' | 'synchronize' }
  | { type: 'labeled'; label: string }
  | { type: 'approval'; login: string };

/** A commit as Gitea's payloads give it (PayloadCommit). */
function giteaCommit(web: string, repoPath: string, sha: string, author: FakeUser) {
  const person = {
    name: author.login,
    email: `${author.login}@noreply.localhost`,
    username: author.login,
  };
  return {
    id: sha,
    message: 'Errand changes\n',
    url: `${web}/${repoPath}/commit/${sha}`,
    author: person,
    committer: person,
    verification: null,
    timestamp: '2025-01-01T00:00:00Z',
    added: null,
    removed: null,
    modified: null,
  };
}

/**
 * Sends Gitea's deliveries for the fake, or Forgejo's (`forgejo`: X-Forgejo-* headers beside
 * the X-Gitea-* ones, as Forgejo sends both).
 */
export function giteaSender(source: GiteaRequestSource) {
  const nextId = ids(900_001);
  const build = ({ delivery, deliveryId, repo: repoPath, author, web }: BuildInput): Built => {
    const [owner = '', name = ''] = repoPath.split('/');
    const repository = {
      id: 1,
      owner: giteaUser(web, { login: owner, id: 2 }),
      name,
      full_name: repoPath,
      description: '',
      empty: false,
      private: true,
      fork: false,
      template: false,
      parent: null,
      mirror: false,
      size: 40,
      html_url: `${web}/${repoPath}`,
      url: `${web}/api/v1/repos/${repoPath}`,
      ssh_url: `git@127.0.0.1:${repoPath}.git`,
      clone_url: `${web}/${repoPath}.git`,
      website: '',
      default_branch: 'main',
      archived: false,
      created_at: '2025-01-01T00:00:00Z',
      updated_at: '2025-01-01T00:00:00Z',
    };
    const sender = giteaUser(web, author);
    const now = iso();
    const headers = (event: string, eventType: string): Record<string, string> => {
      const h: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'Go-http-client/1.1',
        'x-gitea-delivery': deliveryId,
        'x-gitea-event': event,
        'x-gitea-event-type': eventType,
        'x-gogs-delivery': deliveryId,
        'x-gogs-event': event,
        'x-gogs-event-type': eventType,
        'x-github-delivery': deliveryId,
        'x-github-event': event,
        'x-github-event-type': eventType,
      };
      if (source.forgejo) {
        h['x-forgejo-delivery'] = deliveryId;
        h['x-forgejo-event'] = event;
        h['x-forgejo-event-type'] = eventType;
      }
      return h;
    };
    const issueJson = (issue: FakeIssue, labels: string[], pull?: Record<string, unknown>) => ({
      id: 600 + issue.number,
      url: `${repository.url}/issues/${issue.number}`,
      html_url: pull ? pull.html_url : `${repository.html_url}/issues/${issue.number}`,
      number: issue.number,
      user: giteaUser(web, issue.author ?? REVIEWER),
      original_author: '',
      original_author_id: 0,
      title: issue.title,
      body: issue.body,
      ref: '',
      assets: [],
      labels: labels.map((label, i) => ({
        id: 40 + i,
        name: label,
        exclusive: false,
        is_archived: false,
        color: 'ee0701',
        description: '',
        url: `${repository.url}/labels/${40 + i}`,
      })),
      milestone: null,
      assignee: null,
      assignees: null,
      state: 'open',
      is_locked: false,
      comments: 0,
      created_at: now,
      updated_at: now,
      closed_at: null,
      due_date: null,
      pull_request: pull
        ? { merged: false, merged_at: null, draft: false, html_url: pull.html_url }
        : null,
      repository: { id: repository.id, name, owner, full_name: repoPath },
      pin_order: 0,
    });
    const commentPayload = (issue: ReturnType<typeof issueJson>, body: string, isPull: boolean) => {
      const id = nextId();
      source.written?.({
        repo: repoPath,
        number: issue.number,
        on: isPull ? 'pull' : 'issue',
        id,
        kind: 'comment',
        author: sender.login,
        body,
      });
      return {
        action: 'created',
        issue,
        comment: {
          id,
          html_url: `${String(issue.html_url)}#issuecomment-${id}`,
          pull_request_url: isPull ? issue.html_url : '',
          issue_url: isPull ? '' : issue.html_url,
          user: sender,
          original_author: '',
          original_author_id: 0,
          body,
          assets: [],
          created_at: now,
          updated_at: now,
        },
        repository,
        sender,
        is_pull: isPull,
      };
    };
    /** A push; Gitea's payload has no `deleted`: a deletion's `after` is zeros. */
    const pushEvent = (push: { ref: string; after?: string; deleted?: boolean }): Built => ({
      event: 'push',
      headers: headers('push', 'push'),
      payload: {
        ref: push.ref,
        before: push.deleted ? PREVIOUS : ZEROS,
        after: pushedAfter(push),
        compare_url: '',
        commits: [],
        total_commits: 0,
        head_commit: null,
        repository,
        pusher: sender,
        sender,
      },
    });
    switch (delivery.type) {
      case 'ping':
      case 'unused':
        // Gitea's "Test Delivery" sends a push of the default branch.
        return pushEvent({
          ref: 'refs/heads/main',
          after: '1111111111111111111111111111111111111111',
        });
      case 'push':
        return pushEvent(delivery);
      case 'comment':
      case 'review-comment': {
        // A single comment on a line is a pull request comment too: the payload does not
        // say where it is.
        const pull = pullOf(source, repoPath, delivery.pull, 'fake-gitea');
        const issue = issueJson(
          {
            number: delivery.pull,
            title: String(pull.title),
            body: String(pull.body ?? ''),
            author: { login: 'errand-bot', id: 1 },
          },
          [],
          pull,
        );
        return {
          event: 'pull_request_comment',
          headers: headers('issue_comment', 'pull_request_comment'),
          payload: commentPayload(issue, delivery.body, true),
        };
      }
      case 'issue-comment':
        return {
          event: 'issue_comment',
          headers: headers('issue_comment', 'issue_comment'),
          payload: commentPayload(issueJson(delivery.issue, []), delivery.body, false),
        };
      case 'review': {
        const pull = pullOf(source, repoPath, delivery.pull, 'fake-gitea');
        return {
          event: 'pull_request_review_comment',
          headers: headers('pull_request_comment', 'pull_request_review_comment'),
          payload: {
            action: 'reviewed',
            number: delivery.pull,
            pull_request: pull,
            requested_reviewer: null,
            repository,
            sender,
            commit_id: '',
            review: { type: 'pull_request_review_comment', content: delivery.body },
          },
        };
      }
      case 'check': {
        const status = source.status?.(repoPath, delivery.sha, {
          name: delivery.name,
          state: delivery.state,
        }) ?? {
          id: nextId(),
          description: '',
          target_url: '',
          created_at: now,
        };
        return {
          event: 'status',
          headers: headers('status', 'status'),
          payload: {
            // Gitea names no branch and no pull request with a status (a TODO in its source).
            commit: giteaCommit(web, repoPath, delivery.sha, author),
            context: delivery.name,
            created_at: status.created_at,
            description: status.description,
            id: status.id,
            repository,
            sender,
            sha: delivery.sha,
            state: delivery.state,
            // The payload's target is absolute, where the API may give Gitea Actions' path.
            target_url: status.target_url ? new URL(status.target_url, web).href : '',
            updated_at: status.created_at,
          },
        };
      }
      case 'pull-request': {
        const change: GiteaChange =
          delivery.action === 'labeled'
            ? { type: 'labeled', label: delivery.label ?? 'errand' }
            : { type: delivery.action };
        source.happened?.(repoPath, delivery.pull, change);
        const pull = pullOf(source, repoPath, delivery.pull, 'fake-gitea');
        // A merge is a `closed` with `merged: true`; a push a `pull_request_sync`, a label a
        // `pull_request_label`, all in the `pull_request` family.
        const [eventType, action] =
          delivery.action === 'synchronize'
            ? ['pull_request_sync', 'synchronized']
            : delivery.action === 'labeled'
              ? ['pull_request_label', 'label_updated']
              : ['pull_request', delivery.action === 'merged' ? 'closed' : delivery.action];
        return {
          event: eventType,
          headers: headers('pull_request', eventType),
          payload: {
            action,
            number: delivery.pull,
            pull_request: pull,
            requested_reviewer: null,
            repository,
            sender,
            commit_id: '',
            review: null,
          },
        };
      }
      case 'approval': {
        source.happened?.(repoPath, delivery.pull, { type: 'approval', login: sender.login });
        const pull = pullOf(source, repoPath, delivery.pull, 'fake-gitea');
        const head = pull.head;
        return {
          event: 'pull_request_review_approved',
          headers: headers('pull_request_approved', 'pull_request_review_approved'),
          payload: {
            action: 'reviewed',
            number: delivery.pull,
            pull_request: pull,
            requested_reviewer: null,
            repository,
            sender,
            commit_id:
              typeof head === 'object' && head !== null && 'sha' in head ? String(head.sha) : '',
            // An approval without a body: no comment for Errand to answer.
            review: { type: 'pull_request_review_approved', content: '' },
          },
        };
      }
      case 'labeled': {
        const labels = [...(delivery.others ?? []), delivery.label];
        return {
          event: 'issue_label',
          headers: headers('issues', 'issue_label'),
          payload: {
            action: 'label_updated',
            number: delivery.issue.number,
            issue: issueJson(delivery.issue, labels),
            repository,
            sender,
            commit_id: '',
          },
        };
      }
    }
  };
  return sender(
    source,
    build,
    (headers, key, body) => {
      const signature = hmac('sha256', key, body);
      headers['x-gitea-signature'] = signature;
      headers['x-gogs-signature'] = signature;
      headers['x-hub-signature'] = `sha1=${hmac('sha1', key, body)}`;
      headers['x-hub-signature-256'] = `sha256=${signature}`;
      if (source.forgejo) headers['x-forgejo-signature'] = signature;
    },
    ['x-gitea-delivery', 'x-gogs-delivery', 'x-github-delivery', 'x-forgejo-delivery'],
  );
}
