// Works off the forge-events queue in the processes that run turns: each event goes to the
// intake (intake.ts), which accepts turns and answers on the forge. The turns it accepted are
// answered when they end: at once by the process that ends them (it hears the transition), and
// by a periodic pass for those a stopped process never answered.

import type { TurnQueue } from '../../queue/queue.ts';
import { ForgeIntake, type IntakeContext, type IntakeOptions } from './intake.ts';

export interface ForgeWorkerContext extends IntakeContext {
  queue: IntakeContext['queue'] & Pick<TurnQueue, 'forgeEvents'>;
}

export interface ForgeWorker {
  stop(): Promise<void>;
}

/** How often the answers a stopped process owed are looked for. */
const MISSED_INTERVAL_MS = 10_000;
/** Events handled at once by this process: each is a few forge calls and one transaction. */
const CONCURRENCY = 4;

/**
 * `publicUrl`: where users reach Errand, for the links to jobs in the answers; `options`: the
 * intake's clock (tests).
 */
export async function startForgeWorker(
  ctx: ForgeWorkerContext,
  publicUrl: string,
  options: IntakeOptions = {},
): Promise<ForgeWorker> {
  const intake = new ForgeIntake(ctx, publicUrl, options);
  // The answers under way, awaited by stop: one cut off by the database closing would keep its
  // claim (forge_replies) and never be given, by this process or another.
  const answering = new Set<Promise<void>>();
  const unsubscribe = ctx.transitions.subscribe((t) => {
    if ((t.type !== 'turn.finished' && t.type !== 'turn.failed') || t.turn === null) return;
    const pending = intake.answerTurn(t.jobId, t.turn);
    const settled = () => {
      answering.delete(pending);
    };
    answering.add(pending);
    pending.then(settled, settled);
    // Its failure is logged by the transitions, and the periodic pass tries again.
    return pending;
  });
  await ctx.queue.forgeEvents.work(CONCURRENCY, (entry) => intake.handle(entry.data));
  let missed: Promise<void> | undefined;
  const timer = setInterval(() => {
    // One pass at a time: with a slow forge, passes would pile up on the same turns.
    missed ??= intake
      .answerMissed()
      .catch((err: unknown) => ctx.log.error({ err }, 'looking for missed forge answers failed'))
      .finally(() => {
        missed = undefined;
      });
  }, MISSED_INTERVAL_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      unsubscribe();
      await ctx.queue.forgeEvents.stopWork();
      await missed;
      if (answering.size > 0) {
        // Said, so that a stop held by a slow forge is seen for what it is.
        ctx.log.info({ answers: answering.size }, 'stopping waits for the forge answers under way');
        await Promise.allSettled(answering);
      }
    },
  };
}
