// An eval run as the admin API returns it, declared once: the server's type, the OpenAPI
// components EvalRun and EvalRunSummary and the typed client's types come from these schemas;
// toEvalRunRecord maps the rows onto them, with the per-agent table of stats.ts.
import { z } from 'zod';
import type { EvalResultRow, EvalRunRow } from '../../db/schema.ts';
import { actorRecord } from '../../records/actor.ts';
import { agentStats } from './stats.ts';
import { acceptedSuite, type Suite } from './suite.ts';

const RESULT_STATES = Object.freeze([
  'pending',
  'running',
  'passed',
  'failed',
  'error',
  'cancelled',
] as const);

const agentRecord = z
  .object({
    agent: z.string().describe('engine/model.'),
    engine: z.string(),
    model: z.string(),
    runs: z.number().int().describe('Its results in the run.'),
    finished: z.number().int().describe('Of those, passed, failed or error.'),
    passed: z.number().int(),
    passRate: z.number().nullable().describe('passed / finished; null while none finished.'),
    interval: z
      .object({ low: z.number(), high: z.number() })
      .nullable()
      .describe('The 95 % Wilson score interval of the pass rate (z = 1.96).'),
    medianCostUsd: z.number().nullable(),
    totalCostUsd: z
      .number()
      .nullable()
      .describe("The finished results' cost; null when one of them is unknown."),
    medianDurationMs: z.number().nullable(),
    medianSteps: z.number().nullable(),
    inputTokens: z.number().int(),
    outputTokens: z.number().int(),
  })
  .describe("One agent's row of the run's table.");

const resultRecord = z
  .object({
    task: z.string(),
    agent: z.string().describe('engine/model.'),
    repeat: z.number().int().min(1),
    projectId: z.string(),
    jobId: z.string().nullable().describe('Its job; null until it started, or if none was made.'),
    state: z.enum(RESULT_STATES),
    checkExit: z.number().int().nullable().describe("The check's exit code."),
    tail: z
      .string()
      .nullable()
      .describe("The last lines of a failed check's output, or why it is an error."),
    costUsd: z.number().nullable(),
    durationMs: z.number().int().nullable().describe("Its job's first turn, start to end."),
    steps: z.number().int().nullable().describe('Model steps of its job.'),
    inputTokens: z.number().int().nullable(),
    outputTokens: z.number().int().nullable(),
    startedAt: z.iso.datetime().nullable(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .describe('One task × agent × repeat: its job and what its check said.');

const runFields = {
  id: z.string().describe('The run id (evr_ and 20 characters).'),
  name: z.string(),
  state: z
    .enum(['running', 'finished', 'cancelled'])
    .describe('finished: no result is pending or running.'),
  createdBy: actorRecord.nullable().describe('Who started it.'),
  createdAt: z.iso.datetime(),
  finishedAt: z.iso.datetime().nullable(),
  suite: acceptedSuite,
  agents: z.array(agentRecord).describe('The per-agent table.'),
};

export const evalRunRecord = z
  .object({ ...runFields, results: z.array(resultRecord).describe('In the suite’s order.') })
  .meta({ id: 'EvalRun', description: 'An eval run: its suite, per-agent table and results.' });

export const evalRunSummary = z
  .object(runFields)
  .meta({ id: 'EvalRunSummary', description: 'An eval run without its results.' });

export type EvalRunRecord = z.infer<typeof evalRunRecord>;
type EvalResultRecord = EvalRunRecord['results'][number];

const count = (value: string | null): number | null => (value === null ? null : Number(value));

function toResultRecord(row: EvalResultRow): EvalResultRecord {
  return {
    task: row.task,
    agent: row.agent,
    repeat: row.repeat,
    projectId: row.project_id,
    jobId: row.job_id,
    state: row.state,
    checkExit: row.check_exit,
    tail: row.tail,
    costUsd: row.cost_usd,
    durationMs: row.duration_ms,
    steps: row.steps,
    inputTokens: count(row.input_tokens),
    outputTokens: count(row.output_tokens),
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
  };
}

/** The run's record: its rows, results in the suite's order. */
export function toEvalRunRecord(run: EvalRunRow, rows: readonly EvalResultRow[]): EvalRunRecord {
  const results = [...rows].sort((a, b) => a.n - b.n).map(toResultRecord);
  return {
    id: run.id,
    name: run.name,
    state: run.state,
    createdBy: run.created_by,
    createdAt: run.created_at.toISOString(),
    finishedAt: run.finished_at?.toISOString() ?? null,
    suite: run.suite as Suite,
    agents: agentStats(results),
    results,
  };
}
