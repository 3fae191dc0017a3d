// The process's Prometheus metrics, with the well-kept client library (prom-client). One
// registry per service, built at start-up and reached through the context: the API counts
// requests, workers count turns, model calls and forge calls; what lives in the database (jobs
// by status, the queue) and on disk (workspaces) is read when Prometheus scrapes.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Usage } from '../jobs/usage.ts';

/**
 * Brings gauges up to date at scrape time. It reports its own failures in its gauges (a
 * database that is down sets errand_database_up to 0) instead of failing the scrape.
 */
export type Sampler = () => Promise<void>;

/** How a turn attempt ended: done, failed for good, retried later, handed back undecided, or stopped by an archive. */
export type TurnOutcome = 'done' | 'failed' | 'retried' | 'interrupted' | 'archived';

/** A registry with Node's process metrics (CPU, memory, event loop, handles), named errand_*. */
function withDefaultMetrics(registry: Registry): Registry {
  collectDefaultMetrics({
    register: registry,
    prefix: 'errand_',
    eventLoopMonitoringPrecision: 20,
  });
  return registry;
}

export class Metrics {
  // Registered in this order, after the process's default metrics.
  readonly registry = withDefaultMetrics(new Registry());
  readonly httpRequests: Counter<'method' | 'route' | 'status'> = new Counter({
    name: 'errand_http_requests_total',
    help: 'HTTP requests answered, by route template and status',
    labelNames: ['method', 'route', 'status'],
    registers: [this.registry],
  });
  readonly httpDuration: Histogram<'method' | 'route' | 'status'> = new Histogram({
    name: 'errand_http_request_duration_seconds',
    help: 'Time from the request to the end of its response',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly turns: Counter<'outcome'> = new Counter({
    name: 'errand_turns_total',
    help: 'Turn attempts by outcome: done, failed (for good), retried (after a backoff), interrupted (handed back to the queue), archived',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly turnDuration: Histogram<'outcome'> = new Histogram({
    name: 'errand_turn_duration_seconds',
    help: 'Wall time of a turn attempt, by outcome',
    labelNames: ['outcome'],
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600],
    registers: [this.registry],
  });
  readonly modelCalls: Counter<'provider'> = new Counter({
    name: 'errand_model_calls_total',
    help: 'Model calls (agent steps) by provider',
    labelNames: ['provider'],
    registers: [this.registry],
  });
  readonly modelTokens: Counter<'provider' | 'kind'> = new Counter({
    name: 'errand_model_tokens_total',
    help: 'Model tokens by provider and kind: input (all of it), output, and of the input cache_read (served from the prompt cache) and cache_write (written to it)',
    labelNames: ['provider', 'kind'],
    registers: [this.registry],
  });
  readonly modelCost: Counter<'provider' | 'model'> = new Counter({
    name: 'errand_model_cost_usd_total',
    help: "Estimated cost of model calls in US dollars, at the model's list prices, by provider and model (calls of a model without a known price are not in it: see errand_model_unpriced_calls_total)",
    labelNames: ['provider', 'model'],
    registers: [this.registry],
  });
  readonly modelUnpriced: Counter<'provider' | 'model'> = new Counter({
    name: 'errand_model_unpriced_calls_total',
    help: 'Model calls whose cost is unknown (the model has no known price), by provider and model',
    labelNames: ['provider', 'model'],
    registers: [this.registry],
  });
  readonly modelErrors: Counter<'provider'> = new Counter({
    name: 'errand_model_errors_total',
    help: 'Turn attempts that ended in a model error, by provider',
    labelNames: ['provider'],
    registers: [this.registry],
  });
  readonly forgeCalls: Counter<'forge'> = new Counter({
    name: 'errand_forge_calls_total',
    help: 'Forge API calls by forge',
    labelNames: ['forge'],
    registers: [this.registry],
  });
  readonly forgeErrors: Counter<'forge'> = new Counter({
    name: 'errand_forge_errors_total',
    help: 'Forge API calls that failed (network error or an answer of 4xx/5xx), by forge',
    labelNames: ['forge'],
    registers: [this.registry],
  });
  readonly jobs: Gauge<'status'> = new Gauge({
    name: 'errand_jobs',
    help: 'Jobs by status (read from the database at scrape time)',
    labelNames: ['status'],
    registers: [this.registry],
  });
  readonly queuedTurns: Gauge = new Gauge({
    name: 'errand_turns_queued',
    help: 'Turns accepted and not started yet',
    registers: [this.registry],
  });
  readonly oldestQueuedSeconds: Gauge = new Gauge({
    name: 'errand_turn_oldest_queued_age_seconds',
    help: 'Age of the oldest turn not started yet (0 when none)',
    registers: [this.registry],
  });
  readonly workspaceBytes: Gauge<'kind'> = new Gauge({
    name: 'errand_workspace_bytes',
    help: "Disk used by this machine's workspaces: job clones (jobs) and project mirrors (mirrors)",
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly environmentRestores: Counter<'result'> = new Counter({
    name: 'errand_environment_restores_total',
    help: "Turns with a setup command by whether this worker had the environment's snapshot: hit (restored) or miss (the setup ran)",
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly environmentRestoreDuration: Histogram<'from'> = new Histogram({
    name: 'errand_environment_restore_seconds',
    help: 'Time to put a snapshot into a checkout, by source: a ready spare copy (spare) or a copy made while the turn waited (copy)',
    labelNames: ['from'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly environmentBuilds: Counter<'outcome'> = new Counter({
    name: 'errand_environment_builds_total',
    help: 'Setup runs that could make a snapshot, by outcome: kept, not_kept (it held a setup-only secret, or was larger than the cache) or failed (the setup did not exit 0)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly environmentBytes: Gauge<'kind'> = new Gauge({
    name: 'errand_environment_bytes',
    help: "Disk used by this worker's environments: snapshots, their spare copies (spares) and the projects' package caches (homes)",
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly environmentSnapshots: Gauge = new Gauge({
    name: 'errand_environment_snapshots',
    help: 'Environment snapshots this worker keeps',
    registers: [this.registry],
  });
  readonly workspaceCount: Gauge<'kind'> = new Gauge({
    name: 'errand_workspaces',
    help: "Job clones (jobs) and project mirrors (mirrors) on this machine's disk",
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly databaseUp: Gauge = new Gauge({
    name: 'errand_database_up',
    help: '1 when the last scrape could read the database in time, else 0',
    registers: [this.registry],
  });
  readonly webhookDeliveries: Counter<'outcome'> = new Counter({
    name: 'errand_webhook_deliveries_total',
    help: 'Webhook deliveries handled, by outcome: delivered, retried (an attempt failed), failed (given up, or the webhook disabled), skipped (nothing left to send)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly webhookAttemptDuration: Histogram<'result'> = new Histogram({
    name: 'errand_webhook_attempt_duration_seconds',
    help: 'Time of a webhook delivery attempt, from connect to the answer, by result (ok: 2xx, error)',
    labelNames: ['result'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly eventStreams: Gauge = new Gauge({
    name: 'errand_event_streams',
    help: 'Live event streams (Server-Sent Events) open on this process',
    registers: [this.registry],
  });
  readonly eventStreamBuffered: Gauge = new Gauge({
    name: 'errand_event_stream_buffered_bytes',
    help: 'Bytes written to open event streams that their readers have not taken yet',
    registers: [this.registry],
  });
  readonly sandboxAvailable: Gauge<'reason'> = new Gauge({
    name: 'errand_sandbox_available',
    help: "1 when this worker's sandbox (bubblewrap) works, else 0 with the reason as a label; workers only",
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly sandboxRunBounds: Gauge<'controller'> = new Gauge({
    name: 'errand_sandbox_run_bounds',
    help: "1 when each sandboxed run of this worker gets a control group of its own for the controller (memory, pids), so that the kernel stops one run's overrun at its bound; else 0: memory watched every 200 ms (an overrun stopped once seen), processes bounded per process or not at all; workers only",
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly #samplers: Sampler[] = [];

  /** Adds a reading taken at every scrape (database gauges, workspace disk use). */
  sample(sampler: Sampler): void {
    this.#samplers.push(sampler);
  }

  /** The Prometheus text exposition of every metric. */
  async render(): Promise<{ contentType: string; body: string }> {
    await Promise.all(this.#samplers.map((s) => s()));
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** `fetch` for a forge's client that counts its calls, and the ones that failed or got 4xx/5xx. */
  forgeFetch(
    forge: string,
    inner: typeof globalThis.fetch = globalThis.fetch,
  ): typeof globalThis.fetch {
    return async (input, init) => {
      this.forgeCalls.inc({ forge });
      try {
        const response = await inner(input, init);
        if (response.status >= 400) this.forgeErrors.inc({ forge });
        return response;
      } catch (err) {
        this.forgeErrors.inc({ forge });
        throw err;
      }
    };
  }

  /**
   * A model step's usage, by provider (`provider:model` ids name it first), and its cost by
   * model when it is priced (ModelRegistry.usage gives both).
   */
  modelStep(model: string, usage: Usage): void {
    const provider = providerOf(model);
    this.modelCalls.inc({ provider });
    this.modelTokens.inc({ provider, kind: 'input' }, usage.inputTokens);
    this.modelTokens.inc({ provider, kind: 'output' }, usage.outputTokens);
    this.modelTokens.inc({ provider, kind: 'cache_read' }, usage.cacheReadTokens);
    this.modelTokens.inc({ provider, kind: 'cache_write' }, usage.cacheWriteTokens);
    const labels = { provider, model: modelOf(model) };
    if (usage.costUsd === null) this.modelUnpriced.inc(labels);
    else this.modelCost.inc(labels, usage.costUsd);
  }

  modelError(model: string): void {
    this.modelErrors.inc({ provider: providerOf(model) });
  }

  /** A counter's or gauge's value summed over the series that match `labels` (0 if none). */
  async value(name: string, labels: Readonly<Record<string, string>> = {}): Promise<number> {
    const metric = this.registry.getSingleMetric(name);
    if (!metric) throw new Error(`no metric named ${name}`);
    const { values } = await metric.get();
    return values
      .filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))
      .reduce((sum, v) => sum + v.value, 0);
  }
}

function providerOf(model: string): string {
  const i = model.indexOf(':');
  return i > 0 ? model.slice(0, i) : 'unknown';
}

// The model's name without its provider. Only models a provider answered reach a metric, so
// the label's values are the models really in use.
function modelOf(model: string): string {
  const i = model.indexOf(':');
  return i > 0 ? model.slice(i + 1) : model;
}
