// From `errand <argv…>` to the command that runs it: the command or the family's subcommand
// named, `errand help …` and --help answered from the definitions, and every usage error
// given the usage to print with it and the command it is about.

import { errandVersion } from '../version.ts';
import {
  type Command,
  type Family,
  firstPositional,
  HelpRequested,
  type Io,
  type OptionDefs,
} from './command.ts';
import { EXIT, UsageError } from './errors.ts';
import { commandUsage, familyUsage, overview, type Section, subcommandUsage } from './help.ts';

const HELP_USAGE = `Usage: errand help [COMMAND [SUBCOMMAND]]

Prints the usage of errand, of a command, or of a job subcommand (also: errand COMMAND --help).
`;

/** Runs a command; --help prints `usage`, a usage error is given `usage` and `label`. */
async function runWithUsage(
  command: Command,
  argv: string[],
  io: Io,
  usage: string,
  label: string,
): Promise<number> {
  try {
    return await command.run(argv, io);
  } catch (err) {
    if (err instanceof HelpRequested) {
      io.stdout.write(usage);
      return EXIT.ok;
    }
    if (err instanceof UsageError)
      throw new UsageError(err.message, err.usage ?? usage, err.command ?? label);
    throw err;
  }
}

function subcommand(family: Family, name: string | undefined): Command | undefined {
  return family.commands.find((c) => c.name === `${family.name} ${name}`);
}

/** The usage of a family's subcommand: its own, or the family's page. */
function usageOf(family: Family, command: Command | undefined): string {
  return family.subcommandPages && command ? subcommandUsage(family, command) : familyUsage(family);
}

async function runFamily(family: Family, argv: string[], io: Io): Promise<number> {
  const page = familyUsage(family);
  const options: Record<string, OptionDefs[string]> = {};
  for (const command of family.commands) Object.assign(options, command.options);
  const at = firstPositional(argv, options);
  const name = at < 0 ? undefined : argv[at];
  const wantsHelp = argv.some((a) => a === '--help' || a === '-h');
  if (name === 'help') {
    io.stdout.write(usageOf(family, subcommand(family, argv[at + 1])));
    return EXIT.ok;
  }
  const command = subcommand(family, name);
  if (!command) {
    if (wantsHelp) {
      io.stdout.write(page);
      return EXIT.ok;
    }
    if (name === undefined) throw new UsageError('missing the subcommand', page, family.name);
    const noun = family.subcommandPages ? 'subcommand' : 'command';
    throw new UsageError(`unknown ${noun}: ${family.name} ${name}`, page, family.name);
  }
  const rest = [...argv.slice(0, at), ...argv.slice(at + 1)];
  return runWithUsage(command, rest, io, usageOf(family, command), family.name);
}

/** `errand help [COMMAND [SUBCOMMAND]]`. */
function help(sections: readonly Section[], topic: string | undefined, sub: string | undefined) {
  if (topic === undefined) return overview(sections);
  if (topic === 'help') return HELP_USAGE;
  const item = find(sections, topic);
  if (!item) throw new UsageError(`unknown command: ${topic}`, overview(sections));
  return 'commands' in item ? usageOf(item, subcommand(item, sub)) : commandUsage(item);
}

function find(sections: readonly Section[], name: string): Command | Family | undefined {
  for (const section of sections)
    for (const item of section.items) if (item.name === name) return item;
  return undefined;
}

/** Runs `errand <argv…>`; resolves with the exit code, throws a CliError for the user. */
export async function runCli(
  argv: string[],
  sections: readonly Section[],
  io: Io,
): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    io.stdout.write(overview(sections));
    return EXIT.ok;
  }
  if (name === '--version') {
    io.stdout.write(`${errandVersion()}\n`);
    return EXIT.ok;
  }
  if (name === 'help') {
    io.stdout.write(help(sections, rest[0], rest[1]));
    return EXIT.ok;
  }
  const item = find(sections, name);
  if (!item)
    throw new UsageError(
      name.startsWith('-')
        ? `unknown option ${name} (the command comes first: errand <command> [options])`
        : `unknown command: ${name}`,
      overview(sections),
    );
  if ('commands' in item) return runFamily(item, rest, io);
  return runWithUsage(item, rest, io, commandUsage(item), item.name);
}
