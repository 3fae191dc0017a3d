// A run with an allowlist, seen from a network of the test's own (outside.ts), as root and as
// nobody: the sandbox has no network but its own loopback and the egress proxy (HTTP_PROXY and
// HTTPS_PROXY name it), the real npm from this clone reaches a fake npm registry on a public
// address of the outside through it with "@npm", and every other way out is refused: a host no
// pattern allows (never even resolved), an allowed host at a port not allowed, an allowed name
// that resolves to loopback or to the host's private network, an allowed address of the host's
// own networks, an IP literal, a direct connection and name resolution in the sandbox itself.
// Where a server of the test listens behind a refused target, it records nothing. A run with
// network "none" reaches nothing at all. No packet leaves the machine.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NAMES, NPM_PACKAGE, OUTSIDE, PORT, runOutside, skipOutside, TRY } from './outside.ts';
import { CONNECT, skip } from './support.ts';

/** npm from this clone, trusting only the test's CA, asking the fake registry for the package. */
const NPM_VIEW = [
  'npm_config_cafile=/workspace/ca.pem npm_config_update_notifier=false',
  `"$NODE" "$NPM" view ${NPM_PACKAGE} version 2>&1`,
].join(' ');

describe("commands with an allowlist, seen from a network of the test's own", {
  skip: skip || skipOutside,
}, () => {
  for (const user of ['root', 'nobody'] as const) {
    test(`${user}: npm reaches the registry with @npm; the proxy is the only way out`, async (t) => {
      const r = await runOutside(
        [
          'env | grep -i _proxy= | sort',
          NPM_VIEW,
          `perl -e '${CONNECT}' ${[
            // No pattern names it: refused before any name is resolved.
            'evil.errand.test:443',
            // The registry's host, at a port @npm does not allow.
            `${NAMES.registry}:${PORT}`,
            // Allowed names that resolve to the outside's loopback and to its private network,
            // where servers of the test listen.
            `${NAMES.loopback}:${PORT}`,
            `${NAMES.rebinding}:${PORT}`,
            // An allowed public-looking address of the host's own networks, with a server.
            `${OUTSIDE.hostPublic}:${PORT}`,
            // An IP literal in a private range (no pattern can name one), with a server.
            `${OUTSIDE.lan}:${PORT}`,
            '[::1]:443',
          ].join(' ')}`,
          // Around the proxy: no route, and no resolver.
          `perl -e '${TRY}' ${OUTSIDE.public},${PORT}`,
          `getent hosts ${NAMES.registry} || echo no-resolution`,
        ].join('\n'),
        user,
        {
          npm: true,
          network: {
            allow: [
              '@npm',
              `${NAMES.loopback}:${PORT}`,
              `${NAMES.rebinding}:${PORT}`,
              `${OUTSIDE.hostPublic}:${PORT}`,
            ],
          },
        },
      );
      if ('skipped' in r) return t.skip(r.skipped);
      const proxy = 'http://127.0.0.1:3128';
      const local = 'localhost,127.0.0.1,::1';
      assert.equal(
        r.output,
        [
          `HTTPS_PROXY=${proxy}`,
          `HTTP_PROXY=${proxy}`,
          `NO_PROXY=${local}`,
          `YARN_HTTPS_PROXY=${proxy}`,
          `YARN_HTTP_PROXY=${proxy}`,
          `http_proxy=${proxy}`,
          `https_proxy=${proxy}`,
          `no_proxy=${local}`,
          '1.2.3',
          'evil.errand.test:443 HTTP/1.1 403 Forbidden',
          `${NAMES.registry}:${PORT} HTTP/1.1 403 Forbidden`,
          `${NAMES.loopback}:${PORT} HTTP/1.1 403 Forbidden`,
          `${NAMES.rebinding}:${PORT} HTTP/1.1 403 Forbidden`,
          `${OUTSIDE.hostPublic}:${PORT} HTTP/1.1 403 Forbidden`,
          `${OUTSIDE.lan}:${PORT} HTTP/1.1 403 Forbidden`,
          '[::1]:443 HTTP/1.1 403 Forbidden',
          `${OUTSIDE.public},${PORT} Network is unreachable`,
          'no-resolution',
          '',
        ].join('\n'),
      );
      // npm's one request reached the registry through the tunnel; nothing else reached a server.
      assert.deepEqual(r.reached, [`${OUTSIDE.public} https GET /${NPM_PACKAGE}`]);
      // The proxy resolved the names it had to check, and never one no pattern allows.
      assert.deepEqual(
        [...new Set(r.asked)].sort(),
        [NAMES.loopback, NAMES.registry, NAMES.rebinding].sort(),
      );
      assert.deepEqual(r.denied, [
        { type: 'network.denied', host: 'evil.errand.test', port: 443, reason: 'not allowed' },
        { type: 'network.denied', host: NAMES.registry, port: PORT, reason: 'not allowed' },
        { type: 'network.denied', host: NAMES.loopback, port: PORT, reason: 'private address' },
        { type: 'network.denied', host: NAMES.rebinding, port: PORT, reason: 'private address' },
        { type: 'network.denied', host: OUTSIDE.hostPublic, port: PORT, reason: 'private address' },
        { type: 'network.denied', host: OUTSIDE.lan, port: PORT, reason: 'not allowed' },
        { type: 'network.denied', host: '::1', port: 443, reason: 'not allowed' },
      ]);
    });
  }

  test('without @npm, npm is refused and told which host to add', async (t) => {
    const r = await runOutside(NPM_VIEW, 'root', { npm: true, network: { allow: [] } });
    if ('skipped' in r) return t.skip(r.skipped);
    assert.match(r.output, /403/);
    assert.doesNotMatch(r.output, /^1\.2\.3$/m);
    assert.deepEqual(r.reached, []);
    assert.deepEqual(r.asked, []);
    assert.deepEqual(r.denied, [
      { type: 'network.denied', host: NAMES.registry, port: 443, reason: 'not allowed' },
    ]);
  });

  test('network "none": no proxy, no route, no resolver', async (t) => {
    const r = await runOutside(
      [
        'env | grep -ci _proxy=',
        `perl -e '${TRY}' ${OUTSIDE.public},${PORT} 127.0.0.1,3128`,
        `getent hosts ${NAMES.registry} || echo no-resolution`,
      ].join('\n'),
      'root',
      { network: 'none' },
    );
    if ('skipped' in r) return t.skip(r.skipped);
    assert.equal(
      r.output,
      [
        '0',
        `${OUTSIDE.public},${PORT} Network is unreachable`,
        '127.0.0.1,3128 Connection refused',
        'no-resolution',
        '',
      ].join('\n'),
    );
    assert.deepEqual(r.reached, []);
    assert.deepEqual(r.asked, []);
    assert.deepEqual(r.denied, []);
  });
});
