// `errand job …`: the job API from a terminal, through the typed client (src/client/), so
// that a user never assembles curl commands or polls by hand. Each subcommand resolves to an
// exit code: 0 done (completed, for the ones that wait), 1 failed, 3 archived; a wrong
// command line is a UsageError (2), an API or network error a CliError (1).
import { readFile } from 'node:fs/promises';
import {
  type ErrandClient,
  ErrandError,
  type Job,
  type JobEvent,
  type JobStatus,
  type OutputSchema,
  TERMINAL_STATUSES,
} from '../client/index.ts';
import { isRecord } from '../json.ts';
import { JOB_MODES, JOB_STATUSES } from '../records/job.ts';
import { formatUsd, prLine, usageLine } from '../words.ts';
import { cliClient, cliConfig, jobApiError } from './api.ts';
import { attemptsOf } from './attempts.ts';
import {
  COMMON_OPTIONS,
  type CommandInput,
  defineCommand,
  type Family,
  type Io,
  type OptionDefs,
  print,
  wholeNumber,
} from './command.ts';
import { EXIT, UsageError } from './errors.ts';
import { eventLine, statusText } from './event-lines.ts';
import { imageAttachments } from './images.ts';
import { readMcpServers } from './mcp-servers.ts';
import { ProgressOutput } from './spinner.ts';

const DEFAULT_LIST_LIMIT = 20;
/** The most a page of GET …/jobs holds. */
const MAX_PAGE = 100;

/** The options of every job subcommand: --project first and --json last in the usage. */
const PROJECT = { project: { type: 'string', value: 'ID' } } as const;

type Options<O extends OptionDefs> = typeof PROJECT & O & typeof COMMON_OPTIONS;

/** The exit code a settled job stands for. */
function exitCodeOf(status: JobStatus): number {
  if (status === 'archived') return EXIT.archived;
  if (status === 'failed') return EXIT.failed;
  return EXIT.ok;
}

function jobDetails(job: Job): string {
  return [
    `${job.id} (project ${job.projectId})`,
    `  status:   ${statusText(job)}`,
    `  model:    ${job.model}`,
    `  source:   ${job.source.repository} @ ${job.source.baseRef}`,
    `  branch:   ${job.branch}`,
    `  prLink:   ${job.prLink ?? ''}`,
    ...(job.pr ? [`  pr:       ${prLine(job.pr)}`] : []),
    `  turns:    ${job.turns}`,
    ...(job.mode && job.mode !== 'code' ? [`  mode:     ${job.mode}`] : []),
    ...(job.awaitingApproval
      ? [`  awaiting approval: errand job approve ${job.id} carries the plan out`]
      : []),
    `  usage:    ${usageLine(job.usage)}`,
    ...(job.attempts ?? []).map(attemptLine),
    `  created:  ${job.createdAt}`,
    `  updated:  ${job.updatedAt}`,
    ...(job.archivedAt ? [`  archived: ${job.archivedAt}`] : []),
    ...(job.summary ? ['', job.summary] : []),
    ...(hasOutput(job) ? ['', 'output:', JSON.stringify(job.output, null, 2)] : []),
  ].join('\n');
}

/** One attempt of a best-of-N job (docs/eval.md) on a line: agent, outcome, check, cost, diff, branch. */
function attemptLine(attempt: NonNullable<Job['attempts']>[number]): string {
  const check =
    attempt.check === null
      ? ''
      : attempt.check.exitCode === null
        ? ' (check stopped)'
        : ` (exit ${attempt.check.exitCode})`;
  const { files, lines } = attempt.diff;
  return `  attempt ${attempt.n}: ${attempt.engine} ${attempt.model}; ${attempt.outcome}${check}${attempt.error ? `: ${attempt.error}` : ''}; ${formatUsd(attempt.costUsd)}; ${files} file${files === 1 ? '' : 's'}, ${lines} line${lines === 1 ? '' : 's'}; ${attempt.branch}${attempt.winner ? '  <- winner' : ''}`;
}

/** Whether a turn of the job produced a structured output (docs/structured-output.md). */
function hasOutput(job: Job): boolean {
  return job.output !== undefined && job.output !== null;
}

/** The job's structured output, which is what a caller that gave a schema waited for. */
function outputText(job: Job): string {
  return hasOutput(job) ? `\n\n${JSON.stringify(job.output, null, 2)}` : '';
}

/**
 * `--output-schema`: a JSON Schema inline (it starts with `{`) or the file that holds one,
 * checked here only for being a JSON object; the service says what else is wrong with it.
 */
async function outputSchemaOf(value: string | undefined): Promise<OutputSchema | undefined> {
  if (value === undefined) return undefined;
  const inline = value.trimStart().startsWith('{');
  const text = inline
    ? value
    : await readFile(value, 'utf8').catch((err: unknown) => {
        throw new UsageError(
          `--output-schema: cannot read ${value}: ${err instanceof Error ? err.message : String(err)}`,
        );
      });
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch {
    throw new UsageError(`--output-schema: ${inline ? 'the value' : value} is not JSON`);
  }
  if (!isRecord(schema)) throw new UsageError('--output-schema: a JSON Schema is a JSON object');
  return schema;
}

/** What the job used of the model, on a line of its own once it used anything. */
function spentText(job: Job): string {
  const { inputTokens, outputTokens } = job.usage;
  return inputTokens + outputTokens > 0 ? `\nused ${usageLine(job.usage)}` : '';
}

/** An ask turn's answer or a plan turn's plan, which is what the user waited for. */
function answerText(job: Job): string {
  if (!job.summary || job.mode === undefined || job.mode === 'code') return '';
  const next = job.awaitingApproval ? `\n\napprove it: errand job approve ${job.id}` : '';
  return `\n\n${job.summary}${next}`;
}

function jobLine(job: Job): string {
  const outcome = job.status === 'failed' ? (job.error ?? '') : (job.prLink ?? '');
  return `${job.id}  ${job.status.padEnd(9)}  ${job.createdAt}${outcome ? `  ${outcome}` : ''}`;
}

/**
 * The client in the job's project (--project, else ERRAND_PROJECT). Called once the command
 * line is checked, so that a wrong one sends nothing and needs no key.
 */
async function connect(
  io: Io,
  values: { project?: string; 'data-dir'?: string },
): Promise<{ client: ErrandClient; project: string }> {
  const config = cliConfig(io, values['data-dir']);
  const project = values.project ?? config.client.projectId;
  if (!project) throw new UsageError('no project: give --project ID or set ERRAND_PROJECT');
  return { client: await cliClient(config, project), project };
}

/** A job subcommand: empty arguments refused, API errors as one line with code and request. */
function jobCommand<const O extends OptionDefs>(def: {
  name: string;
  args: readonly string[];
  options: O;
  summary: string;
  run(input: CommandInput<Options<O>>): Promise<number>;
}) {
  return defineCommand({
    name: `job ${def.name}`,
    args: def.args,
    options: { ...PROJECT, ...def.options, ...COMMON_OPTIONS },
    summary: def.summary,
    async run(input) {
      def.args.forEach((name, i) => {
        if (input.args[i]?.trim() !== '') return;
        throw new UsageError(name === 'ID' ? 'the job ID is empty' : 'the prompt is empty');
      });
      try {
        return await def.run(input);
      } catch (err) {
        if (err instanceof ErrandError) throw jobApiError(err);
        throw err;
      }
    },
  });
}

/**
 * Whether an event is the first of turn `turn` or later: its own events carry its number, and
 * a status event (job.reactivated) carries the job's record, whose `turns` counts it.
 */
function ofTurn(event: JobEvent, turn: number): boolean {
  if (event.turn !== null) return event.turn >= turn;
  const data = event.data as { job?: { turns?: unknown } } | null;
  const turns = data?.job?.turns;
  return typeof turns === 'number' && turns >= turn;
}

/**
 * Follows the live stream until the job settles, one line per event (from `fromTurn`'s first
 * event when given) and the outcome; with --json, nothing but the final record. Answers the
 * exit code of how it settled.
 */
async function follow(
  client: ErrandClient,
  id: string,
  fromTurn: number | undefined,
  io: Io,
  json: boolean,
): Promise<number> {
  const progress = new ProgressOutput(io.stdout, !json && ProgressOutput.wanted(io.stdout));
  const interrupted = () => {
    progress.stop();
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  let printing = fromTurn === undefined;
  let after = 0;
  try {
    progress.start();
    for (;;) {
      let seen = false;
      for await (const event of client.events(id, { after })) {
        after = event.seq;
        seen = true;
        if (!printing && fromTurn !== undefined) printing = ofTurn(event, fromTurn);
        if (printing && !json) progress.line(eventLine(event));
      }
      // The stream ends after a settling event; a replay can end on an earlier turn's, so
      // the job itself says whether it is over.
      const job = await client.getJob(id);
      if (TERMINAL_STATUSES.includes(job.status)) {
        progress.stop();
        print(
          io,
          json,
          job,
          `${statusText(job)}${spentText(job)}${answerText(job)}${outputText(job)}`,
        );
        return exitCodeOf(job.status);
      }
      if (!seen) await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  } finally {
    progress.stop();
    process.off('SIGINT', interrupted);
  }
}

/** After create or message: the job, or with --wait its progress to the end. */
async function started(
  client: ErrandClient,
  project: string,
  job: Job,
  how: { verb: string; wait: boolean | undefined; fromTurn: number | undefined },
  io: Io,
  json: boolean,
): Promise<number> {
  if (!how.wait) {
    print(
      io,
      json,
      job,
      `${how.verb} job ${job.id} (${job.status}; model ${job.model}; branch ${job.branch})\nfollow it: errand job watch ${job.id} --project ${project}`,
    );
    return EXIT.ok;
  }
  if (!json)
    io.stdout.write(`${how.verb} job ${job.id} (model ${job.model}; branch ${job.branch})\n`);
  return follow(client, job.id, how.fromTurn, io, json);
}

/** `--image FILE|URL`, repeatable: an image file sent inline, or a URL the service fetches. */
const IMAGE = { type: 'string', value: 'FILE|URL', multiple: true } as const;

const create = jobCommand({
  name: 'create',
  args: ['"PROMPT"'],
  options: {
    model: { type: 'string', value: 'provider:model' },
    'base-ref': { type: 'string', value: 'REF' },
    mode: { type: 'string', choices: JOB_MODES },
    'output-schema': { type: 'string', value: 'FILE|JSON' },
    image: IMAGE,
    'mcp-servers': { type: 'string', value: 'FILE|JSON' },
    attempts: { type: 'string', value: 'N' },
    agent: { type: 'string', value: 'ENGINE:MODEL', multiple: true },
    'check-command': { type: 'string', value: 'CMD' },
    wait: { type: 'boolean' },
  },
  summary:
    "start a job (--mode ask: an answer; plan: a plan to approve; --output-schema: a JSON answer; --image: up to 5 images; --mcp-servers: servers for this job; --attempts 1-4: best-of-N, with --agent ENGINE:MODEL for each in turn, either part empty for the project's, and --check-command instead of the project's to judge them); --wait follows it",
  async run({ values, args: [prompt = ''], io }) {
    const attempts = attemptsOf(values.attempts, values.agent);
    const outputSchema = await outputSchemaOf(values['output-schema']);
    const attachments = await imageAttachments(values.image);
    const mcpServers =
      values['mcp-servers'] === undefined ? null : await readMcpServers(values['mcp-servers']);
    const { client, project } = await connect(io, values);
    const job = await client.createJob({
      prompt,
      ...(values.model !== undefined ? { model: values.model } : {}),
      ...(values['base-ref'] !== undefined ? { baseRef: values['base-ref'] } : {}),
      ...(values.mode !== undefined ? { mode: values.mode } : {}),
      ...(outputSchema !== undefined ? { outputSchema } : {}),
      ...(attachments !== undefined ? { attachments } : {}),
      ...(mcpServers ? { mcpServers } : {}),
      ...(attempts !== undefined ? { attempts } : {}),
      ...(values['check-command'] !== undefined ? { checkCommand: values['check-command'] } : {}),
    });
    const how = { verb: 'created', wait: values.wait, fromTurn: undefined };
    return started(client, project, job, how, io, values.json === true);
  },
});

const message = jobCommand({
  name: 'message',
  args: ['ID', '"PROMPT"'],
  options: {
    mode: { type: 'string', choices: JOB_MODES },
    'output-schema': { type: 'string', value: 'FILE|JSON' },
    image: IMAGE,
    wait: { type: 'boolean' },
  },
  summary: 'a follow-up prompt: another turn on the same branch (--image: up to 5 images)',
  async run({ values, args: [id = '', prompt = ''], io }) {
    const outputSchema = await outputSchemaOf(values['output-schema']);
    const attachments = await imageAttachments(values.image);
    const { client, project } = await connect(io, values);
    const job = await client.sendMessage(id, prompt, {
      ...(values.mode !== undefined ? { mode: values.mode } : {}),
      ...(outputSchema !== undefined ? { outputSchema } : {}),
      ...(attachments !== undefined ? { attachments } : {}),
    });
    // This prompt is the job's latest turn: --wait shows the log from its first event.
    const how = { verb: 'sent a follow-up to', wait: values.wait, fromTurn: job.turns };
    return started(client, project, job, how, io, values.json === true);
  },
});

const approve = jobCommand({
  name: 'approve',
  args: ['ID'],
  options: { wait: { type: 'boolean' } },
  summary: "approve the job's plan: a turn carries it out on the same branch",
  async run({ values, args: [id = ''], io }) {
    const { client, project } = await connect(io, values);
    const job = await client.approvePlan(id);
    const how = { verb: 'approved the plan of', wait: values.wait, fromTurn: job.turns };
    return started(client, project, job, how, io, values.json === true);
  },
});

const get = jobCommand({
  name: 'get',
  args: ['ID'],
  options: {},
  summary: "the job's record",
  async run({ values, args: [id = ''], io }) {
    const { client } = await connect(io, values);
    const job = await client.getJob(id);
    print(io, values.json, job, jobDetails(job));
    return EXIT.ok;
  },
});

const list = jobCommand({
  name: 'list',
  args: [],
  options: {
    status: { type: 'string', choices: JOB_STATUSES },
    limit: { type: 'string', value: 'N' },
  },
  summary: `newest first (default limit ${DEFAULT_LIST_LIMIT})`,
  async run({ values, io }) {
    const limit = wholeNumber(values.limit, 'limit', 1) ?? DEFAULT_LIST_LIMIT;
    const { client } = await connect(io, values);
    const jobs: Job[] = [];
    for await (const job of client.listJobs({
      pageSize: Math.min(limit, MAX_PAGE),
      ...(values.status !== undefined ? { status: values.status } : {}),
    })) {
      jobs.push(job);
      if (jobs.length >= limit) break;
    }
    print(io, values.json, jobs, jobs.length === 0 ? 'no jobs' : jobs.map(jobLine).join('\n'));
    return EXIT.ok;
  },
});

const watch = jobCommand({
  name: 'watch',
  args: ['ID'],
  options: {},
  summary: "follow the job's progress until it is completed, failed or archived",
  async run({ values, args: [id = ''], io }) {
    const { client } = await connect(io, values);
    return follow(client, id, undefined, io, values.json === true);
  },
});

const events = jobCommand({
  name: 'events',
  args: ['ID'],
  options: { after: { type: 'string', value: 'SEQ' }, follow: { type: 'boolean' } },
  summary: 'the progress log; --follow keeps reading until the job settles',
  async run({ values, args: [id = ''], io }) {
    const after = wholeNumber(values.after, 'after') ?? 0;
    const { client } = await connect(io, values);
    const log = values.follow ? client.events(id, { after }) : client.listEvents(id, { after });
    for await (const event of log)
      io.stdout.write(`${values.json ? JSON.stringify(event) : eventLine(event)}\n`);
    return EXIT.ok;
  },
});

const archive = jobCommand({
  name: 'archive',
  args: ['ID'],
  options: {},
  summary: 'stop the job and archive it',
  async run({ values, args: [id = ''], io }) {
    const { client } = await connect(io, values);
    const job = await client.archiveJob(id);
    print(io, values.json, job, `archived job ${job.id}`);
    return EXIT.ok;
  },
});

export const jobs: Family = {
  name: 'job',
  intro: `Jobs of one project (--project ID, or ERRAND_PROJECT), with the key in ERRAND_API_KEY (a
project key, or the admin key; default: <data-dir>/admin.key) at ERRAND_URL.`,
  commands: [create, message, approve, get, list, watch, events, archive],
  subcommandPages: true,
  overview:
    'all take --project ID and --json; exit codes: 0 done (completed), 1 failed or an error, 2 usage error, 3 archived',
  outro: `  --json             one JSON document: the job record (for watch and --wait, the final one,
                     once the job is completed, failed or archived), for list an array of
                     records; for events one JSON event per line

Exit codes: 0 done (for watch and --wait: the job completed), 1 the job failed or an error,
2 a usage error, 3 the job was archived.
`,
};
