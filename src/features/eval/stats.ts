// The numbers of an eval run's per-agent table (docs/eval.md): pass rate with its 95 % Wilson
// score interval, median and total cost, median time and steps, tokens. Pure functions over
// the results, so that what the API, the dashboard and the CLI show is computed once.
import { roundUsd } from '../../jobs/usage.ts';

/** z of a two-sided 95 % interval. */
const Z95 = 1.96;

/** What the statistics read of one result. */
export interface ResultFigures {
  agent: string;
  state: 'pending' | 'running' | 'passed' | 'failed' | 'error' | 'cancelled';
  costUsd: number | null;
  durationMs: number | null;
  steps: number | null;
  inputTokens: number | null;
  outputTokens: number | null;
}

/** One row of the per-agent table. */
export interface AgentStats {
  agent: string;
  engine: string;
  model: string;
  runs: number;
  finished: number;
  passed: number;
  passRate: number | null;
  interval: { low: number; high: number } | null;
  medianCostUsd: number | null;
  totalCostUsd: number | null;
  medianDurationMs: number | null;
  medianSteps: number | null;
  inputTokens: number;
  outputTokens: number;
}

/**
 * The 95 % Wilson score interval of `passed` successes in `n` trials (z = 1.96): unlike
 * p ± z·se, it stays within [0, 1] and is not of width 0 at 0/n or n/n. Null for n = 0.
 */
export function wilsonInterval(passed: number, n: number): { low: number; high: number } | null {
  if (n <= 0) return null;
  const p = passed / n;
  const z2 = Z95 * Z95;
  const denominator = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / denominator;
  const half = (Z95 / denominator) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return { low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}

/** The median; of an even count, the mean of the two middle values. Null for none. */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const upper = sorted[mid] ?? 0;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] ?? 0) + upper) / 2;
}

const FINISHED = new Set<ResultFigures['state']>(['passed', 'failed', 'error']);

/** An agent's name split back into engine and model (engines have no slash; models may). */
function splitAgent(agent: string): { engine: string; model: string } {
  const slash = agent.indexOf('/');
  return slash < 0
    ? { engine: agent, model: '' }
    : { engine: agent.slice(0, slash), model: agent.slice(slash + 1) };
}

const known = (values: (number | null)[]): number[] =>
  values.filter((v): v is number => v !== null);

/**
 * The per-agent table of a run's results, agents in the order of their first result. Finished
 * means passed, failed or error ("error" counts as not passed); costs, times, steps and tokens
 * are the finished results'. The total cost is null when a finished result's cost is unknown.
 */
export function agentStats(results: readonly ResultFigures[]): AgentStats[] {
  const byAgent = new Map<string, ResultFigures[]>();
  for (const result of results) {
    const list = byAgent.get(result.agent) ?? [];
    list.push(result);
    byAgent.set(result.agent, list);
  }
  return [...byAgent].map(([agent, all]) => {
    const finished = all.filter((r) => FINISHED.has(r.state));
    const passed = finished.filter((r) => r.state === 'passed').length;
    const costs = finished.map((r) => r.costUsd);
    const knownCosts = known(costs);
    const medianCost = median(knownCosts);
    return {
      agent,
      ...splitAgent(agent),
      runs: all.length,
      finished: finished.length,
      passed,
      passRate: finished.length > 0 ? passed / finished.length : null,
      interval: wilsonInterval(passed, finished.length),
      medianCostUsd: medianCost === null ? null : roundUsd(medianCost),
      totalCostUsd:
        finished.length > 0 && knownCosts.length === costs.length
          ? roundUsd(knownCosts.reduce((sum, c) => sum + c, 0))
          : null,
      medianDurationMs: median(known(finished.map((r) => r.durationMs))),
      medianSteps: median(known(finished.map((r) => r.steps))),
      inputTokens: finished.reduce((sum, r) => sum + (r.inputTokens ?? 0), 0),
      outputTokens: finished.reduce((sum, r) => sum + (r.outputTokens ?? 0), 0),
    };
  });
}
