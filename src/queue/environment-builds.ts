// The environment build queue on pg-boss, beside the turn queue and on the same instance: a
// project's environment (src/environments/) built in the background, so that the first job
// after a change starts warm. Requested when a project is created or its environment settings
// change, and by an admin's rebuild. `stately` keyed by project: one build of a project runs at a
// time and at most one more waits, which reads the project's settings when it starts, so a burst
// of changes is one build after the running one; a failed build holds back none after it. The
// builder finds a snapshot that is already there and builds nothing.
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import { ensureQueue, workEach } from './work.ts';

const ENVIRONMENT_BUILD_QUEUE = 'environment-builds';

/** Why a build was asked for: shown in its events and logs. */
export type EnvironmentBuildReason = 'created' | 'settings' | 'base-moved' | 'rebuild';

interface EnvironmentBuildMessage {
  projectId: string;
  reason: EnvironmentBuildReason;
}

export type EnvironmentBuildEntry = JobWithMetadata<EnvironmentBuildMessage>;

export class EnvironmentBuildQueue {
  readonly #boss: PgBoss;

  private constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  /** Creates the queue, or brings its options up to date, on TurnQueue.start's pg-boss. */
  static async create(boss: PgBoss, config: Config): Promise<EnvironmentBuildQueue> {
    await ensureQueue(
      boss,
      ENVIRONMENT_BUILD_QUEUE,
      {
        heartbeatSeconds: config.turn.heartbeatSeconds,
        // A build runs the project's setup, bounded like a turn's.
        expireInSeconds: config.turn.timeoutSeconds + 120,
        retryLimit: 2,
        retryDelay: 30,
        retryBackoff: true,
        deleteAfterSeconds: 7 * 86_400,
      },
      'stately',
    );
    return new EnvironmentBuildQueue(boss);
  }

  /**
   * Asks for a build of the project's environment. A build of it already waiting is the answer
   * too (pg-boss's `send` then writes nothing and gives no id): it has not started, so it reads
   * the settings this request was made for. Throws when the queue could not be written.
   */
  async request(projectId: string, reason: EnvironmentBuildReason): Promise<void> {
    const message: EnvironmentBuildMessage = { projectId, reason };
    await this.#boss.send(ENVIRONMENT_BUILD_QUEUE, message, { singletonKey: projectId });
  }

  /**
   * Runs `handler` for each build handed to this process, `concurrency` at a time, until
   * stopWork. A return completes the entry; a throw fails this attempt, to be retried.
   */
  async work(
    concurrency: number,
    handler: (entry: EnvironmentBuildEntry) => Promise<void>,
  ): Promise<void> {
    await workEach<EnvironmentBuildMessage>(
      this.#boss,
      ENVIRONMENT_BUILD_QUEUE,
      concurrency,
      handler,
    );
  }

  /** Stops taking builds, once the running ones have ended. */
  async stopWork(): Promise<void> {
    await this.#boss.offWork(ENVIRONMENT_BUILD_QUEUE, { wait: true });
  }
}
