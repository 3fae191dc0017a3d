// The perf bench's summary: per table line, the figure, its limit and their ratio of every round
// reduced to min / median / max (the ratio computed per round first), judged against the line's
// target on the median ratio, as a Markdown table; and that table written between the markers
// in the project README.
import { readFile, writeFile } from 'node:fs/promises';

export interface Sample {
  round: number;
  figure: number;
  limit: number;
  /** figure / limit, or for an absolute target figure / target. */
  ratio: number;
  /** Other numbers of the measurement (references, error counts), kept in the JSON. */
  extra: Record<string, number>;
}

interface Target {
  op: '<=' | '>=';
  /** The bound on the ratio. */
  ratio: number;
  /** How the target reads in the table. */
  text: string;
}

export interface Line {
  key: string;
  title: string;
  unit: 'ms' | 'MiB' | 'req/s' | 'TPS';
  limitTitle: string;
  limitUnit: 'ms' | 'MiB' | 'req/s' | 'TPS';
  /** null: a reference line with no target. */
  target: Target | null;
  /** Extra numbers shown in the limit cell, e.g. a second limit: extra key → label. */
  alsoShow?: { key: string; label: string; unit: 'ms' | 'MiB' | 'req/s' | 'TPS' }[];
  /** No limit measured (a reference figure alone). */
  noLimit?: boolean;
  /** Limits shown for comparison only, with no ratio. */
  noRatio?: boolean;
  samples: Sample[];
}

export interface Summary {
  min: number;
  median: number;
  max: number;
}

export function summarize(values: number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return { min: Number.NaN, median: Number.NaN, max: Number.NaN };
  const mid = Math.floor(n / 2);
  const median =
    n % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  return { min: sorted[0] ?? 0, median, max: sorted[n - 1] ?? 0 };
}

function number(n: number, unit: Line['unit']): string {
  const digits = unit === 'ms' && n < 10 ? 1 : 0;
  return n.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function triple(s: Summary, unit: Line['unit']): string {
  return `${number(s.min, unit)} / ${number(s.median, unit)} / ${number(s.max, unit)} ${unit}`;
}

function ratioTriple(s: Summary): string {
  const f = (n: number) => n.toFixed(2);
  return `${f(s.min)} / ${f(s.median)} / ${f(s.max)}`;
}

function met(line: Line): boolean | null {
  if (!line.target || line.samples.length === 0) return null;
  const median = summarize(line.samples.map((s) => s.ratio)).median;
  return line.target.op === '<=' ? median <= line.target.ratio : median >= line.target.ratio;
}

export function markdownTable(lines: Line[]): string {
  const out = [
    '| Figure | Measured (min / median / max) | Limit it is compared with (min / median / max) | Ratio (min / median / max) | Target | Met |',
    '|---|---|---|---|---|---|',
  ];
  for (const line of lines) {
    if (line.samples.length === 0) continue;
    const figure = triple(summarize(line.samples.map((s) => s.figure)), line.unit);
    let limit = line.noLimit
      ? '–'
      : `${line.limitTitle}: ${triple(summarize(line.samples.map((s) => s.limit)), line.limitUnit)}`;
    for (const also of line.alsoShow ?? []) {
      const values = line.samples.map((s) => s.extra[also.key] ?? Number.NaN);
      limit += `; ${also.label}: ${triple(summarize(values), also.unit)}`;
    }
    const ratio =
      line.noLimit || line.noRatio ? '–' : ratioTriple(summarize(line.samples.map((s) => s.ratio)));
    const verdict = met(line);
    out.push(
      `| ${line.title} | ${figure} | ${limit} | ${ratio} | ${line.target?.text ?? '– (reference)'} | ${verdict === null ? '–' : verdict ? 'yes' : 'no'} |`,
    );
  }
  return out.join('\n');
}

/** A line per measured line with a target that the median ratio misses. */
export function notMetLines(lines: Line[]): string[] {
  return lines
    .filter((l) => met(l) === false)
    .map((l) => {
      const median = summarize(l.samples.map((s) => s.ratio)).median;
      return `- Not met: ${l.title} (median ratio ${median.toFixed(2)}, target ${l.target?.text ?? ''}).`;
    });
}

const README_START = '<!-- bench:perf:start -->';
const README_END = '<!-- bench:perf:end -->';

/** Replaces what is between the markers in `file` by `text`; the markers must be there once. */
export async function writeBetweenMarkers(file: string, text: string): Promise<void> {
  const readme = await readFile(file, 'utf8');
  const start = readme.indexOf(README_START);
  const end = readme.indexOf(README_END);
  if (start < 0 || end < start || readme.indexOf(README_START, start + 1) >= 0) {
    throw new Error(
      `${file} must hold ${README_START} … ${README_END} once, in that order (or run with --no-readme)`,
    );
  }
  const updated = `${readme.slice(0, start + README_START.length)}\n${text.trim()}\n${readme.slice(end)}`;
  await writeFile(file, updated);
}
