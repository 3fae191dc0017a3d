// What a turn's mode (docs/modes.md) changes in what the agent is told: an ask or plan turn is
// read-only and says so before the request, and the follow-up `approve` is told as the
// approval of the plan before it. The same words for Errand's own loop and every engine; the
// system prompt stays the same from turn to turn (the provider's prompt cache keeps it).
import type { TurnMode } from '../db/schema.ts';
import { isApproval } from '../jobs/input.ts';

const ASK = `[Ask mode] Answer the request below; do not change anything. You have read-only tools:
read the repository as much as the answer needs. Nothing is committed, pushed or opened as a
pull request in this mode: your final message is the answer the user reads, so make it complete
and precise (name the files and lines it rests on).`;

const PLAN = `[Plan mode] Do not change anything yet: write a plan for the request below. You have
read-only tools: read the repository as much as the plan needs. Your final message is the plan
the user reviews and approves before it is carried out: the steps in order, the files each one
changes and how, the tests it adds or runs, and the risks or open questions. Nothing is committed
or pushed in this mode.`;

const APPROVED = `The user approved your plan above. Carry it out now, on this branch: make the
changes it describes, check them as it says, and finish with a summary of what you did (and of
anything you did differently from the plan, and why).`;

/** The prompt the model gets for a turn in `mode` whose user's prompt is `prompt`. */
export function modePrompt(mode: TurnMode, prompt: string, hasEarlier: boolean): string {
  if (mode === 'ask') return `${ASK}\n\n${prompt}`;
  if (mode === 'plan') return `${PLAN}\n\n${prompt}`;
  return hasEarlier && isApproval(prompt) ? APPROVED : prompt;
}

/** Whether a turn in `mode` may change the repository (commit, push, open a pull request). */
export function writes(mode: TurnMode): boolean {
  return mode === 'code';
}
