// wait_for_job: blocks until a job settles or a timeout passes, so a model need not poll.
// MCP clients bound a tool call's time (60 s by default in the SDK's client), so the default
// wait stays under that; progress notifications let clients that reset their timeout on
// progress wait longer.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { type Clock, ErrandError, type Job } from '../../client/index.ts';
import { attempt, describeJob, result } from '../results.ts';
import { jobIdField, projectIdField, projectOf, type RegisterTool, STATUS_GUIDE } from '../tool.ts';

const MAX_WAIT_SECONDS = 600;
const DEFAULT_WAIT_SECONDS = 45;
const HEARTBEAT_MS = 10_000;
/** No progress in the wait's last second: its result follows (see progress below). */
const LAST_SECOND_MS = 1000;

const realClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    await sleep(ms, undefined, signal ? { signal } : {});
  },
};

const DESCRIPTION = `Wait for an Errand job to finish: blocks until its status is completed, failed or archived, or until timeoutSeconds pass (default ${DEFAULT_WAIT_SECONDS}, at most ${MAX_WAIT_SECONDS}), then returns the job record.

Use it after create_job or send_message instead of calling get_job repeatedly. If the job is still active when the time is up, it returns the current record and says so: that is not an error, the job keeps running; call wait_for_job again to keep waiting, or tell the user it is still in progress. Agent work often takes several minutes.

When it returns "completed", prLink holds the pull request's URL to give the user (null if the agent changed no files). When it returns "failed", error says why.

${STATUS_GUIDE}`;

export const registerWaitForJob: RegisterTool = (server, deps) => {
  server.registerTool(
    'wait_for_job',
    {
      title: 'Wait for an Errand job to finish',
      description: DESCRIPTION,
      inputSchema: {
        jobId: jobIdField,
        projectId: projectIdField(deps),
        timeoutSeconds: z
          .number()
          .int()
          .min(1)
          .max(MAX_WAIT_SECONDS)
          .default(DEFAULT_WAIT_SECONDS)
          .describe(
            `How long to wait at most, in seconds (1–${MAX_WAIT_SECONDS}, default ${DEFAULT_WAIT_SECONDS}). Longer waits need an MCP client that allows long tool calls.`,
          ),
      },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    ({ jobId, projectId, timeoutSeconds }, extra) =>
      attempt(async (): Promise<CallToolResult> => {
        const project = projectOf(deps, projectId);
        const clock = deps.clock ?? realClock;
        const started = clock.now();
        const token = extra._meta?.progressToken;
        let status = 'unknown';
        let reported = 0;
        // The notifications sent so far, in order: the result goes after the last of them.
        let sent: Promise<void> = Promise.resolve();
        // Progress tells of a wait that goes on, never of its end, which the result tells: the
        // MCP SDK's client (1.x) handles a notification a tick after a response that arrives
        // with it, finds its request answered and reports an unknown progress token, and a
        // client may close the connection on that error (modelcontextprotocol/typescript-sdk
        // issue 2580). So no notification for a change that ends the wait, nor in its last
        // second.
        const progress = () => {
          if (token === undefined) return;
          if (clock.now() - started > timeoutSeconds * 1000 - LAST_SECOND_MS) return;
          // Progress must grow at each notification, also for two within a millisecond.
          reported = Math.max(reported + 0.001, (clock.now() - started) / 1000);
          const notification = {
            method: 'notifications/progress' as const,
            params: {
              progressToken: token,
              progress: reported,
              total: timeoutSeconds,
              message: `job ${jobId} is ${status} after ${Math.floor(reported)} s`,
            },
          };
          sent = sent
            .then(() => extra.sendNotification(notification))
            .catch(() => {
              // The client went away; the wait ends with its request.
            });
        };
        const ended = new AbortController();
        const heartbeat = (async () => {
          // Ends when the wait does: its sleep rejects with the abort, which is not an error.
          while (
            await clock.sleep(HEARTBEAT_MS, ended.signal).then(
              () => true,
              () => false,
            )
          )
            progress();
        })();
        try {
          const job = await deps.client.waitForJob(jobId, {
            projectId: project,
            signal: extra.signal,
            timeoutMs: timeoutSeconds * 1000,
            onChange: (changed: Job) => {
              status = changed.status;
              if (changed.status === 'active') progress();
            },
          });
          return result(describeJob(job), job);
        } catch (err) {
          if (!(err instanceof ErrandError) || err.code !== 'timeout') throw err;
          const job = await deps.client.getJob(jobId, { projectId: project, signal: extra.signal });
          if (job.status !== 'active') {
            return result(describeJob(job), job);
          }
          return result(
            `Job ${job.id} is still active after ${timeoutSeconds} s (turn ${job.turns}); the wait timed out but the job keeps running. Call wait_for_job again to keep waiting.`,
            job,
          );
        } finally {
          ended.abort();
          await heartbeat;
          await sent;
        }
      }),
  );
};
