// `errand job …`: the job API from a terminal, through the typed client (src/client/), so
// that a user never assembles curl commands or polls by hand. Each subcommand resolves to an
// exit code: 0 done (completed, for the ones that wait), 1 failed, 3 archived; a wrong
// command line is a UsageError (2), an API or network error a CliError (1).

import { errorFromResponse } from '../client/errors.ts';
import {
  ErrandClient,
  ErrandError,
  type Job,
  type JobEvent,
  type JobStatus,
  TERMINAL_STATUSES,
} from '../client/index.ts';
import type { Config } from '../config.ts';
import { CliError, cliApiKey } from './client.ts';
import { eventLine, statusText } from './event-lines.ts';
import { ProgressOutput } from './spinner.ts';
import { EXIT, errandVersion, jobUsage, parseCommandLine, UsageError } from './usage.ts';

const COMMON = {
  project: { type: 'string' },
  json: { type: 'boolean' },
  'data-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Each subcommand's options: an option another subcommand takes is still an unknown one here. */
const SUBCOMMANDS = {
  create: {
    args: ['PROMPT'],
    options: {
      ...COMMON,
      model: { type: 'string' },
      'base-ref': { type: 'string' },
      wait: { type: 'boolean' },
    },
  },
  message: { args: ['ID', 'PROMPT'], options: { ...COMMON, wait: { type: 'boolean' } } },
  get: { args: ['ID'], options: COMMON },
  list: {
    args: [],
    options: { ...COMMON, status: { type: 'string' }, limit: { type: 'string' } },
  },
  watch: { args: ['ID'], options: COMMON },
  events: {
    args: ['ID'],
    options: { ...COMMON, after: { type: 'string' }, follow: { type: 'boolean' } },
  },
  archive: { args: ['ID'], options: COMMON },
} as const;

type Subcommand = keyof typeof SUBCOMMANDS;

/** Every job option; each subcommand's parse fills only its own. */
interface JobValues {
  project?: string;
  json?: boolean;
  'data-dir'?: string;
  help?: boolean;
  model?: string;
  'base-ref'?: string;
  wait?: boolean;
  status?: string;
  limit?: string;
  after?: string;
  follow?: boolean;
}

const STATUSES: readonly JobStatus[] = ['active', 'completed', 'failed', 'archived'];
const DEFAULT_LIST_LIMIT = 20;
/** The most a page of GET …/jobs holds. */
const MAX_PAGE = 100;

function isSubcommand(name: string): name is Subcommand {
  return Object.hasOwn(SUBCOMMANDS, name);
}

/** What a command writes to; the tests run real processes, so these are the process's own. */
export interface JobIo {
  stdout: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
  loadConfig(env: NodeJS.ProcessEnv, dataDir: string | undefined): Config;
}

function wholeNumber(value: string | undefined, flag: string, min: number, usage: string) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(
      `--${flag} must be a whole number${min > 0 ? `, ${min} or more` : ''}`,
      usage,
    );
  return n;
}

/** The exit code a settled job stands for. */
export function exitCodeOf(status: JobStatus): number {
  if (status === 'completed') return EXIT.ok;
  if (status === 'archived') return EXIT.archived;
  if (status === 'failed') return EXIT.failed;
  return EXIT.ok;
}

/** An API error as one line: the server's message, its code and the request to quote. */
function apiError(err: ErrandError): CliError {
  const detail = [err.code, err.requestId ? `request ${err.requestId}` : undefined]
    .filter(Boolean)
    .join(', ');
  const retry =
    err.retryAfterSeconds !== undefined ? `; try again in ${err.retryAfterSeconds} s` : '';
  const hint = err.code === 'network_error' ? "; is 'errand serve' running? (ERRAND_URL)" : '';
  return new CliError(`${err.message} (${detail})${retry}${hint}`);
}

function jobDetails(job: Job): string {
  return [
    `${job.id} (project ${job.projectId})`,
    `  status:   ${statusText(job)}`,
    `  model:    ${job.model}`,
    `  source:   ${job.source.repository} @ ${job.source.baseRef}`,
    `  branch:   ${job.branch}`,
    `  prLink:   ${job.prLink ?? ''}`,
    `  turns:    ${job.turns}`,
    `  created:  ${job.createdAt}`,
    `  updated:  ${job.updatedAt}`,
    ...(job.archivedAt ? [`  archived: ${job.archivedAt}`] : []),
  ].join('\n');
}

function jobLine(job: Job): string {
  const outcome = job.status === 'failed' ? (job.error ?? '') : (job.prLink ?? '');
  return `${job.id}  ${job.status.padEnd(9)}  ${job.createdAt}${outcome ? `  ${outcome}` : ''}`;
}

/** The flags whose values are checked before anything is sent. */
interface Checked {
  limit: number;
  status: JobStatus | undefined;
  after: number;
}

function checkFlags(values: JobValues, usage: string): Checked {
  const status = values.status;
  if (status !== undefined && !STATUSES.includes(status as JobStatus))
    throw new UsageError(`--status must be one of ${STATUSES.join(', ')}`, usage);
  return {
    limit: wholeNumber(values.limit, 'limit', 1, usage) ?? DEFAULT_LIST_LIMIT,
    status: status as JobStatus | undefined,
    after: wholeNumber(values.after, 'after', 0, usage) ?? 0,
  };
}

interface Target {
  client: ErrandClient;
  project: string;
  /** ERRAND_URL without a trailing slash, and the key: for the one call the client lacks. */
  base: string;
  key: string;
}

class JobCommand {
  readonly #client: ErrandClient;
  readonly #values: JobValues;
  readonly #flags: Checked;
  readonly #target: Target;
  readonly #project: string;
  readonly #out: NodeJS.WriteStream;

  constructor(target: Target, values: JobValues, flags: Checked, out: NodeJS.WriteStream) {
    this.#client = target.client;
    this.#target = target;
    this.#project = target.project;
    this.#values = values;
    this.#flags = flags;
    this.#out = out;
  }

  #print(value: unknown, text: string): void {
    this.#out.write(this.#values.json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
  }

  async create(prompt: string): Promise<number> {
    const v = this.#values;
    const job = await this.#client.createJob({
      prompt,
      ...(v.model !== undefined ? { model: v.model } : {}),
      ...(v['base-ref'] !== undefined ? { baseRef: v['base-ref'] } : {}),
    });
    return this.#started(job, 'created', undefined);
  }

  async message(id: string, prompt: string): Promise<number> {
    const job = await this.#client.sendMessage(id, prompt);
    // This prompt is the job's latest turn: --wait shows the log from its first event.
    return this.#started(job, 'sent a follow-up to', job.turns);
  }

  async #started(job: Job, verb: string, fromTurn: number | undefined): Promise<number> {
    if (!this.#values.wait) {
      this.#print(
        job,
        `${verb} job ${job.id} (${job.status}; model ${job.model}; branch ${job.branch})\nfollow it: errand job watch ${job.id} --project ${this.#project}`,
      );
      return EXIT.ok;
    }
    if (!this.#values.json)
      this.#out.write(`${verb} job ${job.id} (model ${job.model}; branch ${job.branch})\n`);
    return this.#follow(job.id, fromTurn);
  }

  async get(id: string): Promise<number> {
    const job = await this.#client.getJob(id);
    this.#print(job, jobDetails(job));
    return EXIT.ok;
  }

  async list(): Promise<number> {
    const { limit, status } = this.#flags;
    const jobs: Job[] = [];
    for await (const job of this.#client.listJobs({
      pageSize: Math.min(limit, MAX_PAGE),
      ...(status !== undefined ? { status } : {}),
    })) {
      jobs.push(job);
      if (jobs.length >= limit) break;
    }
    this.#print(jobs, jobs.length === 0 ? 'no jobs' : jobs.map(jobLine).join('\n'));
    return EXIT.ok;
  }

  watch(id: string): Promise<number> {
    return this.#follow(id, undefined);
  }

  async archive(id: string): Promise<number> {
    const job = await this.#client.archiveJob(id);
    this.#print(job, `archived job ${job.id}`);
    return EXIT.ok;
  }

  async events(id: string): Promise<number> {
    const { after } = this.#flags;
    const print = (event: JobEvent) =>
      this.#out.write(`${this.#values.json ? JSON.stringify(event) : eventLine(event)}\n`);
    if (this.#values.follow) {
      for await (const event of this.#client.events(id, { after })) print(event);
      return EXIT.ok;
    }
    for await (const event of this.#pages(id, after)) print(event);
    return EXIT.ok;
  }

  /**
   * The log as it is now, a page at a time: the typed client only streams, and a listing
   * must end when it has read what is there.
   */
  async *#pages(id: string, after: number): AsyncGenerator<JobEvent> {
    const { base, key } = this.#target;
    const path = `/v2/agent/${encodeURIComponent(this.#project)}/job/${encodeURIComponent(id)}/events`;
    let from = after;
    for (;;) {
      let response: Response;
      try {
        response = await fetch(`${base}${path}?after=${from}&limit=500`, {
          headers: {
            authorization: `Bearer ${key}`,
            accept: 'application/json',
            'user-agent': userAgent(),
          },
        });
      } catch (err) {
        throw new ErrandError(
          `events: cannot reach ${base} (${err instanceof Error ? err.message : String(err)})`,
          {
            code: 'network_error',
            status: 0,
          },
        );
      }
      if (!response.ok) throw await errorFromResponse(response, 'events');
      const page = (await response.json()) as { events?: JobEvent[]; nextAfter?: number };
      const events = page.events ?? [];
      if (events.length === 0) return;
      yield* events;
      from = page.nextAfter ?? events.at(-1)?.seq ?? from;
    }
  }

  /**
   * Follows the live stream until the job settles, one line per event (from `fromTurn`'s
   * first event when given), and answers the exit code of how it settled.
   */
  async #follow(id: string, fromTurn: number | undefined): Promise<number> {
    const json = this.#values.json === true;
    const progress = new ProgressOutput(this.#out, !json && ProgressOutput.wanted(this.#out));
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
        for await (const event of this.#client.events(id, { after })) {
          after = event.seq;
          seen = true;
          if (!printing && fromTurn !== undefined) printing = ofTurn(event, fromTurn);
          if (!printing) continue;
          progress.line(json ? JSON.stringify(event) : eventLine(event));
        }
        // The stream ends after a settling event; a replay can end on an earlier turn's, so
        // the job itself says whether it is over.
        const job = await this.#client.getJob(id);
        if (TERMINAL_STATUSES.includes(job.status)) {
          progress.stop();
          if (!json) this.#out.write(`${statusText(job)}\n`);
          return exitCodeOf(job.status);
        }
        if (!seen) await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    } finally {
      progress.stop();
      process.off('SIGINT', interrupted);
    }
  }
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

function userAgent(): string {
  return `errand-cli/${errandVersion()}`;
}

/** Runs `errand job <argv…>`; resolves with the exit code. */
export async function runJob(argv: string[], io: JobIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    if (sub === undefined) throw new UsageError('missing the subcommand', jobUsage(undefined));
    io.stdout.write(jobUsage(rest[0]));
    return EXIT.ok;
  }
  if (!isSubcommand(sub))
    throw new UsageError(`unknown subcommand: job ${sub}`, jobUsage(undefined));
  const spec = SUBCOMMANDS[sub];
  const usage = jobUsage(sub);
  const parsed = parseCommandLine(rest, spec.options, usage);
  const values = parsed.values as JobValues;
  if (values.help) {
    io.stdout.write(usage);
    return EXIT.ok;
  }
  const names: readonly string[] = spec.args;
  const [missing] = names.slice(parsed.positionals.length);
  if (missing) throw new UsageError(`missing ${missing}`, usage);
  const extra = parsed.positionals[names.length];
  if (extra !== undefined)
    throw new UsageError(
      `unexpected argument ${JSON.stringify(extra)}${names.includes('PROMPT') ? ' (quote the prompt: it is one argument)' : ''}`,
      usage,
    );
  const [first = '', second = ''] = parsed.positionals;
  const prompt = sub === 'create' ? first : second;
  if (names.includes('PROMPT') && prompt.trim() === '')
    throw new UsageError('the prompt is empty', usage);
  if (names.includes('ID') && first.trim() === '')
    throw new UsageError('the job ID is empty', usage);

  const flags = checkFlags(values, usage);
  const config = io.loadConfig(io.env, values['data-dir']);
  const project = values.project ?? config.client.projectId;
  if (!project) throw new UsageError('no project: give --project ID or set ERRAND_PROJECT', usage);
  const key = await cliApiKey(config);
  let client: ErrandClient;
  try {
    client = new ErrandClient({
      baseUrl: config.client.url,
      apiKey: key,
      projectId: project,
      userAgent: userAgent(),
    });
  } catch (err) {
    throw new CliError(
      `invalid setting ERRAND_URL: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const target = { client, project, base: config.client.url.replace(/\/+$/, ''), key };
  const command = new JobCommand(target, values, flags, io.stdout);
  try {
    switch (sub) {
      case 'create':
        return await command.create(prompt);
      case 'message':
        return await command.message(first, prompt);
      case 'get':
        return await command.get(first);
      case 'list':
        return await command.list();
      case 'watch':
        return await command.watch(first);
      case 'events':
        return await command.events(first);
      case 'archive':
        return await command.archive(first);
    }
  } catch (err) {
    if (err instanceof ErrandError) throw apiError(err);
    throw err;
  }
}
