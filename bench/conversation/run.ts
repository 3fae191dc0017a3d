// `node bench/conversation/run.ts`: the agent's conversation on one long job, with the scripted model of
// the tests (test/support/fake-llm.ts, which counts a quarter of a prompt's characters as its
// tokens, enforces the window and caches prompts as each vendor does). The job is 40 steps over
// large files of a real repository, then 10 follow-ups, run by the agent loop itself
// (src/agent/loop.ts) with its real file tools, each turn's stored messages round-tripped through
// JSON as the database keeps them. It runs once as Errand runs it and once without masking,
// caching and compaction (the loop's `managed: false`), on the Anthropic and OpenAI protocols, and
// writes its table into docs/benchmarks.md between the bench:conversation markers.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ModelMessage } from 'ai';
import { costOf, ModelCatalog } from '../../src/agent/catalog.ts';
import { jobHistory, windowPolicy } from '../../src/agent/conversation.ts';
import { runAgentTurn } from '../../src/agent/loop.ts';
import { resolveModel } from '../../src/agent/models.ts';
import { buildSystemPrompt } from '../../src/agent/prompt.ts';
import { createRepoTools } from '../../src/agent/tools/index.ts';
import type { TokenUsage } from '../../src/jobs/usage.ts';
import {
  countTokens,
  type FakeLlm,
  type RecordedRequest,
  type ReplyItem,
  reply,
  startFakeLlm,
  toolCalls,
} from '../../test/support/fake-llm.ts';
import { writeFiles } from '../../test/support/git.ts';

const REPO_ROOT = path.resolve(import.meta.dirname, '..', '..');
const KEY = 'bench-conversation-key';
const MODEL = 'bench-model';
const FILES = 40;
/** File sizes in KB, in turn: source files from small to the largest a repository keeps. */
const SIZES_KB = [12, 24, 36, 48, 64, 80, 100];
/** The models whose list prices put a cost on each run (the catalog's figures). */
const PRICED: Record<Protocol, string> = {
  anthropic: 'anthropic:claude-sonnet-4-5',
  openai: 'openai:gpt-4.1',
};

type Protocol = 'anthropic' | 'openai';

interface Options {
  window: number;
  maxOutputTokens: number;
  readme: boolean;
}

const HELP = `Usage: node bench/conversation/run.ts [--window 200000] [--max-output-tokens 16000] [--no-readme]

One long job (40 steps over large files, then 10 follow-ups) with the scripted model, as Errand
runs it and without masking, caching and compaction, on the Anthropic and OpenAI protocols.
Writes bench/results/conversation-<time>.json and, unless --no-readme, the table in
docs/benchmarks.md between the bench:conversation markers.
`;

function parseArgs(argv: string[]): Options | undefined {
  const options: Options = { window: 200_000, maxOutputTokens: 16_000, readme: true };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`${arg} needs a whole number`);
      return n;
    };
    if (arg === '--help' || arg === '-h') return undefined;
    else if (arg === '--window') options.window = value();
    else if (arg === '--max-output-tokens') options.maxOutputTokens = value();
    else if (arg === '--no-readme') options.readme = false;
    else throw new Error(`unknown option ${arg}\n\n${HELP}`);
  }
  return options;
}

// --- the repository and the job ---

const fileName = (n: number) => `src/module-${String(n).padStart(2, '0')}.ts`;

function fileText(n: number): string {
  const kb = SIZES_KB[(n - 1) % SIZES_KB.length] ?? 32;
  const lines: string[] = [`// Module ${n}: generated for the conversation bench.`];
  for (let i = 0; lines.join('\n').length < kb * 1024; i++) {
    lines.push(
      `export function handler_${n}_${i}(input: Input): Output { return run(input, ${i}, 'module-${n}'); }`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** A model's short thought before a call, as real agents write. */
const thought = (text: string) => `${text} `.padEnd(300, '.');

/**
 * The model's side of the job: the answers in order, and which file each turn reads first.
 * Turn 1 is 40 steps: it lists the files, reads 33 modules whole, searches four times, re-reads
 * parts of two it read before, edits three and writes a note. Each follow-up reads two modules
 * (one it read before, the new ones last), edits one and answers.
 */
function script(): { turns: ReplyItem[][]; prompts: string[] } {
  const first: ReplyItem[] = [
    toolCalls([{ name: 'list_files', input: { pattern: 'src/**' } }], {
      text: thought('Looking at the layout.'),
    }),
  ];
  let next = 1;
  const read = (n: number) =>
    toolCalls([{ name: 'read_file', input: { path: fileName(n) } }], {
      text: thought(`Reading module ${n}.`),
    });
  const edit = (n: number, turn: number) =>
    toolCalls(
      [
        {
          name: 'edit_file',
          input: {
            path: fileName(n),
            old: `handler_${n}_${turn}(input: Input)`,
            new: `handler_${n}_${turn}(input: Readonly<Input>)`,
          },
        },
      ],
      { text: thought(`Editing module ${n}.`) },
    );
  while (first.length < 39) {
    const step = first.length + 1;
    if (step % 9 === 0) {
      first.push(
        toolCalls([{ name: 'search', input: { pattern: `handler_${step}_1\\b` } }], {
          text: thought('Searching for callers.'),
        }),
      );
    } else if (step === 14 || step === 26 || step === 35) {
      first.push(edit(next - 1, step));
    } else if (step === 20 || step === 30) {
      first.push(
        toolCalls(
          [{ name: 'read_file', input: { path: fileName(step / 10), startLine: 1, endLine: 80 } }],
          { text: thought('Checking the start of an earlier module again.') },
        ),
      );
    } else {
      first.push(read(next++));
    }
  }
  first.push(
    toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: '# Notes\n' } }], {
      text: thought('Writing the notes.'),
    }),
    reply('Tighten the handlers\n\nRead the modules, made three handlers take read-only input.'),
  );
  const turns = [first];
  const prompts = [
    'Read every module, tighten the handlers that mutate their input, and write notes.',
  ];
  for (let t = 1; t <= 10; t++) {
    const again = ((t * 7) % (next - 1)) + 1;
    const fresh = next <= FILES ? next++ : again;
    turns.push([
      read(again),
      read(fresh),
      edit(fresh, 100 + t),
      reply(`Follow-up ${t} done\n\nEdited module ${fresh}.`),
    ]);
    prompts.push(`Follow-up ${t}: look at module ${fresh} again and tighten one more handler.`);
  }
  return { turns, prompts };
}

// --- one run ---

interface RunFigures {
  protocol: Protocol;
  managed: boolean;
  completed: boolean;
  error: string | null;
  requests: number;
  summaries: number;
  overflows: number;
  compactions: number;
  largestRequestTokens: number;
  largestShare: number;
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  cachedShare: number;
  uncachedTokens: number;
  distinctContentTokens: number;
  uncachedMultiple: number;
  costUsd: number | null;
}

const isSummary = (r: RecordedRequest) =>
  JSON.stringify(r.body).includes('You write the working notes of a software engineering agent');

async function runJob(protocol: Protocol, managed: boolean, opts: Options): Promise<RunFigures> {
  const dir = await mkdtemp(path.join(tmpdir(), 'errand-bench-conversation-'));
  const files: Record<string, string> = { 'README.md': '# Bench\n' };
  for (let n = 1; n <= FILES; n++) files[fileName(n)] = fileText(n);
  await writeFiles(dir, files);
  // Without its window the baseline's requests are answered, to be measured.
  const fake: FakeLlm = await startFakeLlm({
    apiKey: KEY,
    models: [MODEL],
    ...(managed ? { contextWindow: opts.window, allowOverflows: 10 } : {}),
  });
  const { turns, prompts } = script();
  const queue = turns.flat();
  fake.scriptAll((r) =>
    isSummary(r)
      ? reply(
          'Notes: the modules under src/ were read; handlers take Input and return Output through run(); three handlers were made to take Readonly<Input>. Still to do: what the user asks next.',
        )
      : queue.shift(),
  );
  const model = resolveModel(`${protocol}:${MODEL}`, {
    [protocol]: { apiKey: KEY, baseURL: `${fake.url}/v1` },
  });
  const stored: Array<{ messages: unknown[] }> = [];
  const read = new Set<string>();
  let usage: TokenUsage = {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
  let compactions = 0;
  let error: string | null = null;
  try {
    for (const prompt of prompts) {
      const result = await runAgentTurn({
        model,
        system: buildSystemPrompt({
          repository: 'https://example.test/bench.git',
          branch: 'errand/job_bench',
        }),
        history: jobHistory(stored),
        prompt,
        tools: createRepoTools({ root: dir }),
        budgets: { maxSteps: 50, maxOutputTokens: opts.maxOutputTokens, timeoutMs: 600_000 },
        signal: new AbortController().signal,
        conversation: { windowTokens: opts.window, cacheKey: 'job_bench', managed },
        maxRetries: 0,
        onEvent: (e) => {
          if (e.type === 'context.compacted') compactions++;
          if (e.type === 'tool.call' && e.name === 'read_file') {
            const p = /^read_file (\S+?)(?::|$)/.exec(e.summary)?.[1];
            if (p) read.add(p);
          }
        },
      });
      usage = {
        inputTokens: usage.inputTokens + result.usage.inputTokens,
        outputTokens: usage.outputTokens + result.usage.outputTokens,
        cacheReadTokens: usage.cacheReadTokens + result.usage.cacheReadTokens,
        cacheWriteTokens: usage.cacheWriteTokens + result.usage.cacheWriteTokens,
      };
      // As the database keeps it.
      stored.push({ messages: JSON.parse(JSON.stringify(result.turnMessages)) as ModelMessage[] });
    }
    if (queue.length > 0) throw new Error(`${queue.length} scripted answers left`);
    if (fake.unexpected.length > 0) throw new Error(fake.unexpected.join('; '));
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  } finally {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  }
  const answered = fake.requests.filter((r) => !r.overflow);
  const sum = (f: (r: RecordedRequest) => number) => answered.reduce((n, r) => n + f(r), 0);
  const inputTokens = sum((r) => r.promptTokens ?? 0);
  const cacheReadTokens = sum((r) => r.cacheReadTokens);
  const largest = Math.max(...fake.requests.map((r) => r.promptTokens ?? 0));
  const distinct = [...read].reduce((n, p) => n + countTokens(files[p] ?? ''), 0);
  const uncached = inputTokens - cacheReadTokens;
  const prices = new ModelCatalog().info(PRICED[protocol]).prices;
  return {
    protocol,
    managed,
    completed: error === null,
    error,
    requests: fake.requests.length,
    summaries: fake.requests.filter(isSummary).length,
    overflows: fake.requests.filter((r) => r.overflow).length,
    compactions,
    largestRequestTokens: largest,
    largestShare: largest / opts.window,
    inputTokens,
    cacheReadTokens,
    cacheWriteTokens: sum((r) => r.cacheWriteTokens),
    outputTokens: usage.outputTokens,
    cachedShare: inputTokens === 0 ? 0 : cacheReadTokens / inputTokens,
    uncachedTokens: uncached,
    distinctContentTokens: distinct,
    uncachedMultiple: distinct === 0 ? 0 : uncached / distinct,
    costUsd: costOf(prices, {
      inputTokens,
      outputTokens: usage.outputTokens,
      cacheReadTokens,
      cacheWriteTokens: sum((r) => r.cacheWriteTokens),
    }),
  };
}

// --- the table ---

interface Row {
  key: 'largestShare' | 'cachedShare' | 'uncachedMultiple';
  title: string;
  target: string;
  met: (v: number) => boolean;
}

const ROWS: Row[] = [
  {
    key: 'largestShare',
    title: 'Largest request, as a share of the window',
    target: '≤ 0.9',
    met: (v) => v <= 0.9,
  },
  {
    key: 'cachedShare',
    title: 'Input tokens served from the prompt cache, as a share of all input',
    target: '≥ 0.7',
    met: (v) => v >= 0.7,
  },
  {
    key: 'uncachedMultiple',
    title: 'Uncached input tokens, as a multiple of the distinct content read',
    target: '≤ 1.5',
    met: (v) => v <= 1.5,
  },
];

/** What the first turn's steps do, counted from the script. */
function firstTurn(): string {
  const calls = (script().turns[0] ?? []).flatMap((a) => a.toolCalls ?? []);
  const count = (f: (c: { name: string; input: unknown }) => boolean) => calls.filter(f).length;
  const ranged = (c: { input: unknown }) =>
    (c.input as { startLine?: number }).startLine !== undefined;
  return `${calls.length} steps: ${count((c) => c.name === 'read_file' && !ranged(c))} files read whole, ${count((c) => c.name === 'read_file' && ranged(c))} partial re-reads, ${count((c) => c.name === 'search')} searches, ${count((c) => c.name === 'edit_file')} edits, a listing and a note written`;
}

function markdown(runs: RunFigures[], opts: Options, started: Date): string {
  const find = (p: Protocol, managed: boolean) =>
    runs.find((r) => r.protocol === p && r.managed === managed) as RunFigures;
  const f2 = (n: number) => n.toFixed(2);
  const int = (n: number) => Math.round(n).toLocaleString('en-US');
  const usd = (n: number | null) => (n === null ? 'unknown' : `$${n.toFixed(2)}`);
  const policy = windowPolicy(opts.window, opts.maxOutputTokens);
  const lines = [
    `One long job with the scripted model (\`node bench/conversation/run.ts\`, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC): ${firstTurn()} (files of 12–100 KB), then 10 follow-ups of 3 steps each (two reads, one edit); a ${int(opts.window)}-token window, ${int(opts.maxOutputTokens)} output tokens a reply; tokens counted as a quarter of the characters of the request as sent. Errand's thresholds at this window: results capped at ${int(policy.resultCapTokens)} tokens, masking past ${int(policy.maskAt)} keeping ${int(policy.keepToolTokens)}, compaction past ${int(policy.compactAt)}. "Without" is the same job with masking, caching hints and compaction off and no window enforced (its requests would be refused past 1.0).`,
    '',
    '| Figure | Protocol | Errand | Without masking, caching and compaction | Target | Met |',
    '|---|---|---|---|---|---|',
  ];
  for (const row of ROWS) {
    for (const p of ['anthropic', 'openai'] as const) {
      const on = find(p, true);
      const off = find(p, false);
      const ok = on.completed && row.met(on[row.key]);
      lines.push(
        `| ${row.title} | ${p} | ${f2(on[row.key])} | ${f2(off[row.key])} | ${row.target} | ${ok ? 'yes' : 'no'} |`,
      );
    }
  }
  for (const p of ['anthropic', 'openai'] as const) {
    const on = find(p, true);
    const off = find(p, false);
    lines.push(
      `| Reference: input tokens (cached) / model calls (summaries) / refusals for length, ${p} | ${p} | ${int(on.inputTokens)} (${int(on.cacheReadTokens)}) / ${on.requests} (${on.summaries}) / ${on.overflows} | ${int(off.inputTokens)} (${int(off.cacheReadTokens)}) / ${off.requests} (${off.summaries}) / ${off.overflows} | – | – |`,
      `| Reference: the job's cost at ${PRICED[p]}'s list prices | ${p} | ${usd(on.costUsd)} | ${usd(off.costUsd)} | – | – |`,
    );
  }
  lines.push(
    '',
    `Distinct content read: ${int(find('anthropic', true).distinctContentTokens)} tokens. ${
      runs.every((r) => r.completed)
        ? 'Every run completed.'
        : runs
            .filter((r) => !r.completed)
            .map((r) => `${r.protocol}${r.managed ? '' : ' without'}: ${r.error}`)
            .join('; ')
    }`,
  );
  return lines.join('\n');
}

const START = '<!-- bench:conversation:start -->';
const END = '<!-- bench:conversation:end -->';

async function writeTable(table: string): Promise<void> {
  const file = path.join(REPO_ROOT, 'docs', 'benchmarks.md');
  const text = await readFile(file, 'utf8');
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  if (a < 0 || b < a) throw new Error(`docs/benchmarks.md has no ${START} … ${END} markers`);
  await writeFile(file, `${text.slice(0, a + START.length)}\n${table}\n${text.slice(b)}`);
}

export async function main(argv: string[]): Promise<RunFigures[]> {
  const opts = parseArgs(argv);
  if (!opts) {
    process.stdout.write(HELP);
    return [];
  }
  const started = new Date();
  const runs: RunFigures[] = [];
  for (const protocol of ['anthropic', 'openai'] as const) {
    for (const managed of [true, false]) {
      const run = await runJob(protocol, managed, opts);
      process.stdout.write(
        `conversation ${protocol}${managed ? '' : ' (without)'}: largest ${run.largestShare.toFixed(2)}, cached ${run.cachedShare.toFixed(2)}, uncached ×${run.uncachedMultiple.toFixed(2)}${run.error ? `, error: ${run.error}` : ''}\n`,
      );
      runs.push(run);
    }
  }
  const table = markdown(runs, opts, started);
  process.stdout.write(`\n${table}\n`);
  const resultsDir = path.join(REPO_ROOT, 'bench', 'results');
  const resultsFile = path.join(
    resultsDir,
    `conversation-${started.toISOString().replaceAll(':', '-').replace('.', '-')}.json`,
  );
  await writeFile(
    resultsFile,
    `${JSON.stringify({ started, options: opts, runs }, null, 2)}\n`,
  ).catch(() => undefined);
  if (opts.readme && runs.every((r) => !r.managed || r.completed)) {
    await writeTable(table);
    process.stdout.write(
      'docs/benchmarks.md: the table between the bench:conversation markers was updated\n',
    );
  }
  return runs;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(
        `bench/conversation: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exit(1);
    },
  );
}
