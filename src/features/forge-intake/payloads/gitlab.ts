// GitLab's webhook requests: authenticated by the secret token itself (X-Gitlab-Token, there
// is no signature), named by X-Gitlab-Event, identified by Idempotency-Key (X-Gitlab-Event-UUID
// before GitLab 17.4). Errand reads
// notes (comments) on issues and merge requests, diff notes on a line among them, and issue
// updates that add labels; a push (`Push Hook`), for whether the project's base ref moved; and,
// for the pull request watch, pipelines and jobs (`Pipeline Hook`, `Job Hook`) and merge
// requests (`Merge Request Hook`, any action, approvals among them).
import { z } from 'zod';
import type {
  ForgeActor,
  ForgeEvent,
  ForgeLabelEvent,
  ForgeLineAnchor,
  ForgePush,
  ForgeSignal,
  ForgeThread,
} from '../../../forges/events.ts';
import {
  deliveryIdOf,
  equalSecret,
  eventKey,
  header,
  type PayloadReader,
  parsePayload,
  pushedCommit,
  type RequestHeaders,
} from './shared.ts';

// Project and group access tokens act as users named project_<id>_bot_<hex> (group_… alike);
// service accounts as service_account_…. GitLab's hook payloads carry no bot flag of their own.
const BOT_USERNAME = /^(?:(?:project|group)_\d+_bot(?:_[0-9a-f]+)?\d*|service_account_.+)$/;

const userSchema = z.object({
  id: z.number(),
  username: z.string(),
  bot: z.boolean().optional(),
});
const projectSchema = z.object({ web_url: z.string() });
const itemSchema = z.object({
  iid: z.number().int().positive(),
  title: z.string(),
  description: z.string().nullable().optional(),
  url: z.string().optional(),
});
const positionSchema = z.object({
  new_path: z.string().nullable().optional(),
  old_path: z.string().nullable().optional(),
  new_line: z.number().int().nullable().optional(),
  old_line: z.number().int().nullable().optional(),
});
const noteSchema = z.object({
  object_kind: z.literal('note'),
  user: userSchema,
  project: projectSchema,
  object_attributes: z.object({
    id: z.number(),
    note: z.string(),
    noteable_type: z.string(),
    // `create` or `update` on GitLab 15.x and later; absent before (every note hook a create).
    action: z.string().optional(),
    discussion_id: z.string().nullable().optional(),
    url: z.string(),
    // DiffNote for a comment on a line of a merge request's diff.
    type: z.string().nullable().optional(),
    position: positionSchema.nullable().optional(),
    // The hunk, on GitLab versions that still send it.
    st_diff: z.object({ diff: z.string().optional() }).nullable().optional(),
  }),
  merge_request: itemSchema.optional(),
  issue: itemSchema.optional(),
});
const labelListSchema = z.array(z.object({ title: z.string() }));
const issueSchema = z.object({
  object_kind: z.literal('issue'),
  user: userSchema,
  project: projectSchema,
  // The issue's id and its time of change name a change of its labels: adding a label again
  // later is another event, the same request sent again is not.
  object_attributes: itemSchema.extend({ id: z.number(), updated_at: z.string() }),
  changes: z
    .object({
      labels: z.object({ previous: labelListSchema, current: labelListSchema }).optional(),
    })
    .optional(),
});

// A branch deleted comes with `after` all zeros and no `checkout_sha`.
const pushSchema = z.object({
  object_kind: z.literal('push'),
  ref: z.string(),
  after: z.string(),
  checkout_sha: z.string().nullable().optional(),
  project: projectSchema,
});

const pipelineSchema = z.object({
  object_kind: z.literal('pipeline'),
  project: projectSchema,
  object_attributes: z.object({
    id: z.number(),
    // The branch, the tag, or a merge request pipeline's refs/merge-requests/<iid>/head.
    ref: z.string(),
    tag: z.boolean().optional(),
    sha: z.string(),
    status: z.string(),
  }),
  // Set for a merge request pipeline only.
  merge_request: z
    .object({ iid: z.number().int().positive(), source_branch: z.string() })
    .nullable()
    .optional(),
});
// A job's hook names the project in `repository` (its `homepage` the project's page); the
// `project` object came later (GitLab 15.x).
const jobSchema = z.object({
  object_kind: z.literal('build'),
  ref: z.string(),
  tag: z.boolean().optional(),
  sha: z.string(),
  build_id: z.number(),
  build_status: z.string(),
  project: projectSchema.optional(),
  repository: z.object({ homepage: z.string() }),
});
const mergeRequestSchema = z.object({
  object_kind: z.literal('merge_request'),
  project: projectSchema,
  object_attributes: z.object({
    iid: z.number().int().positive(),
    source_branch: z.string(),
    action: z.string().optional(),
    last_commit: z.object({ id: z.string() }).nullable().optional(),
  }),
});

/** A merge request pipeline's ref names its merge request (head, merged result, merge train). */
const MERGE_REQUEST_REF = /^refs\/merge-requests\/(\d+)\/(?:head|merge|train)$/;

/** What a pipeline's or job's ref names: a merge request, a branch, or (a tag) nothing. */
function refTargets(ref: string, tag: boolean | undefined) {
  const mr = MERGE_REQUEST_REF.exec(ref);
  if (mr) return { numbers: [Number(mr[1])], branches: [] };
  return { numbers: [], branches: tag === true ? [] : [ref.replace(/^refs\/heads\//, '')] };
}

function readSignal(headers: RequestHeaders, body: unknown): ForgeSignal | null {
  const base = { forge: 'gitlab' as const, deliveryId: idOf(headers, body) };
  switch (header(headers, 'x-gitlab-event')) {
    case 'Pipeline Hook': {
      const p = parsePayload(pipelineSchema, body, 'Pipeline Hook');
      const attributes = p.object_attributes;
      const targets = refTargets(attributes.ref, attributes.tag);
      const mr = p.merge_request;
      return {
        ...base,
        repositoryUrl: p.project.web_url,
        kind: 'checks',
        numbers: mr ? [mr.iid] : targets.numbers,
        branches: mr ? [mr.source_branch] : targets.branches,
        sha: attributes.sha,
      };
    }
    case 'Job Hook': {
      const p = parsePayload(jobSchema, body, 'Job Hook');
      return {
        ...base,
        repositoryUrl: p.project?.web_url ?? p.repository.homepage,
        kind: 'checks',
        ...refTargets(p.ref, p.tag),
        sha: p.sha,
      };
    }
    case 'Merge Request Hook': {
      const p = parsePayload(mergeRequestSchema, body, 'Merge Request Hook');
      const attributes = p.object_attributes;
      return {
        ...base,
        repositoryUrl: p.project.web_url,
        kind: 'pull-request',
        numbers: [attributes.iid],
        branches: [attributes.source_branch],
        sha: attributes.last_commit?.id ?? null,
      };
    }
    default:
      return null;
  }
}

function actor(user: z.infer<typeof userSchema>): ForgeActor {
  return {
    login: user.username,
    id: String(user.id),
    bot: user.bot === true || BOT_USERNAME.test(user.username),
  };
}

function thread(
  kind: ForgeThread['kind'],
  item: z.infer<typeof itemSchema>,
  projectUrl: string,
): ForgeThread {
  return {
    kind,
    number: item.iid,
    title: item.title,
    body: item.description ?? '',
    url:
      item.url ?? `${projectUrl}/-/${kind === 'issue' ? 'issues' : 'merge_requests'}/${item.iid}`,
  };
}

function readNote(base: { forge: 'gitlab'; deliveryId: string }, body: unknown): ForgeEvent[] {
  const p = parsePayload(noteSchema, body, 'Note Hook');
  const note = p.object_attributes;
  if (note.action !== undefined && note.action !== 'create') return [];
  let on: ForgeThread;
  if (note.noteable_type === 'Issue' && p.issue) on = thread('issue', p.issue, p.project.web_url);
  else if (note.noteable_type === 'MergeRequest' && p.merge_request)
    on = thread('pull-request', p.merge_request, p.project.web_url);
  // Notes on commits and snippets are not Errand's.
  else return [];
  const position = note.type === 'DiffNote' ? note.position : null;
  const path = position ? (position.new_path ?? position.old_path) : null;
  // A note on a removed line has only its old line.
  const anchor: ForgeLineAnchor | null =
    position && path
      ? {
          path,
          line: position.new_line ?? position.old_line ?? null,
          diffHunk: note.st_diff?.diff ?? '',
        }
      : null;
  return [
    {
      ...base,
      // Note ids are the instance's: an edit of the note keeps it.
      key: eventKey('gitlab', 'note', note.id),
      type: 'comment',
      where: path ? 'line' : 'conversation',
      repositoryUrl: p.project.web_url,
      author: actor(p.user),
      thread: on,
      commentId: String(note.id),
      discussionId: note.discussion_id ?? null,
      body: note.note,
      url: note.url,
      anchor,
    },
  ];
}

function readIssue(base: { forge: 'gitlab'; deliveryId: string }, body: unknown): ForgeEvent[] {
  const p = parsePayload(issueSchema, body, 'Issue Hook');
  const labels = p.changes?.labels;
  if (!labels) return [];
  const before = new Set(labels.previous.map((label) => label.title));
  const issue = thread('issue', p.object_attributes, p.project.web_url);
  return labels.current
    .filter((label) => !before.has(label.title))
    .map(
      (label): ForgeLabelEvent => ({
        ...base,
        key: eventKey(
          'gitlab',
          'label',
          p.object_attributes.id,
          label.title,
          p.object_attributes.updated_at,
        ),
        type: 'labeled',
        repositoryUrl: p.project.web_url,
        author: actor(p.user),
        thread: issue,
        label: label.title,
        added: true,
      }),
    );
}

/**
 * Idempotency-Key (GitLab 17.4 and later) is the same on every retry and resend of an event;
 * X-Gitlab-Event-UUID is the id of older versions.
 */
const idOf = (headers: RequestHeaders, body: unknown) =>
  deliveryIdOf(headers, ['idempotency-key', 'x-gitlab-event-uuid'], body);

function read(headers: RequestHeaders, body: unknown): ForgeEvent[] {
  const base = { forge: 'gitlab' as const, deliveryId: idOf(headers, body) };
  switch (header(headers, 'x-gitlab-event')) {
    case 'Note Hook':
    case 'Confidential Note Hook':
      return readNote(base, body);
    case 'Issue Hook':
    case 'Confidential Issue Hook':
      return readIssue(base, body);
    default:
      return [];
  }
}

export const gitlabPayloads: PayloadReader = {
  webhookEvents: [
    'Comments',
    'Issues events',
    'Push events',
    'Merge request events',
    'Pipeline events',
    'Job events',
  ],
  verifySignature(headers, _body, secret) {
    const token = header(headers, 'x-gitlab-token');
    return token !== '' && equalSecret(token, secret);
  },
  readEvents: read,
  // A tag's push is a Tag Push Hook, with a ref of its own: no branch moved.
  readPush(headers, body): ForgePush | null {
    if (header(headers, 'x-gitlab-event') !== 'Push Hook') return null;
    const p = parsePayload(pushSchema, body, 'Push Hook');
    return {
      forge: 'gitlab',
      deliveryId: idOf(headers, body),
      repositoryUrl: p.project.web_url,
      ref: p.ref,
      after: p.checkout_sha === null ? null : pushedCommit(p.after),
    };
  },
  readSignal,
};
