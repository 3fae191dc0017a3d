// How a command is defined, and the one argument parser of every `errand` command. A command's
// definition (its arguments, its options in usage order, a summary) is what both the parser
// and the help (help.ts) read, so the usage printed is the command line accepted. Node's
// parseArgs does the parsing; its errors become a UsageError in errand's words, never its own
// text (which talks about its API, not about errand).
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { UsageError } from './errors.ts';

export interface OptionDef {
  readonly type: 'string' | 'boolean';
  /** The value's name in the usage (string options): NAME, provider:model, true|false. */
  readonly value?: string;
  /** The values it takes (checked before the command runs); the usage shows them as a|b|c. */
  readonly choices?: readonly string[];
  readonly short?: string;
  /** Must be given (checked before the command runs, with "--NAME is required"). */
  readonly required?: boolean;
  /** Left out of the synopsis: an option every command of a family takes, said once. */
  readonly hidden?: boolean;
  /** Options of one `either` give one choice: at most one of them (exactly one if required). */
  readonly either?: string;
  /** Shown as [GROUP] in the synopsis and spelled out under the family's commands. */
  readonly group?: string;
  /** A string option that may be given again: its values, in order. */
  readonly multiple?: boolean;
}

export type OptionDefs = Readonly<Record<string, OptionDef>>;

type ValueOf<D extends OptionDef> = D['type'] extends 'boolean'
  ? boolean
  : D extends { multiple: true }
    ? string[]
    : D extends { choices: readonly (infer C)[] }
      ? C
      : string;

/** Options the parser makes sure of: required, and not one of a choice. */
type Sure<D> = D extends { required: true } ? (D extends { either: string } ? false : true) : false;

/** The values of a command line, typed by the command's options. */
export type Values<O extends OptionDefs> = {
  readonly [K in keyof O as Sure<O[K]> extends true ? K : never]: ValueOf<O[K]>;
} & { readonly [K in keyof O as Sure<O[K]> extends true ? never : K]?: ValueOf<O[K]> };

/** What a command writes to and reads settings from: the process's own. */
export interface Io {
  stdout: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
}

export interface CommandInput<O extends OptionDefs> {
  values: Values<O>;
  /** The positional arguments, as many as the definition names. */
  args: string[];
  io: Io;
}

export interface Command {
  /** The words that run it: "serve", "job create". */
  readonly name: string;
  /**
   * Its positional arguments, as the usage writes them: ID, "PROMPT", or [KEY] for one that
   * may be left out (after the others).
   */
  readonly args: readonly string[];
  /** Its options, in the order the usage shows them; any other is an unknown option here. */
  readonly options: OptionDefs;
  /** What it does, in a line or two (beside it in a list of commands). */
  readonly summary: string;
  /** More, for its own usage page. */
  readonly details: string | undefined;
  /** Parses `argv` (what follows the command's name) and runs it; resolves with the exit code. */
  run(argv: string[], io: Io): Promise<number>;
}

/** A family of subcommands: `errand job create`, `errand webhook list`… */
export interface Family {
  /** "job" */
  readonly name: string;
  /** Above the list of subcommands on the family's page. */
  readonly intro?: string;
  /** Below it: the notes every subcommand shares. */
  readonly outro: string;
  readonly commands: readonly Command[];
  /** The option groups its synopses show as [GROUP], each with a note under its options. */
  readonly groups?: Readonly<Record<string, string>>;
  /**
   * Whether each subcommand has a usage of its own, printed for its --help and its usage
   * errors (the job commands); otherwise the family's page is (the admin commands).
   */
  readonly subcommandPages: boolean;
  /** The line that stands for the family in `errand help` after its subcommands. */
  readonly overview?: string;
  /** Listed as one line (`webhook create|list|… …`) in `errand help`. */
  readonly collapsed?: boolean;
}

/** The help option every command takes. */
const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** Defines a command: `run` gets the command line parsed and checked against `options`. */
export function defineCommand<const O extends OptionDefs>(def: {
  name: string;
  args?: readonly string[];
  options: O;
  summary: string;
  details?: string;
  /**
   * What an argument beyond `args` is refused with, instead of a message that quotes it (a
   * secret's value typed where it does not belong stays off the screen).
   */
  unexpected?: string;
  run(input: CommandInput<O>): Promise<number>;
}): Command {
  const args = def.args ?? [];
  return {
    name: def.name,
    args,
    options: def.options,
    summary: def.summary,
    details: def.details,
    async run(argv: string[], io: Io): Promise<number> {
      const values = parse(argv, def.options, args, def.unexpected);
      // parse() returns values of exactly these options, so they are this command's Values.
      return def.run({ values: values.values as Values<O>, args: values.positionals, io });
    },
  };
}

/** Node's parse error as one line in errand's words. */
function reason(err: Error & { code?: unknown }): string {
  const quoted = /'([^']+)'/.exec(err.message)?.[1] ?? '';
  const flag = quoted.replace(/ <value>$/, '');
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${flag} (an argument that starts with '-' goes after '--')`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(err.message)) return `${flag} takes no value`;
      if (/ambiguous/.test(err.message))
        return `${flag} needs a value (one that starts with '-' is written ${flag}=-…)`;
      return `${flag} needs a value`;
    default:
      return err.message.split('\n')[0] ?? 'invalid arguments';
  }
}

function parserOptions(options: OptionDefs): ParseArgsOptionsConfig {
  const config: ParseArgsOptionsConfig = {};
  for (const [name, def] of Object.entries({ ...options, ...HELP }))
    config[name] = {
      type: def.type,
      ...(def.short ? { short: def.short } : {}),
      ...('multiple' in def && def.multiple ? { multiple: true } : {}),
    };
  return config;
}

type Parsed = {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
};

/** parseArgs, strict, with its errors turned into usage errors. */
function parseStrict(argv: string[], options: OptionDefs): Parsed {
  try {
    const parsed = parseArgs({
      args: argv,
      options: parserOptions(options),
      allowPositionals: true,
      strict: true,
    });
    const values: Parsed['values'] = {};
    for (const [name, value] of Object.entries(parsed.values))
      if (typeof value === 'string' || typeof value === 'boolean') values[name] = value;
      else if (Array.isArray(value))
        values[name] = value.filter((v): v is string => typeof v === 'string');
    return { values, positionals: parsed.positionals };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (err instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_'))
      throw new UsageError(reason(err));
    throw err;
  }
}

/** Thrown by parse() when --help was given: the caller prints the usage instead of running. */
export class HelpRequested extends Error {
  override name = 'HelpRequested';
}

/** The option as the usage writes it: --name VALUE, or --flag. */
export function optionText(name: string, def: OptionDef): string {
  if (def.type === 'boolean') return `--${name}`;
  return `--${name} ${def.value ?? def.choices?.join('|') ?? 'VALUE'}${def.multiple ? ' …' : ''}`;
}

/**
 * Parses and checks a command line against a definition: the options, the number of
 * arguments, the required options and the choices (`either`). --help ends it with HelpRequested.
 */
function parse(
  argv: string[],
  options: OptionDefs,
  args: readonly string[],
  unexpected?: string,
): Parsed {
  const parsed = parseStrict(argv, options);
  if (parsed.values.help) throw new HelpRequested();
  // An argument written [KEY] may be left out; the others come first and must be given.
  const [missing] = args.filter((a) => !a.startsWith('[')).slice(parsed.positionals.length);
  if (missing) throw new UsageError(`missing ${missing.replaceAll('"', '')}`);
  const extra = parsed.positionals[args.length];
  if (extra !== undefined && unexpected !== undefined) throw new UsageError(unexpected);
  if (extra !== undefined) {
    const quoted = args.at(-1)?.startsWith('"');
    const last = args.at(-1)?.replaceAll('"', '').toLowerCase();
    throw new UsageError(
      `unexpected argument ${JSON.stringify(extra)}${quoted ? ` (quote the ${last}: it is one argument)` : ''}`,
    );
  }
  const eithers = new Map<string, string[]>();
  for (const [name, def] of Object.entries(options)) {
    const value = parsed.values[name];
    if (def.either) {
      eithers.set(def.either, [...(eithers.get(def.either) ?? []), name]);
    } else if (def.required && value === undefined) {
      throw new UsageError(`--${name} is required`);
    }
    if (def.choices && typeof value === 'string' && !def.choices.includes(value))
      throw new UsageError(`--${name} must be one of ${def.choices.join(', ')}`);
  }
  for (const names of eithers.values()) {
    // An empty value is no choice: `--project ""` is a mistake, not a project.
    const given = names.filter((n) => {
      const value = parsed.values[n];
      return !Array.isArray(value) && ![undefined, false, ''].includes(value);
    });
    const required = names.some((n) => options[n]?.required);
    if (required && given.length !== 1)
      throw new UsageError(
        `give exactly one of ${names.map((n) => optionText(n, options[n] ?? { type: 'boolean' })).join(' or ')}`,
      );
    if (given.length > 1)
      throw new UsageError(`give one of ${names.map((n) => `--${n}`).join(' and ')}`);
  }
  return parsed;
}

/** Where the first positional argument is (-1: none), for finding a family's subcommand. */
export function firstPositional(argv: string[], options: OptionDefs): number {
  const { tokens } = parseArgs({
    args: argv,
    options: parserOptions(options),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const first = tokens.find((t) => t.kind === 'positional' || t.kind === 'option-terminator');
  return first?.kind === 'positional' ? first.index : -1;
}

/** A flag that takes true or false. */
export function boolFlag(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== 'true' && value !== 'false')
    throw new UsageError(`--${name} must be true or false`);
  return value === 'true';
}

/** A whole number flag, at least `min` (the message says so when min is above 0). */
export function wholeNumber(value: string | undefined, name: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${name} must be a whole number${min > 0 ? `, ${min} or more` : ''}`);
  return n;
}

/** The options of every command that prints a result: --json, and --data-dir (hidden). */
export const COMMON_OPTIONS = {
  json: { type: 'boolean' },
  'data-dir': { type: 'string', value: 'DIR', hidden: true },
} as const;

/** Prints a command's result: exactly one JSON document with --json, else the text. */
export function print(io: Io, json: boolean | undefined, value: unknown, text: string): void {
  io.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}
