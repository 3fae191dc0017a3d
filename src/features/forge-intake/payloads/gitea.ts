// Gitea's and Forgejo's webhook requests: signed with the hex HMAC-SHA256 of the body in
// X-Gitea-Signature (Forgejo: X-Forgejo-Signature too), identified by X-Gitea-Delivery. The
// event is read from X-Gitea-Event-Type, which names it exactly; X-Gitea-Event gives only its
// family (a review comment and a comment both say `issue_comment`... or `pull_request_comment`)
// and is the fallback of versions without the former. A `push` is read apart, for whether the
// project's base ref moved; a commit `status`, a pull request's change and a review are read
// apart too, as signals to the pull request watch.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ForgeActor, ForgeEvent, ForgeSignal } from '../../../forges/events.ts';
import {
  deliveryIdOf,
  equalSecret,
  eventKey,
  header,
  hmacSha256Hex,
  type PayloadReader,
  parsePayload,
  type RequestHeaders,
  webPush,
  webThread,
  webThreadFields,
} from './shared.ts';

const userSchema = z.object({ id: z.number(), login: z.string() });
const repositorySchema = z.object({ html_url: z.string() });
const issueSchema = z.object({
  ...webThreadFields,
  // Set when the issue is a pull request.
  pull_request: z.object({}).passthrough().nullable().optional(),
  labels: z
    .array(z.object({ name: z.string() }))
    .nullable()
    .optional(),
});
const commentSchema = z.object({
  action: z.string(),
  issue: issueSchema,
  comment: z.object({ id: z.number(), body: z.string(), html_url: z.string(), user: userSchema }),
  repository: repositorySchema,
  is_pull: z.boolean().optional(),
});
const reviewSchema = z.object({
  action: z.string(),
  pull_request: z.object(webThreadFields),
  review: z.object({ type: z.string(), content: z.string() }),
  sender: userSchema,
  repository: repositorySchema,
});
const issueLabelSchema = z.object({
  action: z.string(),
  // The issue's id and its time of change name a change of its labels (Gitea updates the time
  // at each): the same request sent again is one event, a later change another.
  issue: issueSchema.extend({ id: z.number(), updated_at: z.string() }),
  sender: userSchema,
  repository: repositorySchema,
});

// A commit status was created (the `status` event of recent Gitea; where the server sends none,
// the watch polls). The payload names no branch and no pull request: only the commit.
const statusEventSchema = z.object({
  sha: z.string().min(1),
  context: z.string(),
  state: z.string(),
  repository: repositorySchema,
});
// A pull request's change (`pull_request`, `pull_request_sync`, `pull_request_label`) or review.
const pullEventSchema = z.object({
  action: z.string(),
  pull_request: z.object({
    number: z.number().int().positive(),
    // The head branch's name; its `ref` is `refs/pull/N/head` once the branch is deleted.
    head: z.object({ label: z.string(), ref: z.string() }),
  }),
  repository: repositorySchema,
});
/** What a `pull_request`-family delivery does that the watch wants to hear of. */
const PULL_ACTIONS: ReadonlySet<string> = new Set([
  'closed',
  'reopened',
  'synchronized',
  'label_updated',
  'label_cleared',
]);
/** The event types of a submitted review (X-Gitea-Event-Type). */
const REVIEW_EVENTS: ReadonlySet<string> = new Set([
  'pull_request_review_approved',
  'pull_request_review_rejected',
  'pull_request_review_comment',
]);

/** Gitea's own actors (Ghost -1, Gitea Actions -2) have ids below 1; apps sign as name[bot]. */
function actor(user: z.infer<typeof userSchema>): ForgeActor {
  return {
    login: user.login,
    id: String(user.id),
    bot: user.id < 1 || user.login.endsWith('[bot]'),
  };
}

/** The event's exact name: X-Forgejo-Event-Type or X-Gitea-Event-Type, else the family. */
function eventOf(headers: RequestHeaders): string {
  for (const name of [
    'x-forgejo-event-type',
    'x-gitea-event-type',
    'x-forgejo-event',
    'x-gitea-event',
  ]) {
    const value = header(headers, name).trim();
    if (value) return value;
  }
  return '';
}

function read(headers: RequestHeaders, body: unknown): ForgeEvent[] {
  const event = eventOf(headers);
  const base = {
    forge: 'gitea' as const,
    deliveryId: deliveryIdOf(headers, ['x-forgejo-delivery', 'x-gitea-delivery'], body),
  };
  const isReview =
    event.startsWith('pull_request_review_') ||
    event === 'pull_request_approved' ||
    event === 'pull_request_rejected' ||
    // An old Gitea names a review comment by its family only; its payload has the review.
    (event === 'pull_request_comment' &&
      typeof body === 'object' &&
      body !== null &&
      'review' in body);
  if (isReview && event !== 'pull_request_review_request') {
    const p = parsePayload(reviewSchema, body, event);
    if (p.action !== 'reviewed' || !p.review.content) return [];
    return [
      {
        ...base,
        // The payload names no review id: the whole signed payload names the review.
        key: eventKey(
          'gitea',
          'review',
          createHash('sha256').update(JSON.stringify(body)).digest('hex'),
        ),
        type: 'comment',
        where: 'review',
        repositoryUrl: p.repository.html_url,
        author: actor(p.sender),
        thread: webThread('pull-request', p.pull_request),
        // The payload names no review id: a reaction or reply goes to the pull request.
        commentId: '',
        discussionId: null,
        body: p.review.content,
        url: p.pull_request.html_url,
        anchor: null,
      },
    ];
  }
  if (event === 'issue_comment' || event === 'pull_request_comment') {
    const p = parsePayload(commentSchema, body, event);
    if (p.action !== 'created') return [];
    const kind = p.is_pull || p.issue.pull_request ? 'pull-request' : 'issue';
    return [
      {
        ...base,
        key: eventKey('gitea', 'comment', p.comment.id),
        type: 'comment',
        // A comment on a line comes as a comment too: the payload does not say where it is.
        where: 'conversation',
        repositoryUrl: p.repository.html_url,
        author: actor(p.comment.user),
        thread: webThread(kind, p.issue),
        commentId: String(p.comment.id),
        discussionId: null,
        body: p.comment.body,
        url: p.comment.html_url,
        anchor: null,
      },
    ];
  }
  if (event === 'issue_label' || event === 'issues') {
    const p = parsePayload(issueLabelSchema, body, event);
    if (p.action !== 'label_updated') return [];
    // Gitea says which labels the issue has now, not which one was added: each is an event.
    return (p.issue.labels ?? []).map((label) => ({
      ...base,
      key: eventKey('gitea', 'label', p.issue.id, label.name, p.issue.updated_at),
      type: 'labeled' as const,
      repositoryUrl: p.repository.html_url,
      author: actor(p.sender),
      thread: webThread(p.issue.pull_request ? 'pull-request' : 'issue', p.issue),
      label: label.name,
      added: false,
    }));
  }
  return [];
}

function readSignal(headers: RequestHeaders, body: unknown): ForgeSignal | null {
  const event = exactEventOf(headers);
  const base = {
    forge: 'gitea' as const,
    deliveryId: deliveryIdOf(headers, ['x-forgejo-delivery', 'x-gitea-delivery'], body),
  };
  if (event === 'status') {
    const p = parsePayload(statusEventSchema, body, event);
    return {
      ...base,
      repositoryUrl: p.repository.html_url,
      kind: 'checks',
      numbers: [],
      branches: [],
      sha: p.sha,
    };
  }
  const isPull =
    event === 'pull_request' || event === 'pull_request_sync' || event === 'pull_request_label';
  if (!isPull && !REVIEW_EVENTS.has(event)) return null;
  const p = parsePayload(pullEventSchema, body, event);
  // A review counts whatever its action; a change only when it may change what the watch does.
  if (isPull && !PULL_ACTIONS.has(p.action)) return null;
  const head = p.pull_request.head;
  return {
    ...base,
    repositoryUrl: p.repository.html_url,
    kind: 'pull-request',
    numbers: [p.pull_request.number],
    branches: head.label ? [head.label] : head.ref.startsWith('refs/') ? [] : [head.ref],
    // About the pull request, not one commit: the watch reads its head from the API.
    sha: null,
  };
}

/**
 * The event's exact name; on versions that send only its family, the family where it names one
 * event the watch reads (a `pull_request` family's action tells its changes apart), else ''.
 */
function exactEventOf(headers: RequestHeaders): string {
  for (const name of ['x-forgejo-event-type', 'x-gitea-event-type']) {
    const value = header(headers, name).trim();
    if (value) return value;
  }
  const family = eventOf(headers);
  if (family === 'status') return family;
  // The review families (pull_request_approved, …) name their review exactly.
  if (family === 'pull_request_approved') return 'pull_request_review_approved';
  if (family === 'pull_request_rejected') return 'pull_request_review_rejected';
  return family === 'pull_request' ? 'pull_request' : '';
}

export const giteaPayloads: PayloadReader = {
  webhookEvents: [
    'Issue Label',
    'Issue Comment',
    'Pull Request',
    'Pull Request Labeled',
    'Pull Request Synchronized',
    'Pull Request Comment',
    'Pull Request Reviewed',
    'Status',
    'Push',
  ],
  verifySignature(headers, body, secret) {
    const signature =
      header(headers, 'x-forgejo-signature') || header(headers, 'x-gitea-signature');
    return signature !== '' && equalSecret(signature.toLowerCase(), hmacSha256Hex(secret, body));
  },
  readEvents: read,
  readSignal,
  readPush(headers, body) {
    if (eventOf(headers) !== 'push') return null;
    return webPush(
      {
        forge: 'gitea',
        deliveryId: deliveryIdOf(headers, ['x-forgejo-delivery', 'x-gitea-delivery'], body),
      },
      body,
    );
  },
};
