// The job calls of the end-to-end tests: create a job through the API and wait until it
// reaches a status.
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
