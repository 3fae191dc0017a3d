// What each `errand` command accepts, and the one way a wrong command line is reported: the
// command's usage with a one-line reason and exit code 2, never Node's argument-parser text
// (which talks about its own API, not about errand).
import { readFileSync } from 'node:fs';
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { CliError } from './client.ts';

/** The command line is wrong (unknown option, missing argument): exit 2 with the usage. */
export class UsageError extends CliError {
  override name = 'UsageError';
  /** The usage printed with the reason; unset: the command's own. */
  readonly usage: string | undefined;

  constructor(reason: string, usage?: string) {
    super(reason);
    this.usage = usage;
  }
}

/** The package's version, for --version and the client's User-Agent. */
export function errandVersion(): string {
  const pkg: unknown = JSON.parse(
    readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
  );
  const version = (pkg as { version?: unknown }).version;
  return typeof version === 'string' ? version : 'unknown';
}

/** Exit codes, as the README documents them. */
export const EXIT = { ok: 0, failed: 1, usage: 2, archived: 3 } as const;

const JOB_USAGE = `Usage: errand job <subcommand> [options]

Jobs of one project (--project ID, or ERRAND_PROJECT), with the key in ERRAND_API_KEY (a
project key, or the admin key; default: <data-dir>/admin.key) at ERRAND_URL.

  job create "PROMPT" [--model provider:model] [--base-ref REF] [--wait]
                     start a job; --wait follows its progress to the end
  job message ID "PROMPT" [--wait]
                     a follow-up prompt: another turn on the same branch
  job get ID         the job's record
  job list [--status active|completed|failed|archived] [--limit N]
                     newest first (default limit 20)
  job watch ID       follow the job's progress until it is completed, failed or archived
  job events ID [--after SEQ] [--follow]
                     the progress log; --follow keeps reading until the job settles
  job archive ID     stop the job and archive it

Every job subcommand also takes --project ID, --json and --data-dir DIR.
  --json             the job record; for watch, events and --wait one JSON event per line
                     (the last one, job.completed, job.failed or job.archived, carries the
                     final record as data.job)

Exit codes: 0 done (for watch and --wait: the job completed), 1 the job failed or an error,
2 a usage error, 3 the job was archived.
`;

const SUBCOMMAND_USAGE: Readonly<Record<string, string>> = {
  create:
    'Usage: errand job create "PROMPT" [--project ID] [--model provider:model] [--base-ref REF] [--wait] [--json]',
  message: 'Usage: errand job message ID "PROMPT" [--project ID] [--wait] [--json]',
  get: 'Usage: errand job get ID [--project ID] [--json]',
  list: 'Usage: errand job list [--project ID] [--status active|completed|failed|archived] [--limit N] [--json]',
  watch: 'Usage: errand job watch ID [--project ID] [--json]',
  events: 'Usage: errand job events ID [--project ID] [--after SEQ] [--follow] [--json]',
  archive: 'Usage: errand job archive ID [--project ID] [--json]',
};

const FORGE_AND_COMMANDS = `  FORGE: [--forge github|gitlab|gitea|git] [--forge-url API_URL] [--draft-prs true|false]
         and one of --forge-token-env NAME | --forge-token TOKEN |
         --github-app-id ID --github-app-key-file PEM --github-installation-id ID
  COMMANDS: [--commands true|false] [--setup-command CMD ('' for none)]
         [--setup-network true|false] [--command-timeout S] [--command-cpu S]
         [--command-memory MB] [--command-processes N] [--command-file-size MB]
         (a limit given as 'default' returns to the sandbox's default)`;

const ADMIN_KEY =
  'A client of the admin API at ERRAND_URL, with the key in ERRAND_API_KEY (default: <data-dir>/admin.key).';

/** Each command's usage, as `errand help COMMAND` and a usage error print it. */
export const COMMAND_USAGE: Readonly<Record<string, string>> = {
  serve: `Usage: errand serve [--host H] [--port P] [--data-dir DIR] [--no-worker] [--no-dashboard] [--concurrency N]

The API, the dashboard at / and the workers, in one process; --no-worker serves the API
only (scaling out on PostgreSQL), --no-dashboard leaves the dashboard out.
`,
  worker: `Usage: errand worker [--data-dir DIR] [--concurrency N]

Workers only: they run the turns of jobs. Needs DATABASE_URL and ERRAND_PUBLIC_URL.
`,
  migrate: `Usage: errand migrate [--data-dir DIR]

Applies the database migrations and exits (every process also migrates at start).
`,
  export: `Usage: errand export FILE [--data-dir DIR]

Writes every project, API key (hashes only), webhook endpoint, job, turn (with its transcript)
and event of the database (DATABASE_URL, or the embedded one of --data-dir, also while serve
runs on it) to FILE, as one consistent snapshot: JSON Lines, mode 0600, in place only once
complete. FILE - writes to stdout (errand export - | gzip > errand.jsonl.gz). Not in it:
dashboard sessions (browsers sign in again), rate-limit counters and idempotency keys.
The file holds key hashes, sealed secrets and transcripts: keep it as safe as the database.
`,
  import: `Usage: errand import FILE [--data-dir DIR]

Loads an export (FILE - reads stdin) into an empty database: DATABASE_URL, or the embedded one
of --data-dir. It applies the migrations, then loads everything in one transaction, or nothing;
it refuses a database that holds any project, key or job, and a file of a newer Errand. Keys
keep working; turns that were queued or running and pending webhook deliveries are queued again.
Forge credentials and webhook secrets open only with the secret key of the exporting side: set
ERRAND_SECRET_KEY to it (the secret.key of its data directory) for the import and for every
Errand process afterwards, or copy that file into the new data directory. For the embedded
mode, also copy admin.key, which the CLI reads.

  From the embedded mode to PostgreSQL:
    errand export errand.jsonl
    DATABASE_URL=postgres://… ERRAND_SECRET_KEY="$(cat .errand/secret.key)" errand import errand.jsonl
`,
  mcp: `Usage: errand mcp [--data-dir DIR]

A Model Context Protocol server on stdio, for coding assistants: it starts and follows jobs
at ERRAND_URL with ERRAND_API_KEY, in ERRAND_PROJECT unless a tool call names a project.
`,
  project: `Usage: errand project <subcommand> [options]

  project create --name NAME --repo URL [--ref main] [--model provider:model] [FORGE] [COMMANDS] [--json]
  project update ID [--name N] [--repo URL] [--ref R] [--model M] [FORGE] [COMMANDS] [--json]
  project list [--json]
${FORGE_AND_COMMANDS}

${ADMIN_KEY}
`,
  key: `Usage: errand key <subcommand> [options]

  key create (--project ID | --admin) [--name NAME] [--json]   (prints the key, shown once)
  key list [--json]
  key revoke ID [--json]

${ADMIN_KEY}
`,
  webhook: `Usage: errand webhook <subcommand> [options]

  webhook create --project ID --url URL [--events job.completed,job.failed] [--description D]
                 [--disabled] [--json]          (prints the signing secret, shown once)
  webhook list --project ID [--json]
  webhook get ID --project ID [--json]
  webhook update ID --project ID [--url U] [--events …] [--description D]
                 [--enabled true|false | --disabled] [--json]
  webhook delete ID --project ID
  webhook rotate ID --project ID [--overlap-hours N (default 24)] [--json]
                                                  (prints the new secret, shown once)
  webhook deliveries ID --project ID [--limit N] [--cursor C] [--json]
  webhook redeliver DELIVERY_ID --webhook ID --project ID [--json]

${ADMIN_KEY}
`,
  job: JOB_USAGE,
  help: `Usage: errand help [COMMAND [SUBCOMMAND]]

Prints the usage of errand, of a command, or of a job subcommand (also: errand COMMAND --help).
`,
};

/** The usage of `errand job <sub>`, or of `errand job` when the subcommand is unknown. */
export function jobUsage(sub: string | undefined): string {
  const line = sub === undefined ? undefined : SUBCOMMAND_USAGE[sub];
  return line
    ? `${line}\n\n(errand help job: every job subcommand, --json and the exit codes)\n`
    : JOB_USAGE;
}

export const USAGE = `Usage: errand <command> [options]

Service:
  serve [--host H] [--port P] [--data-dir DIR] [--no-worker] [--no-dashboard] [--concurrency N]
                     API, dashboard and workers (API only with --no-worker;
                     no dashboard at / with --no-dashboard)
  worker [--data-dir DIR] [--concurrency N]
                     workers only (needs DATABASE_URL and ERRAND_PUBLIC_URL)
  migrate            apply database migrations and exit
  export FILE        write everything (projects, keys, jobs, events, …) to FILE, also while
                     serve runs (- for stdout)
  import FILE        load an export into an empty database (DATABASE_URL or --data-dir)
  mcp                Model Context Protocol server on stdio, for coding assistants
                     (ERRAND_URL, ERRAND_API_KEY, optional ERRAND_PROJECT)

Jobs (at ERRAND_URL, key from ERRAND_API_KEY or <data-dir>/admin.key, project from --project or ERRAND_PROJECT):
  job create "PROMPT" [--model M] [--base-ref R] [--wait]
  job message ID "PROMPT" [--wait]
  job get ID | job list [--status S] [--limit N] | job watch ID
  job events ID [--after SEQ] [--follow] | job archive ID
                     all take --project ID and --json; exit codes: 0 done (completed),
                     1 failed or an error, 2 usage error, 3 archived

Administration (client of the admin API at ERRAND_URL, key from ERRAND_API_KEY or <data-dir>/admin.key):
  project create --name NAME --repo URL [--ref main] [--model provider:model] [FORGE] [COMMANDS] [--json]
  project update ID [--name N] [--repo URL] [--ref R] [--model M] [FORGE] [COMMANDS] [--json]
  project list [--json]
  key create (--project ID | --admin) [--name NAME] [--json]
  key list [--json]
  key revoke ID [--json]
  webhook create|list|get|update|delete|rotate|deliveries|redeliver …

  errand help COMMAND (or errand COMMAND --help) prints a command's usage and options;
  errand --version prints the version.
`;

/** Node's parse error as one line in errand's words. */
function reason(err: Error & { code?: unknown }): string {
  const quoted = /'([^']+)'/.exec(err.message)?.[1] ?? '';
  const flag = quoted.replace(/ <value>$/, '');
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${flag} (an argument that starts with '-' goes after '--')`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${flag}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(err.message)) return `${flag} takes no value`;
      if (/ambiguous/.test(err.message))
        return `${flag} needs a value (one that starts with '-' is written ${flag}=-…)`;
      return `${flag} needs a value`;
    default:
      return err.message.split('\n')[0] ?? 'invalid arguments';
  }
}

export interface Parsed<T extends ParseArgsOptionsConfig> {
  values: ReturnType<typeof parseArgs<{ options: T; allowPositionals: true }>>['values'];
  positionals: string[];
}

/** parseArgs, strict, with its errors turned into usage errors. */
export function parseCommandLine<T extends ParseArgsOptionsConfig>(
  args: string[],
  options: T,
  usage?: string,
): Parsed<T> {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (err instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_'))
      throw new UsageError(reason(err), usage);
    throw err;
  }
}
