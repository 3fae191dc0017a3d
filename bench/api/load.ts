// A typed wrapper around autocannon's programmatic API (the package ships no types): one
// warm-up, then one measurement, reduced to the numbers the benchmark reports.
import { createRequire } from 'node:module';

interface Histogram {
  average: number;
  stddev: number;
  min: number;
  max: number;
  p50: number;
  p90: number;
  p99: number;
}

interface AutocannonResult {
  requests: Histogram & { total: number; sent: number };
  latency: Histogram;
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
}

interface AutocannonOptions {
  url: string;
  connections: number;
  duration: number;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  timeout: number;
}

interface AutocannonInstance extends PromiseLike<AutocannonResult> {
  stop(): void;
}

type Autocannon = (opts: AutocannonOptions) => AutocannonInstance;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

export interface LoadTarget {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

export interface Measurement {
  /** Successful (2xx) responses per second over the measured interval. */
  reqPerSec: number;
  latencyMs: { average: number; p50: number; p90: number; p99: number; max: number };
  requests: number;
  /** Requests completed during the warm-up (not part of the other numbers). */
  warmupRequests: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  durationSec: number;
  connections: number;
}

async function fire(
  target: LoadTarget,
  connections: number,
  duration: number,
): Promise<AutocannonResult> {
  const instance = autocannon({
    url: target.url,
    method: target.method,
    headers: target.headers,
    ...(target.body !== undefined ? { body: target.body } : {}),
    connections,
    duration,
    timeout: 10,
  });
  // autocannon ends on its own after `duration`; the guard only bounds a hung run.
  let guard: NodeJS.Timeout | undefined;
  const bounded = new Promise<never>((_, reject) => {
    guard = setTimeout(
      () => {
        instance.stop();
        reject(new Error(`autocannon did not finish within ${duration + 30} s`));
      },
      (duration + 30) * 1000,
    );
  });
  try {
    return await Promise.race([Promise.resolve(instance), bounded]);
  } finally {
    clearTimeout(guard);
  }
}

/**
 * Warms the target up for `warmupSec`, then measures it for `durationSec`; `hooks` run right
 * before and right after the measurement proper (not the warm-up).
 */
export async function measure(
  target: LoadTarget,
  opts: { connections: number; durationSec: number; warmupSec: number },
  hooks: { before?: () => void; after?: () => void } = {},
): Promise<Measurement> {
  const warmup =
    opts.warmupSec > 0 ? await fire(target, opts.connections, opts.warmupSec) : undefined;
  hooks.before?.();
  const r = await fire(target, opts.connections, opts.durationSec);
  hooks.after?.();
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(r.statusCodeStats)) statusCodes[code] = count;
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    reqPerSec: round(r['2xx'] / r.duration),
    latencyMs: {
      average: round(r.latency.average),
      p50: r.latency.p50,
      p90: r.latency.p90,
      p99: r.latency.p99,
      max: r.latency.max,
    },
    requests: r.requests.total,
    warmupRequests: warmup?.requests.total ?? 0,
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    durationSec: r.duration,
    connections: opts.connections,
  };
}
