// Setup commands resolve names where the host's resolver sits on its own loopback (systemd-
// resolved's 127.0.0.53), which the sandbox cannot reach: pasta maps the sandbox's resolver
// address to it, which the egress filter lets through for DNS. A child process runs in a mount
// namespace whose /etc/resolv.conf names a fake DNS server of this test on 127.0.0.1:53; a name
// only that server knows resolves inside, and a name it resolves to 127.0.0.1 (DNS rebinding) is
// refused by the filter all the same.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { access, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { makeTempDir, removeDir } from '../support/git.ts';
import { skipNetwork } from './support.ts';

const execFileP = promisify(execFile);
const NAME = 'errand-resolver-check.test';
const ADDRESS = [192, 0, 2, 53];
/** A name the fake resolver answers with a loopback address. */
const LOOPBACK_NAME = 'errand-rebinding-check.test';

/** The question of a DNS query: its name (dotted) and type, and where the question ends. */
function question(query: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  for (let length = query[at] ?? 0; length > 0; length = query[at] ?? 0) {
    labels.push(query.subarray(at + 1, at + 1 + length).toString('ascii'));
    at += 1 + length;
  }
  return { name: labels.join('.'), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** A DNS server on 127.0.0.1:53 that knows two names (A records); the names it was asked. */
async function startFakeResolver(): Promise<{ asked: string[]; close: () => void }> {
  const socket = createSocket('udp4');
  const asked: string[] = [];
  socket.on('message', (query, peer) => {
    const q = question(query);
    asked.push(q.name);
    const address = { [NAME]: ADDRESS, [LOOPBACK_NAME]: [127, 0, 0, 1] }[q.name.toLowerCase()];
    const known = address !== undefined && q.type === 1;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    // A response, recursion desired and available; NXDOMAIN for a name it does not know.
    header.writeUInt16BE(address !== undefined ? 0x8180 : 0x8183, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(known ? 1 : 0, 6);
    const answer = known
      ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...address])
      : Buffer.alloc(0);
    socket.send(
      Buffer.concat([header, query.subarray(12, q.end), answer]),
      peer.port,
      peer.address,
    );
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(53, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  return { asked, close: () => socket.close() };
}

const why =
  skipNetwork ||
  (process.getuid?.() !== 0 && 'needs root: a mount namespace and port 53') ||
  (await access('/usr/bin/unshare').then(
    () => false,
    () => 'unshare (util-linux) is not installed',
  ));
if (why) console.log(`# resolver test skipped: ${why}`);

describe('setup network, host resolver on its loopback', { skip: why }, () => {
  let dir: string;
  let resolver: Awaited<ReturnType<typeof startFakeResolver>> | undefined;
  before(async () => {
    dir = await makeTempDir('sandbox-resolver');
    await mkdir(join(dir, 'checkout', '.git'), { recursive: true });
    await writeFile(
      join(dir, 'resolv.conf'),
      '# as systemd-resolved writes it\nnameserver 127.0.0.1\noptions edns0 trust-ad\nsearch corp.example\n',
    );
  });
  after(async () => {
    resolver?.close();
    await removeDir(dir);
  });

  test('a name resolves through the resolver pasta maps, and the sandbox sees only that one', async (t) => {
    try {
      resolver = await startFakeResolver();
    } catch (err) {
      return t.skip(`127.0.0.1:53 is taken here (${(err as NodeJS.ErrnoException).code})`);
    }
    const child = new URL('./resolver-child.ts', import.meta.url).pathname;
    const { stdout } = await execFileP(
      '/usr/bin/unshare',
      [
        '--mount',
        '--propagation',
        'private',
        'sh',
        '-c',
        'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"',
        'sh',
        join(dir, 'resolv.conf'),
        process.execPath,
        child,
        join(dir, 'checkout'),
        NAME,
        LOOPBACK_NAME,
      ],
      { timeout: 60_000 },
    );
    assert.equal(
      stdout.split('\n').slice(0, 3).join('\n'),
      'options edns0 trust-ad\nsearch corp.example\nnameserver 169.254.1.1',
    );
    assert.match(
      stdout,
      new RegExp(`^192\\.0\\.2\\.53\\s+STREAM\\s+${NAME.replace(/\./g, '\\.')}`, 'm'),
    );
    assert.ok(resolver.asked.includes(NAME), `asked: ${resolver.asked.join(', ')}`);
    // The public-looking name that resolves to loopback: resolved, then refused by the filter
    // (without it, the sandbox's own server there would answer).
    assert.match(stdout, /^127\.0\.0\.1\s+STREAM\s+errand-rebinding-check\.test$/m);
    assert.match(stdout, /^rebinding: No route to host$/m);
    assert.ok(resolver.asked.includes(LOOPBACK_NAME), `asked: ${resolver.asked.join(', ')}`);
  });
});
