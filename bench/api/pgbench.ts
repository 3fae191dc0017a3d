// The database bound: pgbench's select-only script (`-S`: one primary-key SELECT on
// pgbench_accounts per transaction) against the service's own PostgreSQL server (the embedded
// one through its socket), same client count.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { runCommand } from './children.ts';
import type { BenchDatabase } from './database.ts';

export interface PgbenchResult {
  tps: number;
  latencyAverageMs: number;
  transactions: number;
  clients: number;
  threads: number;
  durationSec: number;
  scale: number;
}

/** pgbench on PATH, else the newest /usr/lib/postgresql/<v>/bin/pgbench; undefined if none. */
export function findPgbench(explicit: string | undefined): string | undefined {
  if (explicit) return existsSync(explicit) ? explicit : undefined;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, 'pgbench'))) return path.join(dir, 'pgbench');
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const p = path.join(root, v, 'bin', 'pgbench');
    if (existsSync(p)) return p;
  }
  return undefined;
}

export function parse(output: string): { tps: number; latency: number; transactions: number } {
  const tps = /^tps = ([\d.]+)/m.exec(output);
  const latency = /^latency average = ([\d.]+) ms/m.exec(output);
  const tx = /^number of transactions actually processed: (\d+)/m.exec(output);
  if (!tps?.[1] || !latency?.[1]) throw new Error(`could not parse pgbench output:\n${output}`);
  return {
    tps: Number(tps[1]),
    latency: Number(latency[1]),
    transactions: tx?.[1] ? Number(tx[1]) : 0,
  };
}

export async function initPgbench(bin: string, db: BenchDatabase, scale: number): Promise<void> {
  await runCommand(bin, ['-i', '-q', '-s', String(scale), db.pgbench.database], {
    env: db.pgbench.env,
    timeoutMs: 120_000,
  });
}

export async function runPgbench(
  bin: string,
  db: BenchDatabase,
  opts: { clients: number; threads: number; durationSec: number; warmupSec: number; scale: number },
  hooks: { before?: () => void; after?: () => void } = {},
): Promise<PgbenchResult> {
  const base = ['-S', '-n', '-c', String(opts.clients), '-j', String(opts.threads)];
  const bound = (sec: number) => ({ env: db.pgbench.env, timeoutMs: (sec + 60) * 1000 });
  const database = db.pgbench.database;
  if (opts.warmupSec > 0)
    await runCommand(bin, [...base, '-T', String(opts.warmupSec), database], bound(opts.warmupSec));
  hooks.before?.();
  const { stdout } = await runCommand(
    bin,
    [...base, '-T', String(opts.durationSec), database],
    bound(opts.durationSec),
  );
  hooks.after?.();
  const r = parse(stdout);
  return {
    tps: Math.round(r.tps * 100) / 100,
    latencyAverageMs: r.latency,
    transactions: r.transactions,
    clients: opts.clients,
    threads: opts.threads,
    durationSec: opts.durationSec,
    scale: opts.scale,
  };
}
