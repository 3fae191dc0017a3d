// An eval run in words: a line per result as it finishes, the per-agent table (pass rate with
// its 95 % interval, costs, time, steps, tokens) and each task's failures, for the terminal and
// as Markdown. The numbers are the server's (the run record's `agents`); this only writes them.
import type { EvalResult, EvalRun, EvalRunSummary } from '../../client/index.ts';

/** The states a result does not leave. */
const SETTLED = new Set<EvalResult['state']>(['passed', 'failed', 'error', 'cancelled']);

/** Whether the result is over (passed, failed, error or cancelled). */
export function isSettled(result: EvalResult): boolean {
  return SETTLED.has(result.state);
}

/** 0.75 → "75%"; null → "–". */
export function percent(rate: number | null): string {
  return rate === null ? '–' : `${Math.round(rate * 100)}%`;
}

/** "75% [30–95]": the pass rate and its 95 % interval, in whole percents. */
function passText(rate: number | null, interval: { low: number; high: number } | null) {
  if (rate === null) return '–';
  if (interval === null) return percent(rate);
  return `${percent(rate)} [${Math.round(interval.low * 100)}–${Math.round(interval.high * 100)}]`;
}

/** "$0.0123"; null (unknown) → "?". */
export function usd(value: number | null): string {
  return value === null ? '?' : `$${value.toFixed(4)}`;
}

/** 12345 ms → "12.3s"; null → "–". */
function seconds(ms: number | null): string {
  return ms === null ? '–' : `${(ms / 1000).toFixed(1)}s`;
}

/** 12345 → "12.3k"; small counts as they are. */
function count(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** The last line of a failure's output that says something. */
export function lastLine(tail: string | null): string {
  const lines = (tail ?? '').split('\n').map((l) => l.trim());
  return lines.filter((l) => l !== '').at(-1) ?? '';
}

/**
 * A finished result on one line: "task agent #1 passed 12.3s $0.0123", or for a failure its
 * check's exit and the last line of its output (of the job's error for an error).
 */
export function resultLine(r: EvalResult): string {
  const head = `${r.task} ${r.agent} #${r.repeat} ${r.state}`;
  if (r.state === 'cancelled') return head;
  const numbers = `${seconds(r.durationMs)} ${usd(r.costUsd)}`;
  if (r.state === 'passed') return `${head} ${numbers}`;
  const exit = r.state === 'failed' && r.checkExit !== null ? ` (exit ${r.checkExit})` : '';
  const why = lastLine(r.tail);
  return `${head}${exit} ${numbers}${why ? `: ${why}` : ''}`;
}

const HEADERS = [
  'agent',
  'pass',
  'median cost',
  'total cost',
  'median time',
  'median steps',
  'tokens in/out',
];

/** The table's rows: one per agent, in the record's order. */
function agentRows(run: EvalRunSummary): string[][] {
  return run.agents.map((a) => [
    a.agent,
    `${passText(a.passRate, a.interval)} (${a.passed}/${a.finished})`,
    usd(a.medianCostUsd),
    usd(a.totalCostUsd),
    seconds(a.medianDurationMs),
    a.medianSteps === null ? '–' : String(a.medianSteps),
    `${count(a.inputTokens)}/${count(a.outputTokens)}`,
  ]);
}

/** Columns padded to their widest cell, two spaces apart. */
export function textTable(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
    )
    .join('\n');
}

/** A cell of a Markdown table: no pipe or line break breaks the row. */
function cell(text: string): string {
  return text.replaceAll('\\', '\\\\').replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** Rows as a Markdown table, the first one its header. */
export function markdownTable(rows: string[][]): string {
  const [head = [], ...body] = rows;
  return [
    `| ${head.map(cell).join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...body.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

/** Each task's failed, errored results: the task, then "agent #n: last line" under it. */
function failures(run: EvalRun): Map<string, string[]> {
  const byTask = new Map<string, string[]>();
  for (const r of run.results) {
    if (r.state !== 'failed' && r.state !== 'error') continue;
    const why = lastLine(r.tail) || (r.checkExit === null ? r.state : `exit ${r.checkExit}`);
    const lines = byTask.get(r.task) ?? [];
    lines.push(`${r.agent} #${r.repeat} ${r.state}: ${why}`);
    byTask.set(r.task, lines);
  }
  return byTask;
}

/** How far the run got: "finished, 12/12 results", "running, 3/12 results". */
function progressText(run: EvalRun): string {
  const done = run.results.filter(isSettled).length;
  return `${run.state}, ${done}/${run.results.length} results`;
}

/** The run for the terminal: its name and state, the agents' table, the failures by task. */
export function runText(run: EvalRun): string {
  const lines = [`${run.id} ${run.name} (${progressText(run)})`, ''];
  lines.push(textTable([HEADERS, ...agentRows(run)]));
  const failed = failures(run);
  if (failed.size > 0) {
    lines.push('', 'Failures:');
    for (const [task, why] of failed) {
      lines.push(`  ${task}`);
      for (const line of why) lines.push(`    ${line}`);
    }
  }
  return lines.join('\n');
}

/** The run as Markdown: a heading, the agents' table, then each task's failures. */
export function runMarkdown(run: EvalRun): string {
  const lines = [
    `# Eval ${run.name}`,
    '',
    `Run \`${run.id}\`: ${progressText(run)}, started ${run.createdAt}${run.finishedAt ? `, ended ${run.finishedAt}` : ''}. Pass rates with their 95 % (Wilson) interval.`,
    '',
    markdownTable([HEADERS, ...agentRows(run)]),
  ];
  const failed = failures(run);
  if (failed.size > 0) {
    lines.push('', '## Failures');
    for (const [task, why] of failed) {
      lines.push('', `### ${task}`, '');
      for (const line of why) lines.push(`- ${line.replaceAll('\n', ' ')}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** A run in a list, on one line: id, state, when, name, and each agent's pass rate. */
export function runListLine(run: EvalRunSummary): string {
  const agents = run.agents.map((a) => `${a.agent} ${percent(a.passRate)}`).join(', ');
  return `${run.id}  ${run.state}  ${run.createdAt}  ${run.name}${agents ? `  ${agents}` : ''}`;
}
