// What a forge's webhook request means to Errand, the same for every forge. The forge intake
// (src/features/forge-intake/) verifies a request, reads it into ForgeEvents with its forge's
// payload reader, and queues them; its worker decides what each starts (a follow-up, a job, a
// polite refusal) and answers on the forge. Requests Errand has no use for read as
// null and are acknowledged without being queued. A push (ForgePush) is read apart: it starts
// no job and is never queued, it may only ask for a build of the project's environment.
import type { ForgeKind } from '../projects/forge.ts';

/**
 * In every comment Errand writes on a forge; a comment that carries it never triggers a turn
 * (Errand's comments, posted with a person's token, look like that person's).
 */
export const ERRAND_MARKER = '<!-- errand -->';

export interface ForgeActor {
  /** The forge's login (GitHub/Gitea `login`, GitLab `username`). */
  login: string;
  /** The forge's numeric user id, as a string (GitLab asks membership by id). */
  id: string;
  /** A bot or app account (GitHub `type: "Bot"`, GitLab `bot: true`, Gitea `is_bot`/bot names). */
  bot: boolean;
}

/** The issue or pull request (GitLab: merge request) a comment or label is on. */
export interface ForgeThread {
  kind: 'issue' | 'pull-request';
  /** GitHub/Gitea `number`, GitLab `iid`. */
  number: number;
  title: string;
  /** The description; empty when none. */
  body: string;
  /** The page a person opens. */
  url: string;
}

/** Where a line comment sits in the diff. */
export interface ForgeLineAnchor {
  path: string;
  /** The line in the new file, or the old one when the comment is on a removed line; null when the forge does not say. */
  line: number | null;
  /** The hunk the comment is on, as the forge gives it (may be empty). */
  diffHunk: string;
}

interface ForgeEventBase {
  /** Plain git sends no webhooks. */
  forge: Exclude<ForgeKind, 'git'>;
  /**
   * The delivery's id: GitHub X-GitHub-Delivery, GitLab Idempotency-Key (X-Gitlab-Event-UUID
   * before 17.4), Gitea X-Gitea-Delivery
   * (Forgejo X-Forgejo-Delivery); `sha256:` and the body's hash when the forge sent none. The
   * events of one delivery (several labels) share it.
   */
  deliveryId: string;
  /**
   * What the forge signed that names this event, the same in every delivery of it and in no
   * other event: the comment's, review's or note's id for a comment; for a label, the issue's
   * id, the label and the time of change (adding a label again, later, is a new event).
   * The delivery id is a header no signature covers, so one signed body sent again under new
   * ids is this one event each time, taken once. An edited comment keeps its id: the same event.
   */
  key: string;
  /**
   * The repository the event is for, as the forge names it in its payload: its web URL
   * (GitHub `repository.html_url`, GitLab `project.web_url`, Gitea `repository.html_url`).
   * The worker refuses events whose repository is not the project's.
   */
  repositoryUrl: string;
  /** Who did it. */
  author: ForgeActor;
  thread: ForgeThread;
}

/**
 * A comment was written: on an issue or a pull request's conversation (`conversation`), on a
 * line of a pull request's diff (`line`), or as a review's body (`review`).
 */
export interface ForgeCommentEvent extends ForgeEventBase {
  type: 'comment';
  where: 'conversation' | 'line' | 'review';
  /**
   * The comment's id on the forge (GitHub comment or review id, GitLab note id, Gitea comment
   * or review id), as a string: what reactions and replies address. Empty for a Gitea/Forgejo
   * review, whose payload names no id (its `url` is the pull request's).
   */
  commentId: string;
  /** GitLab: the discussion the note belongs to, for a reply in its thread; otherwise null. */
  discussionId: string | null;
  body: string;
  /** The comment's page. */
  url: string;
  /** For `line` comments. */
  anchor: ForgeLineAnchor | null;
}

/** An issue got a label (GitHub `issues` labeled, GitLab issue hook with a label added, Gitea `issues` label_updated). */
export interface ForgeLabelEvent extends ForgeEventBase {
  type: 'labeled';
  /**
   * The label that was added (for forges that report all labels, each added one is an event).
   * Gitea/Forgejo say only which labels the issue has after a change, so there every label it
   * has is an event, also one it had before (another label was added or removed).
   */
  label: string;
  /**
   * Whether the forge said the label was just added (GitHub, GitLab). False where it says only
   * that the issue carries it (Gitea/Forgejo, at every change of the labels): there an
   * issue that had a job already asks for nothing new.
   */
  added: boolean;
}

export type ForgeEvent = ForgeCommentEvent | ForgeLabelEvent;

/**
 * A push to a branch or a tag (GitHub and Gitea/Forgejo `push`, GitLab `Push Hook`), which the
 * endpoint reads to see whether the project's base ref moved. Not a ForgeEvent: it is neither
 * recorded nor queued, and asks for nothing a second delivery of it could do twice.
 */
export interface ForgePush {
  forge: Exclude<ForgeKind, 'git'>;
  /** The delivery's id, as ForgeEvent's: for the log. */
  deliveryId: string;
  /** The repository pushed to, as the forge names it in its payload (see ForgeEvent). */
  repositoryUrl: string;
  /** The full ref pushed: `refs/heads/<branch>` for a branch, `refs/tags/<tag>` for a tag. */
  ref: string;
  /** The commit the ref points at after the push; null when the push deleted it. */
  after: string | null;
}

/**
 * The forge saying something changed about a pull request or a commit: a check, pipeline or
 * commit status changed (GitHub `check_run`, `check_suite`, `workflow_run`, `status`; GitLab
 * `Pipeline Hook`, `Job Hook`; Gitea/Forgejo `status`), or a pull request was closed, merged,
 * reopened, pushed to, labelled or reviewed (GitHub `pull_request`, `pull_request_review`;
 * GitLab `Merge Request Hook`; Gitea/Forgejo `pull_request`, `pull_request_review_*`). Like a
 * push it is not recorded: it only tells the pull request watch (src/features/pr-watch/) which
 * jobs to look at now, and the watch asks the forge's API what holds; what the payload says of
 * states is not trusted.
 */
export interface ForgeSignal {
  forge: Exclude<ForgeKind, 'git'>;
  /** The delivery's id, as ForgeEvent's: for the log. */
  deliveryId: string;
  /** The repository, as the forge names it in its payload (see ForgeEvent). */
  repositoryUrl: string;
  kind: 'checks' | 'pull-request';
  /** The pull requests (GitLab: merge request iids) it names; may be empty. */
  numbers: number[];
  /** The branches it names (a check's head branch, a pull request's head); may be empty. */
  branches: string[];
  /** The commit it is about (a check's head sha); null when it names none. */
  sha: string | null;
}
