// What the pull request watch does on one look at a job's pull request, decided from what the
// forge said and what the watch did before, without calling anything: watch.ts gathers the facts
// and carries the decision out. Each act is done once per head commit (the watch's row keeps
// which head it acted on), so looking again, after a webhook or a poll, repeats nothing.
import picomatch from 'picomatch';
import type { CheckResult, PullRequestStatus } from '../../forges/types.ts';

/** The label that makes Errand leave a pull request alone. */
const NO_ERRAND_LABEL = 'no-errand';

/** Why the watch leaves a pull request alone while it holds; checked again on every look. */
export const LEFT_ALONE = {
  label: `the pull request has the ${NO_ERRAND_LABEL} label: Errand leaves it alone`,
  pushed:
    "someone else pushed to the pull request's branch: Errand leaves it alone until a turn pushes again",
} as const;

/** The watch's own memory of the job (its pr_watches row). */
export interface WatchMemory {
  state: 'watching' | 'paused' | 'ended';
  reason: string | null;
  autofixes: number;
  /** The head whose failed checks were reported (checks.failed), once per head. */
  failedSha: string | null;
  /** The head the forge said once does not merge; a second look that says so acts. */
  unmergeableSha: string | null;
  /** The head a conflict turn was queued for. */
  conflictSha: string | null;
  /** The head a merge was asked for. */
  mergeSha: string | null;
}

/** The project's settings of the watch. */
interface WatchSettings {
  autofixAttempts: number;
  /** Globs of the check names that count; null: every check. */
  autofixChecks: readonly string[] | null;
  autoMerge: 'off' | 'green' | 'green-and-approved';
}

export interface Situation {
  status: PullRequestStatus;
  /** The checks of the head that count (wantedChecks). */
  checks: readonly CheckResult[];
  watch: WatchMemory;
  settings: WatchSettings;
  /** The newest commit a turn of the job pushed; null when none did. */
  errandSha: string | null;
  /** A turn of the job is queued or running: its end is looked at. */
  turnOpen: boolean;
}

export type Decision =
  /** The pull request was merged or closed: the watch ends. */
  | { act: 'end'; state: 'merged' | 'closed' }
  /** Nothing to do now; `soon` when the forge is still working something out. */
  | { act: 'wait'; soon: boolean }
  /** The forge said the head does not merge, for the first time: asked again soon. */
  | { act: 'unmergeable' }
  /** Stop acting (and say so once): `stays` until a person's turn, or while the condition holds. */
  | { act: 'pause'; reason: string; stays: boolean; comment: boolean }
  /** A condition that paused the watch no longer holds: watch again, then look again. */
  | { act: 'resume' }
  /** The head's checks failed: report them (once per head) and maybe queue a turn to fix them. */
  | { act: 'failed'; failed: CheckResult[]; report: boolean; fix: boolean }
  /** The pull request conflicts with its base: queue a turn that brings the base in. */
  | { act: 'conflict' }
  /**
   * Everything passed: reset the attempts, and merge when `merge`; `soon` when the project would
   * merge it but the forge has not said yet whether it merges.
   */
  | { act: 'green'; merge: boolean; soon: boolean };

/** The checks that count: those whose names match one of the project's globs, or all. */
export function wantedChecks(
  checks: readonly CheckResult[],
  globs: readonly string[] | null,
): CheckResult[] {
  if (!globs || globs.length === 0) return [...checks];
  const matches = picomatch([...globs], { nocase: true, dot: true });
  return checks.filter((check) => matches(check.name));
}

function leftAlone(s: Situation): string | undefined {
  const labels = s.status.labels.map((label) => label.toLowerCase());
  if (labels.includes(NO_ERRAND_LABEL)) return LEFT_ALONE.label;
  if (s.errandSha !== null && s.status.headSha !== s.errandSha) return LEFT_ALONE.pushed;
  return undefined;
}

/** Whether a paused watch waits for a condition that may clear by itself (a label, a push). */
function pausedByCondition(reason: string | null): boolean {
  return reason === LEFT_ALONE.label || reason === LEFT_ALONE.pushed;
}

export function decide(s: Situation): Decision {
  const { status, watch, settings } = s;
  if (status.state !== 'open') return { act: 'end', state: status.state };
  if (watch.state === 'ended') return { act: 'wait', soon: false };
  if (s.turnOpen) return { act: 'wait', soon: false };
  const alone = leftAlone(s);
  if (alone) {
    return watch.state === 'paused' && watch.reason === alone
      ? { act: 'wait', soon: false }
      : { act: 'pause', reason: alone, stays: false, comment: false };
  }
  if (watch.state === 'paused')
    return pausedByCondition(watch.reason) ? { act: 'resume' } : { act: 'wait', soon: false };

  if (status.mergeable === false) {
    // Once is not enough: a forge may say so while it works the merge out after a push.
    if (watch.unmergeableSha !== status.headSha) return { act: 'unmergeable' };
    if (watch.conflictSha !== status.headSha) return { act: 'conflict' };
    return {
      act: 'pause',
      reason: `the pull request still conflicts with ${status.base} after a turn tried to bring it in`,
      stays: true,
      comment: true,
    };
  }
  const pending = s.checks.some((check) => check.state === 'pending');
  const failed = s.checks.filter((check) => check.state === 'failure');
  // A failed check is acted on once the head's checks are all done: the turn gets every failure.
  if (pending) return { act: 'wait', soon: false };
  if (failed.length > 0) {
    const report = watch.failedSha !== status.headSha;
    if (settings.autofixAttempts === 0) return { act: 'failed', failed, report, fix: false };
    if (watch.autofixes >= settings.autofixAttempts) {
      const names = failed.map((check) => check.name).join(', ');
      return {
        act: 'pause',
        reason: `${names} still ${failed.length === 1 ? 'fails' : 'fail'} after ${watch.autofixes} ${watch.autofixes === 1 ? 'attempt' : 'attempts'} to fix ${failed.length === 1 ? 'it' : 'them'}`,
        stays: true,
        comment: true,
      };
    }
    return { act: 'failed', failed, report, fix: true };
  }
  // No check at all is no green: a forge that has not started the head's checks yet says so.
  if (s.checks.length === 0) return { act: 'wait', soon: false };
  // A draft is merged once a person marks it ready, and a head once.
  const allowed =
    !status.draft &&
    watch.mergeSha !== status.headSha &&
    (settings.autoMerge === 'green' ||
      (settings.autoMerge === 'green-and-approved' && status.approved));
  return {
    act: 'green',
    merge: allowed && status.mergeable === true,
    soon: allowed && status.mergeable === null,
  };
}
