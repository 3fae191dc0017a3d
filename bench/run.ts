// `npm run bench`: every benchmark with its default arguments, one after the other (they would
// disturb each other's figures if run at once). For options, run one directly, e.g.
// `node bench/api/run.ts --help`.
import { main as apiBench } from './api/run.ts';
import { main as conversationBench } from './conversation/run.ts';
import { main as environmentsBench } from './environments/run.ts';
import { main as perfBench } from './perf/run.ts';
import { main as streamsBench } from './streams/run.ts';
import { main as workerDeathBench } from './worker-death/run.ts';
import { runWorkspaceBench } from './workspace/prepare.ts';

try {
  await apiBench([]);
  const { markdown } = await runWorkspaceBench(undefined);
  process.stdout.write(`\n${markdown}\n`);
  await workerDeathBench([]);
  await streamsBench([]);
  // Issue 30's restore and follow-up figures (a 60 s setup runs once).
  process.stdout.write(`\n${await environmentsBench()}\n`);
  // Issue 21's figures with the scripted model; rewrites its table in docs/benchmarks.md.
  await conversationBench([]);
  // Issue 19's figures next to their limits; rewrites its table in docs/benchmarks.md.
  await perfBench([]);
  process.exit(0);
} catch (err) {
  process.stderr.write(
    `bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
}
