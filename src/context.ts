// Everything a handler or service needs, built once at start-up and passed down: handlers
// never build their own clients.
import type { ModelRegistry } from './agent/models.ts';
import type { AuditSink } from './audit/audit.ts';
import type { Config } from './config.ts';
import type { DatabaseHandle, Db } from './db/database.ts';
import type { Environments } from './environments/environments.ts';
import type { Forges } from './forges/clients.ts';
import type { TurnAborts } from './jobs/aborts.ts';
import type { AttachmentReader } from './jobs/attachments.ts';
import type { EventNotifications } from './jobs/notifications.ts';
import type { Transitions } from './jobs/transitions.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics/metrics.ts';
import type { EngineInstalls } from './projects/engine.ts';
import type { TurnQueue } from './queue/queue.ts';

export interface AppContext {
  config: Config;
  db: Db;
  /** Named prepared statements for the hot path (see DatabaseHandle.prepared). */
  prepared: DatabaseHandle['prepared'];
  log: Logger;
  queue: TurnQueue;
  /** Running turns of this process, so an archive can stop them without waiting for a heartbeat. */
  aborts: TurnAborts;
  /**
   * The job core's listeners, registered in service.ts: hooks that run in each transition's
   * transaction (the webhook outbox), and subscribers told after it commits (the janitor).
   */
  transitions: Transitions;
  /** The forge providers, and each project's client for the turns that open pull requests. */
  forges: Forges;
  /** The models turns run on, and the check of a model id before a job is accepted. */
  models: ModelRegistry;
  /**
   * Hears of events committed to any job's log, by any process (the live stream, and the
   * janitor for other processes' archives).
   */
  notifications: EventNotifications;
  /** This process's Prometheus metrics. */
  metrics: Metrics;
  /** The agent engines installed on this machine (src/engines/catalog.ts). */
  engines: EngineInstalls;
  /** Hears of the audit rows once committed: the JSON-lines stream (ERRAND_AUDIT_LOG). */
  audit: AuditSink;
  /** This worker's environment snapshots (src/environments/): what turns restore or build. */
  environments: Environments;
  /** Reads the images a create or a message gives (src/features/attachments/). */
  attachments: AttachmentReader;
}
