// Setup commands resolve names where the host's resolver sits on its own loopback (systemd-
// resolved's 127.0.0.53), which the sandbox cannot reach: pasta maps the sandbox's resolver
// address to it, which the egress filter lets through for DNS. Seen from a network of the test's
// own (outside.ts), whose resolver on its loopback is the test's: a public name only that
// resolver knows resolves inside and is reached, and a public-looking name it resolves to the
// host's private network (DNS rebinding) is refused by the filter all the same, as root and as
// nobody.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NAMES, OUTSIDE, PORT, runOutside, skipOutside, TRY } from './outside.ts';
import { skipNetwork } from './support.ts';

describe('setup network, host resolver on its loopback', {
  skip: skipNetwork || skipOutside,
}, () => {
  for (const user of ['root', 'nobody'] as const) {
    test(`${user}: a name resolves through the resolver pasta maps; one resolving to the host's network is refused`, async (t) => {
      const r = await runOutside(
        [
          'cat /etc/resolv.conf',
          `getent ahostsv4 ${NAMES.public} | head -1`,
          `getent ahostsv4 ${NAMES.rebinding} | head -1`,
          `perl -e '${TRY}' ${NAMES.public},${PORT} ${NAMES.rebinding},${PORT}`,
        ].join('\n'),
        user,
      );
      if ('skipped' in r) return t.skip(r.skipped);
      const lines = r.output.split('\n');
      // The host's search domains and options, and only the address pasta maps.
      assert.deepEqual(lines.slice(0, 3), [
        'options edns0 trust-ad',
        'search corp.example',
        'nameserver 169.254.1.1',
      ]);
      assert.deepEqual(lines[3]?.split(/\s+/), [OUTSIDE.public, 'STREAM', NAMES.public]);
      assert.deepEqual(lines[4]?.split(/\s+/), [OUTSIDE.lan, 'STREAM', NAMES.rebinding]);
      // Resolved, then refused by the filter: without it, the test's server there would answer.
      assert.deepEqual(lines.slice(5), [
        `${NAMES.public},${PORT} answered`,
        `${NAMES.rebinding},${PORT} No route to host`,
        '',
      ]);
      assert.deepEqual(r.reached, [`${OUTSIDE.public} tcp`]);
      assert.deepEqual([...new Set(r.asked)].sort(), [NAMES.public, NAMES.rebinding].sort());
    });
  }
});
