// The turn the pull request watch queues when the job's pull request conflicts with its base
// (turns.purpose `conflict`, src/features/pr-watch/): before the agent, the base is brought
// into the work branch (workspace/integrate.ts). Done cleanly, there is nothing for the agent:
// the merge (or the rebased branch) is pushed as it is. With conflicts, the agent gets them in
// its prompt, and its resolution is concluded as the merge commit, once no conflict marker is
// left.
import type { Emit } from '../events/catalog.ts';
import { TurnFailedError, type TurnInput } from '../jobs/runner.ts';
import {
  type Checkout,
  concludeMerge,
  type Integration,
  integrateBase,
  stillConflicted,
  type WorkspaceConfig,
} from '../workspace/index.ts';
import { commitMessage } from './commits.ts';

/** Brings the base in for a conflict turn; undefined for any other turn. */
export async function bringBaseIn(
  workspace: WorkspaceConfig,
  input: TurnInput,
  checkout: Checkout,
  emit: Emit,
): Promise<Integration | undefined> {
  const { turn, job, project, signal } = input;
  if (turn.purpose !== 'conflict') return undefined;
  const strategy = project.conflict_strategy;
  const integration = await integrateBase(workspace, {
    dir: checkout.dir,
    base: checkout.baseCommit,
    baseName: job.ref,
    strategy,
    // Its trailer names the turn, as every turn's commit: a retry finds it pushed.
    message: commitMessage(`Merge ${job.ref} into ${job.branch}`, job.id, turn.seq, turn.prompt),
    signal,
  });
  await emit('base.integrated', {
    base: job.ref,
    strategy,
    outcome: integration.outcome,
    paths: integration.paths.slice(0, 100),
    note: integration.note,
  });
  return integration;
}

/** The summary of a conflict turn the agent had nothing to do in. */
export function integratedSummary(base: string, integration: Integration): string {
  if (integration.outcome === 'up-to-date')
    return `The branch already had \`${base}\`: nothing to merge.`;
  const how =
    integration.outcome === 'rebased'
      ? `Rebased the branch onto \`${base}\``
      : `Merged \`${base}\` into the branch`;
  return `${how} without conflicts.${integration.note ? ` (${integration.note}.)` : ''}`;
}

/** The turn's input with the conflicts after its prompt: what the agent is given. */
export function withConflicts(input: TurnInput, integration: Integration): TurnInput {
  const fence = '`'.repeat(
    Math.max(3, ...Array.from(integration.hunks.matchAll(/`+/g), (m) => m[0].length + 1)),
  );
  const prompt = [
    input.turn.prompt,
    '',
    `Git could not merge these files: ${integration.paths.map((p) => `\`${p}\``).join(', ')}. Their conflicts:`,
    '',
    `${fence}diff`,
    integration.hunks.replace(/\n+$/, ''),
    fence,
  ].join('\n');
  return { ...input, turn: { ...input.turn, prompt } };
}

/**
 * Concludes the merge the agent resolved, as one commit; fails the turn, pushing nothing,
 * when a conflicted file still has a marker.
 */
export async function concludeResolution(
  workspace: WorkspaceConfig,
  checkout: Checkout,
  integration: Integration,
  message: string,
  signal: AbortSignal,
): Promise<string> {
  const left = await stillConflicted(checkout.dir, integration.paths);
  if (left.length > 0)
    throw new TurnFailedError(
      `the agent left conflict markers in ${left.join(', ')}; nothing was committed or pushed`,
    );
  return concludeMerge(workspace, { dir: checkout.dir, message, signal });
}
