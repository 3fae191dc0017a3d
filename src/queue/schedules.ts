// The schedules' queue on pg-boss, beside the turn queue and on the same instance. pg-boss's
// scheduler is what makes a schedule fire once per occurrence however many processes run: each
// process's cron pass claims the pass itself (one process at a time) and files an occurrence under
// a singleton slot, so one queue entry per schedule and occurrence reaches a worker. What the
// entry does (a job through createJob) is src/features/schedules/'s.
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import { errorMessage } from '../errors.ts';
import { ensureQueue, workEach } from './work.ts';

const SCHEDULE_QUEUE = 'schedules';

/** What a firing's entry carries: the schedule it is for. */
interface ScheduleMessage {
  scheduleId: string;
}

/** A firing as the queue hands it to a worker; its id is the firing's identity. */
export type ScheduleEntry = JobWithMetadata<ScheduleMessage>;

/** A schedule's recurrence as pg-boss evaluates it: a cron expression in an IANA time zone. */
export interface Recurrence {
  cron: string;
  timezone: string;
}

export class ScheduleQueue {
  readonly #boss: PgBoss;

  private constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  /** Creates the queue, or brings its options up to date, on TurnQueue.start's pg-boss. */
  static async create(boss: PgBoss): Promise<ScheduleQueue> {
    const options = {
      notify: true,
      // A firing is a transaction or two; its claim row makes a second delivery a no-op, so a
      // retry after a dead worker is safe.
      heartbeatSeconds: 30,
      expireInSeconds: 120,
      retryLimit: 3,
      retryDelay: 5,
      deleteAfterSeconds: 7 * 86_400,
    };
    await ensureQueue(boss, SCHEDULE_QUEUE, options, 'standard');
    return new ScheduleQueue(boss);
  }

  /**
   * Why pg-boss's scheduler would refuse the recurrence (an expression it cannot read, a time
   * zone that is not IANA's), or undefined when it takes it.
   */
  refusal({ cron, timezone }: Recurrence): string | undefined {
    try {
      this.#boss.previewSchedule(cron, { tz: timezone, count: 1 });
      return undefined;
    } catch (err) {
      return errorMessage(err);
    }
  }

  /** Fires the schedule at each occurrence from now on (replacing what it fired on before). */
  async schedule(scheduleId: string, recurrence: Recurrence): Promise<void> {
    const message: ScheduleMessage = { scheduleId };
    await this.#boss.schedule(SCHEDULE_QUEUE, recurrence.cron, message, {
      tz: recurrence.timezone,
      key: scheduleId,
    });
  }

  /** Stops the schedule's firings (paused or deleted). */
  async unschedule(scheduleId: string): Promise<void> {
    await this.#boss.unschedule(SCHEDULE_QUEUE, scheduleId);
  }

  /** The ids of the schedules pg-boss's scheduler fires. */
  async scheduled(): Promise<string[]> {
    return (await this.#boss.getSchedules(SCHEDULE_QUEUE)).map((s) => s.key);
  }

  /** Runs `handler` for each firing handed to this process until stopWork; a throw retries it. */
  async work(concurrency: number, handler: (entry: ScheduleEntry) => Promise<void>): Promise<void> {
    await workEach<ScheduleMessage>(this.#boss, SCHEDULE_QUEUE, concurrency, handler);
  }

  /** Stops taking firings, once the running ones have ended. */
  async stopWork(): Promise<void> {
    await this.#boss.offWork(SCHEDULE_QUEUE, { wait: true });
  }
}
