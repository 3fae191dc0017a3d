// The two ways a command fails that a user can act on, and the exit codes: a CliError prints its
// message (exit 1), a UsageError its reason and the command's usage (exit 2). Anything else
// that reaches main is a bug and keeps its stack.

/** Exit codes, as docs/clients.md documents them. */
export const EXIT = { ok: 0, failed: 1, usage: 2, archived: 3 } as const;

/** A failure with a message for the user: the API refused, Errand is unreachable, a bad file. */
export class CliError extends Error {
  override name = 'CliError';
}

/** The command line is wrong (unknown option, missing argument): exit 2 with the usage. */
export class UsageError extends CliError {
  override name = 'UsageError';
  /** The usage printed with the reason; unset: that of the command being run. */
  readonly usage: string | undefined;
  /** The command it is about, as the message names it ("job", "serve"); unset: errand itself. */
  readonly command: string | undefined;

  constructor(reason: string, usage?: string, command?: string) {
    super(reason);
    this.usage = usage;
    this.command = command;
  }
}
