// What changed between two eval runs: task by task (and agent), the passes in each and whether
// the task was fixed, broke or stayed the same; per agent, the pass rate and the cost before and
// after. A pure function of the two records (compareRuns), and its words (comparisonText,
// comparisonMarkdown).
import type { EvalRun } from '../../client/index.ts';
import { markdownTable, percent, textTable, usd } from './report.ts';

/**
 * How a task × agent came out in B against A. fixed: no pass in A, one or more in B; broke:
 * the reverse; better / worse: passes in both, at a higher / lower rate; same: the same rate
 * (or no pass in either); only-a / only-b: run in one of them; unfinished: no finished result
 * in one of them.
 */
type Change = 'fixed' | 'broke' | 'better' | 'worse' | 'same' | 'only-a' | 'only-b' | 'unfinished';

/** The finished results of a task × agent in one run and how many passed. */
interface Passes {
  passed: number;
  finished: number;
}

interface TaskChange {
  task: string;
  agent: string;
  a: Passes | null;
  b: Passes | null;
  change: Change;
}

interface AgentChange {
  agent: string;
  passRateA: number | null;
  passRateB: number | null;
  /** B's pass rate less A's, null when either is unknown. */
  passRateDelta: number | null;
  totalCostA: number | null;
  totalCostB: number | null;
  medianCostA: number | null;
  medianCostB: number | null;
  /** B's median cost less A's. */
  medianCostDelta: number | null;
}

export interface Comparison {
  a: { id: string; name: string };
  b: { id: string; name: string };
  tasks: TaskChange[];
  agents: AgentChange[];
}

const FINISHED = new Set(['passed', 'failed', 'error']);

function passesOf(run: EvalRun): Map<string, Passes> {
  const passes = new Map<string, Passes>();
  for (const r of run.results) {
    const key = JSON.stringify([r.task, r.agent]);
    const p = passes.get(key) ?? { passed: 0, finished: 0 };
    if (FINISHED.has(r.state)) p.finished += 1;
    if (r.state === 'passed') p.passed += 1;
    passes.set(key, p);
  }
  return passes;
}

function changeOf(a: Passes | null, b: Passes | null): Change {
  if (a === null) return 'only-b';
  if (b === null) return 'only-a';
  if (a.finished === 0 || b.finished === 0) return 'unfinished';
  if (a.passed === 0 && b.passed > 0) return 'fixed';
  if (a.passed > 0 && b.passed === 0) return 'broke';
  const rateA = a.passed / a.finished;
  const rateB = b.passed / b.finished;
  if (rateB > rateA) return 'better';
  if (rateB < rateA) return 'worse';
  return 'same';
}

function difference(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : b - a;
}

/** Run B against run A: every task × agent of either, in A's order then B's new ones. */
export function compareRuns(a: EvalRun, b: EvalRun): Comparison {
  const inA = passesOf(a);
  const inB = passesOf(b);
  const keys = [...new Set([...inA.keys(), ...inB.keys()])];
  const tasks = keys.map((key) => {
    const [task = '', agent = ''] = JSON.parse(key) as string[];
    const pa = inA.get(key) ?? null;
    const pb = inB.get(key) ?? null;
    return { task, agent, a: pa, b: pb, change: changeOf(pa, pb) };
  });
  const names = [...new Set([...a.agents, ...b.agents].map((s) => s.agent))];
  const agents = names.map((agent) => {
    const sa = a.agents.find((s) => s.agent === agent);
    const sb = b.agents.find((s) => s.agent === agent);
    const passRateA = sa?.passRate ?? null;
    const passRateB = sb?.passRate ?? null;
    const medianCostA = sa?.medianCostUsd ?? null;
    const medianCostB = sb?.medianCostUsd ?? null;
    return {
      agent,
      passRateA,
      passRateB,
      passRateDelta: difference(passRateA, passRateB),
      totalCostA: sa?.totalCostUsd ?? null,
      totalCostB: sb?.totalCostUsd ?? null,
      medianCostA,
      medianCostB,
      medianCostDelta: difference(medianCostA, medianCostB),
    };
  });
  return { a: { id: a.id, name: a.name }, b: { id: b.id, name: b.name }, tasks, agents };
}

function passesText(p: Passes | null): string {
  return p === null ? '–' : `${p.passed}/${p.finished}`;
}

/** +12 points, -5 points, 0 points; null → "–". */
function points(delta: number | null): string {
  if (delta === null) return '–';
  const n = Math.round(delta * 100);
  return `${n > 0 ? '+' : ''}${n} points`;
}

function usdDelta(delta: number | null): string {
  if (delta === null) return '–';
  return `${delta < 0 ? '-' : '+'}${usd(Math.abs(delta))}`;
}

function rows(c: Comparison): { tasks: string[][]; agents: string[][] } {
  return {
    tasks: [
      ['task', 'agent', 'A', 'B', 'change'],
      ...c.tasks.map((t) => [t.task, t.agent, passesText(t.a), passesText(t.b), t.change]),
    ],
    agents: [
      [
        'agent',
        'pass A',
        'pass B',
        'change',
        'median cost A',
        'median cost B',
        'change',
        'total A',
        'total B',
      ],
      ...c.agents.map((s) => [
        s.agent,
        percent(s.passRateA),
        percent(s.passRateB),
        points(s.passRateDelta),
        usd(s.medianCostA),
        usd(s.medianCostB),
        usdDelta(s.medianCostDelta),
        usd(s.totalCostA),
        usd(s.totalCostB),
      ]),
    ],
  };
}

/** How many task × agents changed each way: "1 fixed, 2 broke, 5 same". */
function tally(c: Comparison): string {
  const counts = new Map<Change, number>();
  for (const t of c.tasks) counts.set(t.change, (counts.get(t.change) ?? 0) + 1);
  return [...counts].map(([change, n]) => `${n} ${change}`).join(', ') || 'no results';
}

/** The comparison for the terminal. */
export function comparisonText(c: Comparison): string {
  const { tasks, agents } = rows(c);
  return [
    `A: ${c.a.id} ${c.a.name}`,
    `B: ${c.b.id} ${c.b.name}`,
    '',
    textTable(tasks),
    '',
    textTable(agents),
    '',
    tally(c),
  ].join('\n');
}

/** The comparison as Markdown. */
export function comparisonMarkdown(c: Comparison): string {
  const { tasks, agents } = rows(c);
  return [
    `# Eval ${c.b.name} against ${c.a.name}`,
    '',
    `A: \`${c.a.id}\`, B: \`${c.b.id}\`: ${tally(c)}.`,
    '',
    '## Tasks',
    '',
    markdownTable(tasks),
    '',
    '## Agents',
    '',
    markdownTable(agents),
    '',
  ].join('\n');
}
