// A turn's commit (src/turns/pipeline.ts): its message ends with a trailer naming the job and
// the turn, so a turn retried after a crash between push and recording finds the commit it
// pushed on the branch's head and does not redo it.
import { gitOut } from '../workspace/git.ts';
import type { WorkspaceConfig } from '../workspace/index.ts';

const TURN_TRAILER = 'Errand-Turn';

/** The commit message: the summary's first line as subject, the rest as body. */
export function commitMessage(summary: string, jobId: string, seq: number, prompt: string): string {
  const lines = summary.trim().split('\n');
  let subject = (lines[0] ?? '').replace(/^#+\s*/, '').trim();
  if (!subject) subject = prompt.trim().split('\n')[0] ?? 'Errand changes';
  if (subject.length > 72) subject = `${subject.slice(0, 69).trimEnd()}...`;
  const body = lines.slice(1).join('\n').trim();
  return `${subject}\n\n${body ? `${body}\n\n` : ''}${TURN_TRAILER}: ${jobId}/${seq}\n`;
}

/** HEAD's commit when it carries this turn's trailer, i.e. the turn was pushed already. */
export async function landedCommit(
  workspace: WorkspaceConfig,
  dir: string,
  jobId: string,
  seq: number,
  signal: AbortSignal,
): Promise<{ sha: string; summary: string } | undefined> {
  const text = await gitOut(workspace, ['log', '-1', '--format=%H%n%B', 'HEAD'], {
    cwd: dir,
    signal,
  });
  const [sha, ...body] = text.split('\n');
  const trailer = `${TURN_TRAILER}: ${jobId}/${seq}`;
  if (!sha || !body.some((line) => line.trim() === trailer)) return undefined;
  return {
    sha,
    summary: body
      .filter((line) => !line.startsWith(`${TURN_TRAILER}:`))
      .join('\n')
      .trim(),
  };
}
