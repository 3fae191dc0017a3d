// `npm run bench`: every benchmark with its default arguments. For options, run one directly,
// e.g. `node bench/api/run.ts --help`.
import { main as apiBench } from './api/run.ts';

try {
  await apiBench([]);
  process.exit(0);
} catch (err) {
  process.stderr.write(
    `bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
}
