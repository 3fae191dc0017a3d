// The dashboard's Evals pages as functions of their data: the list of runs, and a run's page
// with its per-agent table, a chart of pass rate (with its 95 % interval) against total cost,
// one labelled point per agent, drawn as SVG on the server, and its per-task results. Every
// value goes through `html`.
import { html, type SafeHtml } from '../../dashboard/html.ts';
import { page, when } from '../../dashboard/layout.ts';
import type { Principal } from '../../keys/service.ts';
import type { AgentStats } from './stats.ts';
import type { EvalRunRecord } from './types.ts';

type RunSummary = Omit<EvalRunRecord, 'results'>;

/** A rate as a percentage; the sign kept with its number (a no-break space). */
const percent = (rate: number | null): string =>
  rate === null ? '–' : `${(rate * 100).toFixed(1)}\u00a0%`;
const usd = (value: number | null): string => (value === null ? '–' : `$${value.toFixed(4)}`);
const seconds = (ms: number | null): string => (ms === null ? '–' : `${(ms / 1000).toFixed(1)} s`);
const plain = (value: number | null): string => (value === null ? '–' : String(value));

function stateBadge(state: string): SafeHtml {
  const kind =
    state === 'passed' || state === 'finished'
      ? 'enabled'
      : state === 'failed' || state === 'error'
        ? 'failed'
        : 'disabled';
  return html`<span class="badge ${kind}">${state}</span>`;
}

/** The list of runs, newest first. */
export function evalsPage(principal: Principal, runs: readonly RunSummary[]): string {
  const rows = runs.map(
    (run) => html`<tr>
  <td class="wrap"><a href="/evals/${run.id}">${run.name}</a><div class="muted mono">${run.id}</div></td>
  <td data-label="State">${stateBadge(run.state)}</td>
  <td data-label="Started">${when(run.createdAt)}</td>
  <td data-label="Tasks">${run.suite.tasks.length}</td>
  <td class="wrap" data-label="Agents">${run.agents.map(
    (a) => html`<div><span class="mono">${a.agent}</span> ${percent(a.passRate)}</div>`,
  )}</td>
</tr>`,
  );
  const table = runs.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Run</th><th scope="col">State</th><th scope="col">Started</th>
<th scope="col">Tasks</th><th scope="col">Pass rate per agent</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : html`<p>No eval runs yet. Start one with <code>errand eval run SUITE</code>.</p>`;
  return page(
    { title: 'Evals', principal },
    html`<p>Each run measures agents on your own repositories: every task of its suite runs as a
job with each agent, and the task's check says whether it passed.</p>
${table}`,
  );
}

const CHART = { width: 640, height: 360, left: 56, right: 24, top: 20, bottom: 48 };

/** A tidy step for an axis that must reach `max`. */
function niceMax(max: number): number {
  if (max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

/**
 * Pass rate (y, 0 to 100 %, the interval as a bar) against total cost (x) per agent. Agents
 * with no finished result or an unknown cost have no place on it and are listed under it.
 */
function passRateChart(agents: readonly AgentStats[]): SafeHtml {
  const placed = agents.filter(
    (a): a is AgentStats & { passRate: number; totalCostUsd: number } =>
      a.passRate !== null && a.totalCostUsd !== null,
  );
  const left = agents.filter((a) => !placed.includes(a as (typeof placed)[number]));
  const { width, height, left: x0, right, top, bottom } = CHART;
  const plotW = width - x0 - right;
  const plotH = height - top - bottom;
  const xMax = niceMax(Math.max(0, ...placed.map((a) => a.totalCostUsd)));
  const x = (cost: number) => x0 + (cost / xMax) * plotW;
  const y = (rate: number) => top + (1 - rate) * plotH;
  const yTicks = [0, 0.25, 0.5, 0.75, 1];
  const xTicks = [0, 0.25, 0.5, 0.75, 1].map((f) => f * xMax);
  const fmt = (n: number) => n.toFixed(2);
  // A label beside its point, on the side with room: left of a point in the right half.
  const label = (text: string, px: number, py: number) =>
    px > x0 + plotW / 2
      ? html`<text x="${fmt(px - 8)}" y="${fmt(py - 8)}" font-size="12" text-anchor="end">${text}</text>`
      : html`<text x="${fmt(px + 8)}" y="${fmt(py - 8)}" font-size="12">${text}</text>`;
  const points = placed.map((a) => {
    const cx = fmt(x(a.totalCostUsd));
    const bar = a.interval
      ? html`<line class="interval" x1="${cx}" x2="${cx}" y1="${fmt(y(a.interval.high))}" y2="${fmt(y(a.interval.low))}" stroke="currentColor" stroke-width="2"/>
<line x1="${fmt(x(a.totalCostUsd) - 5)}" x2="${fmt(x(a.totalCostUsd) + 5)}" y1="${fmt(y(a.interval.high))}" y2="${fmt(y(a.interval.high))}" stroke="currentColor"/>
<line x1="${fmt(x(a.totalCostUsd) - 5)}" x2="${fmt(x(a.totalCostUsd) + 5)}" y1="${fmt(y(a.interval.low))}" y2="${fmt(y(a.interval.low))}" stroke="currentColor"/>`
      : '';
    return html`<g class="agent"><title>${a.agent}: ${percent(a.passRate)} (95 % ${
      a.interval ? `${percent(a.interval.low)}–${percent(a.interval.high)}` : '–'
    }), ${usd(a.totalCostUsd)}</title>${bar}
<circle cx="${cx}" cy="${fmt(y(a.passRate))}" r="5" fill="currentColor"/>
${label(a.agent, x(a.totalCostUsd), y(a.passRate))}</g>`;
  });
  return html`<figure class="chart">
<svg role="img" aria-labelledby="chart-title" viewBox="0 0 ${width} ${height}" width="100%" style="max-width:${width}px" xmlns="http://www.w3.org/2000/svg">
<title id="chart-title">Pass rate against total cost, per agent</title>
${yTicks.map(
  (
    t,
  ) => html`<line x1="${x0}" x2="${width - right}" y1="${fmt(y(t))}" y2="${fmt(y(t))}" stroke="currentColor" stroke-opacity="0.15"/>
<text x="${x0 - 8}" y="${fmt(y(t) + 4)}" font-size="11" text-anchor="end">${t * 100} %</text>`,
)}
${xTicks.map(
  (t) =>
    html`<text x="${fmt(x(t))}" y="${height - bottom + 16}" font-size="11" text-anchor="middle">$${t.toFixed(xMax < 1 ? 3 : 2)}</text>`,
)}
<line x1="${x0}" x2="${x0}" y1="${top}" y2="${height - bottom}" stroke="currentColor"/>
<line x1="${x0}" x2="${width - right}" y1="${height - bottom}" y2="${height - bottom}" stroke="currentColor"/>
<text x="${x0 + plotW / 2}" y="${height - 8}" font-size="12" text-anchor="middle">total cost (USD)</text>
<text x="14" y="${top + plotH / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 14 ${top + plotH / 2})">pass rate</text>
${points}
</svg>
<figcaption>Pass rate with its 95 % interval against total cost.${
    left.length
      ? html` Not shown (nothing finished, or a cost unknown): ${left.map((a) => a.agent).join(', ')}.`
      : ''
  }</figcaption>
</figure>`;
}

function agentTable(agents: readonly AgentStats[]): SafeHtml {
  return html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Agent</th><th scope="col">Passed</th><th scope="col">Pass rate (95 %)</th>
<th scope="col">Median cost</th><th scope="col">Total cost</th><th scope="col">Median time</th>
<th scope="col">Median steps</th><th scope="col">Tokens in / out</th></tr></thead>
<tbody>${agents.map(
    (a) => html`<tr>
  <td class="mono wrap">${a.agent}</td>
  <td data-label="Passed">${a.passed} / ${a.finished}${a.runs > a.finished ? html` <span class="muted">(${a.runs - a.finished} not finished)</span>` : ''}</td>
  <td data-label="Pass rate">${percent(a.passRate)}${a.interval ? html` <span class="muted">${percent(a.interval.low)}–${percent(a.interval.high)}</span>` : ''}</td>
  <td data-label="Median cost">${usd(a.medianCostUsd)}</td>
  <td data-label="Total cost">${usd(a.totalCostUsd)}</td>
  <td data-label="Median time">${seconds(a.medianDurationMs)}</td>
  <td data-label="Median steps">${plain(a.medianSteps)}</td>
  <td data-label="Tokens">${a.inputTokens} / ${a.outputTokens}</td>
</tr>`,
  )}</tbody></table></div>`;
}

function resultTable(run: EvalRunRecord): SafeHtml {
  return html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Task</th><th scope="col">Agent</th><th scope="col">#</th>
<th scope="col">State</th><th scope="col">Job</th><th scope="col">Cost</th><th scope="col">Time</th>
<th scope="col">Check output</th></tr></thead>
<tbody>${run.results.map(
    (r) => html`<tr>
  <td class="mono wrap">${r.task}</td>
  <td class="mono wrap" data-label="Agent">${r.agent}</td>
  <td data-label="Repeat">${r.repeat}</td>
  <td data-label="State">${stateBadge(r.state)}${r.checkExit !== null ? html` <span class="muted">exit ${r.checkExit}</span>` : ''}</td>
  <td data-label="Job">${r.jobId ? html`<a class="mono" href="/projects/${r.projectId}/jobs/${r.jobId}">${r.jobId}</a>` : html`<span class="muted">none</span>`}</td>
  <td data-label="Cost">${usd(r.costUsd)}</td>
  <td data-label="Time">${seconds(r.durationMs)}</td>
  <td class="wrap" data-label="Check output">${r.tail ? html`<pre class="tail">${r.tail}</pre>` : ''}</td>
</tr>`,
  )}</tbody></table></div>`;
}

/** A run's page: its table per agent, its chart, its results per task, and its cancel button. */
export function evalRunPage(principal: Principal, run: EvalRunRecord): string {
  return page(
    { title: run.name, principal },
    html`<p><a href="/evals">← Evals</a></p>
<p>${stateBadge(run.state)} <span class="mono">${run.id}</span> · started ${when(run.createdAt)}${
      run.finishedAt ? html` · ended ${when(run.finishedAt)}` : ''
    } · ${run.suite.tasks.length} tasks × ${run.agents.length} agents × ${run.suite.repeat}, ${run.suite.concurrency} at once</p>
${
  run.state === 'running'
    ? html`<form method="post" action="/evals/${run.id}/cancel" class="inline"><button type="submit">Cancel run</button></form>`
    : ''
}
<section aria-labelledby="agents"><h2 id="agents">Agents</h2>
${agentTable(run.agents)}
${passRateChart(run.agents)}</section>
<section aria-labelledby="tasks"><h2 id="tasks">Tasks</h2>
${resultTable(run)}</section>`,
  );
}
