// Secrets into a real bubblewrap sandbox (SandboxRun.secretEnv): the command reads each value
// byte for byte from its environment, with or without the setup network, while no process on
// the host has one on its command line, bwrap's own environment holds none, and nothing of them
// is left in a file of the checkout or of the sandbox, nor on an open descriptor.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { filesContaining, makeTempDir, processesContaining, removeDir } from '../support/git.ts';
import { childrenRunning, heldCommand, run, skip, skipNetwork } from './support.ts';

/** Values a shell would mangle if they were not one quoted word each. */
const TOKEN = `npm_${randomBytes(16).toString('hex')}`;
const AWKWARD = `it's "quoted" $HOME \`id\` \\ ${randomBytes(6).toString('hex')}\nsecond line\n\n`;
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

let root: string;
let checkout: string;
before(async () => {
  if (skip) return;
  root = await makeTempDir('sandbox-secrets');
  checkout = join(root, 'checkout');
  await mkdir(join(checkout, '.git'), { recursive: true });
});
after(async () => {
  if (root) await removeDir(root);
});

describe('secrets in the sandbox', { skip }, () => {
  test('the command reads every value byte for byte from its environment', async () => {
    const r = await run(
      checkout,
      'printf %s "$NPM_TOKEN" | sha256sum; printf %s "$AWKWARD" | sha256sum; echo "home=$HOME"',
      { secretEnv: { NPM_TOKEN: TOKEN, AWKWARD } },
    );
    assert.equal(r.exitCode, 0, r.output);
    assert.equal(r.output, `${sha(TOKEN)}  -\n${sha(AWKWARD)}  -\nhome=/tmp/home\n`);
  });

  test('the sandbox’s own variables and `env` keep their values over a secret’s', async () => {
    const r = await run(checkout, 'echo "$PATH|$HOME|$ENGINE_URL|$MINE"', {
      env: { ENGINE_URL: 'http://127.0.0.1:8787' },
      secretEnv: {
        PATH: '/evil',
        HOME: '/evil',
        ENGINE_URL: 'http://evil',
        MINE: TOKEN,
      },
    });
    assert.equal(
      r.output,
      `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|/tmp/home|http://127.0.0.1:8787|${TOKEN}\n`,
    );
  });

  test('no command line on the host, and not bwrap’s environment, holds a value', async () => {
    const held = heldCommand(checkout);
    const running = run(checkout, held.command, {
      secretEnv: { NPM_TOKEN: TOKEN },
      onStdoutLine: held.onStdoutLine,
    });
    await Promise.race([held.running, running]);
    const seen = await childrenRunning('bwrap');
    assert.ok(seen.length > 0, 'bwrap was not seen running');
    // While the command runs: every process of the host, the sandbox's own included.
    assert.deepEqual(await processesContaining(TOKEN), []);
    for (const pid of seen) {
      const environ = await readFile(`/proc/${pid}/environ`, 'utf8');
      assert.ok(!environ.includes(TOKEN), "a secret is in bwrap's environment");
    }
    await held.release();
    assert.equal((await running).exitCode, 0);
  });

  test('nothing is left behind: no file in the checkout or the sandbox, no open descriptor', async () => {
    const command =
      'ls /proc/self/fd; [ -z "$NPM_TOKEN" ] || grep -rlF "$NPM_TOKEN" /tmp /workspace /dev/shm /run 2>/dev/null; echo done';
    // What a command has open without secrets (what the host process holds open too).
    const baseline = await run(checkout, command);
    assert.match(baseline.output, /^0\n1\n2\n(\d+\n)*done\n$/);
    const r = await run(checkout, command, { secretEnv: { NPM_TOKEN: TOKEN } });
    assert.equal(r.output, baseline.output);
    assert.deepEqual(await filesContaining(checkout, TOKEN), []);
    assert.deepEqual(await readdir(checkout), ['.git']);
  });

  test('a name that is no environment variable’s, or a NUL in a value, runs nothing', async () => {
    await assert.rejects(
      run(checkout, 'touch ran', { secretEnv: { 'A B': TOKEN } }),
      /environment name "A B" is not valid/,
    );
    await assert.rejects(
      run(checkout, 'touch ran', { secretEnv: { A: `x\0y` } }),
      /environment value of A contains a NUL byte/,
    );
    assert.deepEqual(await readdir(checkout), ['.git']);
  });
});

describe('secrets with the setup network', { skip: skipNetwork }, () => {
  test('delivered beside the network’s descriptors, none left open', async () => {
    const command = 'printf %s "$NPM_TOKEN" | sha256sum; ls /proc/self/fd';
    const baseline = await run(checkout, command, { network: 'open' });
    const r = await run(checkout, command, { network: 'open', secretEnv: { NPM_TOKEN: TOKEN } });
    assert.equal(r.exitCode, 0, r.output);
    assert.equal(r.output, baseline.output.replace(sha(''), sha(TOKEN)));
  });
});
