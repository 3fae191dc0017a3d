// A real worker process for crash tests: `errand worker` with a scripted slow turn, so a test
// can SIGKILL it mid-turn. A prompt `sleep:MS` sets the length of a turn's first attempt. It writes
// `<markers>/started-<pid>-<job>-<seq>` when a turn starts, `aborted-…` when its signal
// aborts, and returns a summary naming its pid when the turn ends.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.ts';
import { startService } from '../../src/service.ts';

const markers = process.env.ERRAND_TEST_MARKERS ?? '';
const turnMs = Number(process.env.ERRAND_TEST_TURN_MS ?? '3000');

const service = await startService(loadConfig(), {
  api: false,
  worker: true,
  runner: {
    async run(input) {
      const name = `${process.pid}-${input.job.id}-${input.turn.seq}`;
      await writeFile(path.join(markers, `started-${name}`), '');
      // A turn run again (its first worker was killed) ends at once: only the kill takes time.
      const ms =
        input.turn.attempts > 1 ? 0 : Number(/^sleep:(\d+)/.exec(input.turn.prompt)?.[1] ?? turnMs);
      try {
        await sleep(ms, undefined, { signal: input.signal });
      } catch (err) {
        await writeFile(path.join(markers, `aborted-${name}`), String(Date.now()));
        throw err;
      }
      return { summary: `done by ${process.pid}` };
    },
  },
});
process.stdout.write('worker ready\n');
process.on('SIGTERM', () => {
  service.stop().then(() => process.exit(0));
});
