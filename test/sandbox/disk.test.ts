// The sandbox's disk bounds, with real bubblewrap: the scratch file systems (/tmp with HOME in
// it, /dev/shm) are size-limited, /dev itself is read-only, and a command that grows the
// checkout past the run's bound is stopped (or, having finished, reported) with a clear note.
import assert from 'node:assert/strict';
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeTempDir, removeDir } from '../support/git.ts';
import { run, skip, TEST_LIMITS } from './support.ts';

let root: string;
let checkout: string;
before(async () => {
  if (skip) return;
  root = await makeTempDir('sandbox-disk');
  checkout = join(root, 'checkout');
  await mkdir(join(checkout, '.git'), { recursive: true });
});
after(async () => {
  if (root) await removeDir(root);
});

/** Writes `count` files of 1 MB each under `dir`, saying which one failed. */
const fill = (dir: string, count: number) =>
  `mkdir -p ${dir}; for i in $(seq 1 ${count}); do head -c 1048576 /dev/zero > ${dir}/f$i || { echo "failed at $i"; break; }; done`;

describe('scratch space', { skip }, () => {
  test('/tmp and HOME hold no more than the file-size limit: the next write fails with ENOSPC', async () => {
    // Each file is under the per-file limit (4 MB); together they pass the 4 MB scratch.
    const limits = { ...TEST_LIMITS, fileSizeMb: 4 };
    const tmp = await run(checkout, fill('/tmp/x', 6), { limits });
    assert.match(tmp.output, /No space left on device/);
    assert.match(tmp.output, /^failed at [45]$/m);
    const home = await run(checkout, fill('"$HOME/cache"', 6), { limits });
    assert.match(home.output, /No space left on device/);
    assert.match(home.output, /^failed at [45]$/m);
  });

  test('/dev/shm is bounded too, and /dev itself takes no files', async () => {
    const r = await run(checkout, `${fill('/dev/shm/x', 70)}; echo x > /dev/planted`, {
      limits: { ...TEST_LIMITS, fileSizeMb: 4 },
    });
    assert.match(r.output, /No space left on device/);
    assert.match(r.output, /^failed at 6[3-5]$/m);
    assert.match(r.output, /cannot create \/dev\/planted: Read-only file system/);
  });
});

describe('how much the checkout may grow', { skip }, () => {
  test('a command that stays within the bound: no note, and its files stay', async () => {
    const r = await run(checkout, fill('within', 2), { limits: { ...TEST_LIMITS, diskMb: 3 } });
    assert.equal(r.exitCode, 0, r.output);
    assert.equal(r.diskExceeded, undefined);
    assert.doesNotMatch(r.output, /errand:/);
    assert.equal((await stat(join(checkout, 'within', 'f2'))).size, 1048576);
  });

  test('a command that ends over the bound is reported, with a clear note', async () => {
    const r = await run(checkout, fill('over', 4), { limits: { ...TEST_LIMITS, diskMb: 2 } });
    assert.equal(r.exitCode, 0, r.output);
    // 4 MB of files and their directory's own blocks, rounded up.
    assert.equal(r.diskExceeded?.limitMb, 2);
    const grown = r.diskExceeded?.grownMb ?? 0;
    assert.ok(grown === 4 || grown === 5, `grew by ${grown} MB`);
    assert.ok(
      r.output.endsWith(`\n[errand: the checkout grew by ${grown} MB, over the limit of 2 MB]\n`),
      r.output,
    );
  });

  test('a command still writing is stopped once a measurement finds it over', async () => {
    // It would write for its whole time limit; the bound stops it well before.
    const r = await run(checkout, `${fill('runaway', 8)}; echo written; exec sleep 600`, {
      limits: { ...TEST_LIMITS, timeoutSeconds: 60, diskMb: 4 },
    });
    assert.equal(r.timedOut, false);
    assert.equal(r.exitCode, null);
    assert.equal(r.signal, 'SIGKILL');
    assert.match(r.output, /^written$/m);
    assert.ok(r.diskExceeded !== undefined && r.diskExceeded.grownMb >= 8, r.output);
    assert.match(r.output, /over the limit of 4 MB; the command was stopped\]/);
  });

  test('growth counts from where the run began, not the checkout as a whole', async () => {
    // The checkout already holds several MB from the tests above; a small write is fine.
    const r = await run(checkout, fill('small', 1), { limits: { ...TEST_LIMITS, diskMb: 2 } });
    assert.equal(r.diskExceeded, undefined, r.output);
  });

  test('a bound that is no whole number of MB is refused', async () => {
    await assert.rejects(
      run(checkout, 'true', { limits: { ...TEST_LIMITS, diskMb: 0 } }),
      /limit diskMb must be a whole number of at least 1/,
    );
  });
});
