// The job core's tests share this: a service without API or workers on a fresh database, one
// project, and a subscriber that records every transition it hears with the job's status it
// read back at once (an announcement made inside the transaction would read the old row).
import { after, before, beforeEach } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import type { JobStatus, ProjectRow } from '../../src/db/schema.ts';
import { toJobRecord } from '../../src/jobs/record.ts';
import type { Transition } from '../../src/jobs/transitions.ts';
import type { JobRecord } from '../../src/records/job.ts';
import { type RunningService, startService } from '../../src/service.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { testEnv } from './service.ts';

/** A transition as a subscriber heard it, and the job's status it read once it was told. */
export interface Heard {
  transition: Transition;
  statusSeen: JobStatus | undefined;
}

export interface Lifecycle {
  /** Set once the suite's `before` has run. */
  svc: RunningService;
  project: ProjectRow;
  /** What the subscriber heard since the last call (or the test's start), once its reads are done. */
  takeHeard(): Promise<Heard[]>;
  /**
   * Resolves once the subscriber has read back the status of every transition heard so far:
   * called between transitions, so that each read sees its own transition and not a later one.
   */
  settled(): Promise<void>;
  eventsOf(jobId: string): Promise<{ turn: number | null; type: string; data: unknown }[]>;
  turnOf(jobId: string, seq: number): ReturnType<typeof turnRow>;
  jobOf(jobId: string): ReturnType<typeof jobRow>;
  /** The job's record as GET renders it now (the same function over the same row). */
  recordOf(jobId: string): Promise<JobRecord>;
}

function turnRow(svc: RunningService, jobId: string, seq: number) {
  return svc.ctx.db
    .selectFrom('turns')
    .selectAll()
    .where('job_id', '=', jobId)
    .where('seq', '=', seq)
    .executeTakeFirstOrThrow();
}

function jobRow(svc: RunningService, jobId: string) {
  return svc.ctx.db
    .selectFrom('jobs')
    .selectAll()
    .where('id', '=', jobId)
    .executeTakeFirstOrThrow();
}

/** Registers the suite's hooks (call it inside `describe`, before its own hooks). */
export function useLifecycle(): Lifecycle {
  let database: TestDatabase | undefined;
  let service: RunningService | undefined;
  let row: ProjectRow | undefined;
  let heard: Heard[] = [];
  let reads: Promise<void>[] = [];
  let unsubscribe: (() => void) | undefined;
  const started = () => {
    if (!service) throw new Error('the lifecycle suite has not started');
    return service;
  };

  before(async () => {
    database = await createTestDatabase();
    service = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
    const { db } = service.ctx;
    row = await db
      .insertInto('projects')
      .values({
        id: 'prj_lifecycle00000000000',
        name: 'p',
        repository: database.dataDir,
        ref: 'main',
        model: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    unsubscribe = service.ctx.transitions.subscribe((transition) => {
      const entry: Heard = { transition, statusSeen: undefined };
      heard.push(entry);
      const read = db
        .selectFrom('jobs')
        .select('status')
        .where('id', '=', transition.jobId)
        .executeTakeFirst()
        .then((found) => {
          entry.statusSeen = found?.status;
        });
      reads.push(read);
      return read;
    });
  });
  after(async () => {
    unsubscribe?.();
    await service?.stop();
    await database?.drop();
  });
  beforeEach(() => {
    heard = [];
    reads = [];
  });

  return {
    get svc() {
      return started();
    },
    get project() {
      if (!row) throw new Error('the lifecycle suite has not started');
      return row;
    },
    async settled() {
      await Promise.all(reads);
    },
    async takeHeard() {
      await Promise.all(reads);
      const taken = heard;
      heard = [];
      reads = [];
      return taken;
    },
    eventsOf: (jobId) =>
      started()
        .ctx.db.selectFrom('events')
        .select(['turn', 'type', 'data'])
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute(),
    turnOf: (jobId, seq) => turnRow(started(), jobId, seq),
    jobOf: (jobId) => jobRow(started(), jobId),
    recordOf: async (jobId) => toJobRecord(await jobRow(started(), jobId)),
  };
}
