// A best-of-N job's attempts on its page (docs/eval.md): one row per attempt with its agent,
// outcome, check, cost, diff and branch, the winner marked, and the check's output tail of each
// one that failed it. The tail is the sandbox's output: it goes through `html` like any text.
import type { JobRecord } from '../records/job.ts';
import { formatMs, formatUsd } from '../words.ts';
import { html, type SafeHtml } from './html.ts';

type Attempt = NonNullable<JobRecord['attempts']>[number];

/** What each outcome reads as. */
const OUTCOME_WORDS: Record<Attempt['outcome'], string> = {
  passed: 'passed',
  failed: 'failed the check',
  unchecked: 'not checked',
  no_changes: 'no changes',
  error: 'did not finish',
};

/** The badge class of each outcome: the job statuses' colours, as they read alike. */
const OUTCOME_BADGE: Record<Attempt['outcome'], string> = {
  passed: 'completed',
  failed: 'failed',
  unchecked: '',
  no_changes: '',
  error: 'failed',
};

function checkCell(attempt: Attempt): SafeHtml {
  const check = attempt.check;
  if (check === null) return html`<span class="muted">none</span>`;
  const code = check.exitCode === null ? 'stopped' : `exit ${check.exitCode}`;
  return html`${code} <span class="muted">in ${formatMs(check.durationMs)}</span>`;
}

function diffCell(attempt: Attempt): string {
  const { files, lines } = attempt.diff;
  if (files === 0 && lines === 0) return 'none';
  return `${files} file${files === 1 ? '' : 's'}, ${lines} line${lines === 1 ? '' : 's'}`;
}

function row(attempt: Attempt): SafeHtml {
  return html`<tr id="attempt-${attempt.n}"${attempt.winner ? html` class="winner"` : ''}>
  <td data-label="Attempt">${attempt.n}${attempt.winner ? html` <strong class="badge completed">winner</strong>` : ''}</td>
  <td class="wrap mono" data-label="Agent">${attempt.engine} / ${attempt.model}</td>
  <td class="wrap" data-label="Outcome"><span class="badge ${OUTCOME_BADGE[attempt.outcome]}">${OUTCOME_WORDS[attempt.outcome]}</span>${
    attempt.error ? html`<div class="muted">${attempt.error}</div>` : ''
  }</td>
  <td data-label="Check">${checkCell(attempt)}</td>
  <td data-label="Cost">${formatUsd(attempt.costUsd)}</td>
  <td data-label="Diff">${diffCell(attempt)}</td>
  <td class="wrap mono" data-label="Branch">${attempt.branch}</td>
</tr>`;
}

/** The check's output of an attempt that failed it: the last lines, to see why. */
function failedTail(attempt: Attempt): SafeHtml | string {
  if (attempt.outcome !== 'failed' || attempt.check === null) return '';
  return html`<details class="attempt-tail" id="attempt-${attempt.n}-tail"><summary>Attempt ${attempt.n}: the check's last lines (${
    attempt.check.exitCode === null ? 'stopped' : `exit ${attempt.check.exitCode}`
  })</summary><pre class="output">${attempt.check.outputTail}</pre></details>`;
}

/** The section, or nothing for a job that made no attempts. */
export function attemptsSection(job: JobRecord): SafeHtml | string {
  const attempts = job.attempts ?? [];
  if (attempts.length === 0) return '';
  const winner = attempts.find((attempt) => attempt.winner);
  return html`<section aria-labelledby="attempts"><h2 id="attempts">Attempts</h2>
<p class="muted">${
    winner
      ? `Attempt ${winner.n} won: its branch became the job's branch${job.prLink ? ' and pull request' : ''}.`
      : 'No attempt won.'
  } The first to pass the check wins, then the cheapest, then the smallest diff.</p>
<div class="scroll"><table class="list job-attempts">
<thead><tr><th scope="col">#</th><th scope="col">Agent</th><th scope="col">Outcome</th><th scope="col">Check</th><th scope="col">Cost</th><th scope="col">Diff</th><th scope="col">Branch</th></tr></thead>
<tbody>${attempts.map(row)}</tbody></table></div>
${attempts.map(failedTail)}
</section>`;
}
