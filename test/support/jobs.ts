// The job calls of the end-to-end tests: create a job through the API and wait until it
// reaches a status; the sentinels that show no turn runs after a point.
import type { TurnOutcome } from '../../src/metrics/metrics.ts';
import { createJobId } from './route-cases.ts';
import type { ApiBody, TestService } from './service.ts';
import { waitFor } from './service.ts';

export { createJobId as createJob } from './route-cases.ts';

export interface UntilOptions {
  timeoutMs?: number;
  /** Fail at once, with the job's error, when it settles in another status. */
  failFast?: boolean;
}

/** Polls the job until its status is `status`; resolves with the job record. */
export function untilStatus(
  svc: TestService,
  projectId: string,
  jobId: string,
  status: string,
  { timeoutMs = 20_000, failFast = false }: UntilOptions = {},
): Promise<ApiBody> {
  return waitFor(
    `job ${jobId} to be ${status}`,
    async () => {
      const res = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
      if (res.json.status === status) return res.json;
      if (failFast && res.json.status !== 'active')
        throw new Error(`job ended ${res.json.status}: ${res.json.error}`);
      return undefined;
    },
    timeoutMs,
  );
}

/**
 * How many turns the service's workers are done with that ended with `outcome`: counted when
 * the worker has settled the turn and lets go of it, the last thing it does for a turn.
 */
export function turnsEnded(svc: TestService, outcome: TurnOutcome): Promise<number> {
  return svc.service.ctx.metrics.value('errand_turns_total', { outcome });
}

/**
 * The sentinel for "no turn runs after this": a new job with a follow-up queued behind it, run
 * to completion. A worker takes the oldest runnable turn first, and the follow-up is taken only
 * after the new job's first turn has ended, so by the time it has run, every turn that was
 * runnable when this was called has been taken (and its runner called) before it.
 */
export async function afterQueuedTurns(
  svc: TestService,
  projectId: string,
  prompts: readonly [string, string],
): Promise<void> {
  const jobId = await createJobId(svc, projectId, prompts[0]);
  const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
    body: { prompt: prompts[1] },
  });
  if (res.status !== 200) throw new Error(`the sentinel's follow-up: ${res.status} ${res.text}`);
  await waitFor(`the sentinel job ${jobId} to complete its two turns`, async () => {
    const job = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
    if (job.status === 'failed' || job.status === 'archived')
      throw new Error(`the sentinel job ended ${job.status}: ${job.error}`);
    return job.status === 'completed' && job.turns === 2 ? job : undefined;
  });
}
