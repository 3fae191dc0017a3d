// The help of every command, made from the same definitions the parser reads (command.ts): a
// command's synopsis lists the options it accepts, in its own order, so the usage cannot say
// one thing while the parser does another.
import { type Command, type Family, type OptionDef, optionText } from './command.ts';

const WIDTH = 96;
/** Where a summary starts beside a short synopsis. */
const COLUMN = 21;

/** Words wrapped to the width, every line after the first indented by `indent`. */
function wrap(text: string, indent: number, first = indent): string {
  const lines: string[] = [];
  let line = '';
  let room = WIDTH - first;
  for (const paragraph of text.split('\n')) {
    for (const word of paragraph.split(' ')) {
      if (line && line.length + 1 + word.length > room) {
        lines.push(line);
        line = '';
        room = WIDTH - indent;
      }
      line = line ? `${line} ${word}` : word;
    }
    lines.push(line);
    line = '';
    room = WIDTH - indent;
  }
  return lines.join(`\n${' '.repeat(indent)}`);
}

function part(name: string, def: OptionDef): string {
  return def.required ? optionText(name, def) : `[${optionText(name, def)}]`;
}

/**
 * `job create "PROMPT" [--project ID] …`: the arguments, then each option in order; a choice
 * (`either`) as `(--a A | --b)` when one is required, else `[--a A | --b]`; an option group
 * once, as [GROUP]. `omit` leaves options out (those a list says once for all).
 */
function synopsis(command: Command, omit: ReadonlySet<string> = new Set()): string {
  const words = [command.name, ...command.args];
  const done = new Set<string>();
  for (const [name, def] of Object.entries(command.options)) {
    if (def.hidden || omit.has(name)) continue;
    if (def.group) {
      if (!done.has(def.group)) words.push(`[${def.group}]`);
      done.add(def.group);
    } else if (def.either) {
      if (done.has(def.either)) continue;
      done.add(def.either);
      const members = Object.entries(command.options).filter(([, d]) => d.either === def.either);
      const alternatives = members.map(([n, d]) => optionText(n, d)).join(' | ');
      const required = members.some(([, d]) => d.required);
      words.push(required ? `(${alternatives})` : `[${alternatives}]`);
    } else {
      words.push(part(name, def));
    }
  }
  return words.join(' ');
}

/** A synopsis with its summary beside it, or under it when the synopsis is long. */
function entry(text: string, summary: string | undefined): string {
  if (!summary) return `  ${text}`;
  const head = `  ${text}`;
  const body = wrap(summary, COLUMN);
  return head.length < COLUMN - 1
    ? `${head.padEnd(COLUMN)}${body}`
    : `${head}\n${' '.repeat(COLUMN)}${body}`;
}

/** The options every subcommand of a family takes and none requires: said once for all. */
function commonOptions(family: Family): Map<string, OptionDef> {
  const [first, ...rest] = family.commands;
  const common = new Map<string, OptionDef>();
  for (const [name, def] of Object.entries(first?.options ?? {})) {
    if (def.required || def.group || def.either) continue;
    if (rest.every((c) => c.options[name] !== undefined && !c.options[name].required))
      common.set(name, def);
  }
  return common;
}

function list(items: string[]): string {
  return items.length < 2
    ? (items[0] ?? '')
    : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

/** `errand help serve`: the synopsis, then what the command does. */
export function commandUsage(command: Command): string {
  return `Usage: errand ${synopsis(command)}\n\n${command.details ?? `${wrap(command.summary, 0)}\n`}`;
}

/**
 * `errand help job create`, for a family whose subcommands have usages of their own: the
 * summary, or the details when the subcommand has more to say.
 */
export function subcommandUsage(family: Family, command: Command): string {
  const about = command.details ?? `${wrap(`${capitalised(command.summary)}.`, 0)}\n`;
  return `Usage: errand ${synopsis(command)}\n\n${about}\n(errand help ${family.name}: every ${family.name} subcommand, --json and the exit codes)\n`;
}

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The options of each group the family's synopses show as [GROUP], and its note. */
function groupLines(family: Family): string[] {
  const lines: string[] = [];
  for (const [group, note] of Object.entries(family.groups ?? {})) {
    const seen = new Set<string>();
    const options: string[] = [];
    for (const command of family.commands)
      for (const [name, def] of Object.entries(command.options))
        if (def.group === group && !seen.has(name)) {
          seen.add(name);
          options.push(`[${optionText(name, def)}]`);
        }
    lines.push(`  ${group}: ${wrap(`${options.join(' ')}\n${note}`, 9, group.length + 4)}`);
  }
  return lines;
}

/** `errand help job`: every subcommand with what it does, the options they share, the notes. */
export function familyUsage(family: Family): string {
  const common = commonOptions(family);
  const omit = new Set(common.keys());
  const shared = [...common].map(([name, def]) => optionText(name, def));
  return [
    `Usage: errand ${family.name} <subcommand> [options]`,
    '',
    ...(family.intro ? [family.intro, ''] : []),
    ...family.commands.map((c) => entry(synopsis(c, omit), c.summary)),
    ...groupLines(family),
    '',
    ...(shared.length > 0 ? [`Every ${family.name} subcommand also takes ${list(shared)}.`] : []),
    family.outro.replace(/\n$/, ''),
    '',
  ].join('\n');
}

export interface Section {
  title: string;
  items: ReadonlyArray<Command | Family>;
}

function isFamily(item: Command | Family): item is Family {
  return 'commands' in item;
}

/** `errand help`: every command, by section, and how to learn more. */
export function overview(sections: readonly Section[]): string {
  const lines = ['Usage: errand <command> [options]'];
  for (const section of sections) {
    lines.push('', `${section.title}:`);
    for (const item of section.items) {
      if (!isFamily(item)) {
        lines.push(entry(synopsis(item), item.summary));
        continue;
      }
      if (item.collapsed) {
        const names = item.commands.map((c) => c.name.slice(item.name.length + 1));
        lines.push(`  ${item.name} ${names.join('|')} …`);
        continue;
      }
      const omit = new Set(commonOptions(item).keys());
      for (const command of item.commands) lines.push(`  ${synopsis(command, omit)}`);
      if (item.overview) lines.push(`${' '.repeat(COLUMN)}${wrap(item.overview, COLUMN)}`);
    }
  }
  lines.push(
    '',
    "  errand help COMMAND (or errand COMMAND --help) prints a command's usage and options;",
    '  errand --version prints the version.',
    '',
  );
  return lines.join('\n');
}
