// The `errand` command: finds the command named on the command line among those of src/cli/
// and runs it, then turns its outcome into an exit code and its failure into one message on
// stderr. Nothing else: every command, its options and its help are defined in src/cli/.
import type { Io } from './cli/command.ts';
import { runCli } from './cli/dispatch.ts';
import { engines } from './cli/engines.ts';
import { environments } from './cli/environments.ts';
import { CliError, EXIT, UsageError } from './cli/errors.ts';
import { evals } from './cli/eval/commands.ts';
import type { Section } from './cli/help.ts';
import { jobs } from './cli/jobs.ts';
import { keys } from './cli/keys.ts';
import { mcp } from './cli/mcp.ts';
import { projects } from './cli/projects.ts';
import { schedules } from './cli/schedules.ts';
import { secrets } from './cli/secrets.ts';
import { migrate, serve, worker } from './cli/service.ts';
import { exportCommand, importCommand } from './cli/transfer.ts';
import { webhooks } from './cli/webhooks.ts';
import { ConfigError } from './config.ts';
import { isDatabaseUnavailable } from './db/unavailable.ts';

const ADMIN_KEY = 'key from ERRAND_API_KEY or <data-dir>/admin.key';

/** Every command, in the order and the sections of `errand help`. */
const SECTIONS: readonly Section[] = [
  {
    title: 'Service',
    items: [serve, worker, migrate, exportCommand, importCommand, mcp, engines],
  },
  {
    title: `Jobs (at ERRAND_URL, ${ADMIN_KEY}, project from --project or ERRAND_PROJECT)`,
    items: [jobs],
  },
  {
    title: `Administration (client of the admin API at ERRAND_URL, ${ADMIN_KEY}; all take --json)`,
    items: [projects, keys, webhooks, secrets, environments, schedules],
  },
  {
    title: `Evaluation (agents measured on your own code, docs/eval.md; client of the eval API at ERRAND_URL, ${ADMIN_KEY})`,
    items: [evals],
  },
];

/** Errors of the database's start whose message says what to do (db/embedded). */
const KNOWN_ERRORS = new Set([
  'DatabaseLockedError',
  'EmbeddedStartError',
  'EmbeddedUnsupportedError',
]);

/** A failure as the user reads it: the usage with a usage error; a bug keeps its stack. */
function report(err: unknown): number {
  if (err instanceof UsageError) {
    // A wrong command line: the reason, then what the command accepts; nothing on stdout.
    const label = err.command ? ` ${err.command}` : '';
    process.stderr.write(`errand${label}: ${err.message}\n\n${err.usage ?? ''}`);
    return EXIT.usage;
  }
  // A database that is down or unreachable at start: what to check, not a stack.
  if (err instanceof Error && isDatabaseUnavailable(err)) {
    process.stderr.write(
      `errand: the database does not answer (${err.message || (err as NodeJS.ErrnoException).code}): check DATABASE_URL and that the server runs\n`,
    );
    return EXIT.failed;
  }
  const known =
    err instanceof CliError ||
    err instanceof ConfigError ||
    (err instanceof Error && KNOWN_ERRORS.has(err.name));
  const text =
    err instanceof Error ? (known ? err.message : (err.stack ?? err.message)) : String(err);
  process.stderr.write(`errand: ${text}\n`);
  return EXIT.failed;
}

const io: Io = { stdout: process.stdout, env: process.env };

runCli(process.argv.slice(2), SECTIONS, io).then(
  (code) => {
    // Not set when 0: a service that failed to stop cleanly has set 1 already.
    if (code !== EXIT.ok) process.exitCode = code;
  },
  (err: unknown) => {
    process.exitCode = report(err);
  },
);
