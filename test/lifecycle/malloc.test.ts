// `errand serve` on the embedded database starts itself again once with glibc's trim threshold
// fixed (src/malloc.ts): the same process, listening, with the variable in its environment.
// Never over a value the user set.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, afterEach, before, describe, test } from 'node:test';
import { makeTempDir, removeDir } from '../support/git.ts';
import { killStrays, startServe } from '../support/process.ts';
import { http } from '../support/service.ts';

const VARIABLE = 'MALLOC_TRIM_THRESHOLD_';

async function environmentOf(pid: number | undefined): Promise<Map<string, string>> {
  assert.ok(pid !== undefined);
  const text = await readFile(`/proc/${pid}/environ`, 'latin1');
  return new Map(
    text
      .split('\0')
      .filter(Boolean)
      .map((entry) => {
        const at = entry.indexOf('=');
        return [entry.slice(0, at), entry.slice(at + 1)] as const;
      }),
  );
}

const linux = process.platform === 'linux';
if (!linux) process.stdout.write('# skipped malloc tests: they read /proc (Linux only)\n');

describe('serve and malloc trim threshold', { skip: !linux && 'needs Linux /proc' }, () => {
  let tmp: string;
  before(async () => {
    tmp = await makeTempDir('malloc');
  });
  afterEach(() => killStrays());
  after(async () => {
    killStrays();
    await removeDir(tmp);
  });

  test('embedded: the process that listens is the one started, with the threshold set', async () => {
    const serve = await startServe(`${tmp}/embedded`, ['--no-worker'], { [VARIABLE]: '' });
    try {
      const env = await environmentOf(serve.child.pid);
      assert.equal(env.get(VARIABLE), '131072');
      const ready = await http(serve.url, 'GET', '/readyz');
      assert.equal(ready.status, 200);
    } finally {
      assert.equal(await serve.stop(), 0);
    }
  });

  test('a value the user set is kept', async () => {
    const serve = await startServe(`${tmp}/user`, ['--no-worker'], { [VARIABLE]: '65536' });
    try {
      assert.equal((await environmentOf(serve.child.pid)).get(VARIABLE), '65536');
      assert.equal((await http(serve.url, 'GET', '/readyz')).status, 200);
    } finally {
      assert.equal(await serve.stop(), 0);
    }
  });
});
