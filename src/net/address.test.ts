import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppError } from '../errors.ts';
import {
  addressRisk,
  checkWebhookTarget,
  type Resolve,
  resolveAll,
  resolveSafe,
  UnsafeTargetError,
  unsafeAddressReason,
} from './address.ts';

// [address, expected risk or 'public']
const ADDRESSES: readonly (readonly [string, string])[] = [
  ['93.184.216.34', 'public'],
  ['8.8.8.8', 'public'],
  ['1.1.1.1', 'public'],
  ['2606:4700:4700::1111', 'public'],
  ['2a00:1450:4001:80b::200e', 'public'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.0.0.1', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['172.32.0.1', 'public'],
  ['192.168.1.1', 'private'],
  ['169.254.1.1', 'link-local'],
  ['169.254.169.254', 'cloud metadata'],
  ['100.100.100.200', 'cloud metadata'],
  ['100.64.0.1', 'shared (carrier-grade NAT)'],
  ['100.127.255.255', 'shared (carrier-grade NAT)'],
  ['100.128.0.1', 'public'],
  ['192.0.0.8', 'reserved'],
  ['192.0.2.10', 'for documentation only'],
  ['198.51.100.7', 'for documentation only'],
  ['203.0.113.9', 'for documentation only'],
  ['198.18.0.1', 'for benchmarking only'],
  ['198.19.255.255', 'for benchmarking only'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.1.2.3', 'private'],
  ['::ffff:169.254.169.254', 'cloud metadata'],
  ['::ffff:8.8.8.8', 'public'],
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::a9fe:a9fe', 'cloud metadata'],
  ['64:ff9b::8.8.8.8', 'public'],
  ['64:ff9b:1::1', 'private'],
  ['2002:7f00:1::1', 'loopback'],
  ['2002:0a00:0001::', 'private'],
  ['2002:0808:0808::1', 'public'],
  ['::127.0.0.1', 'reserved'],
  ['::8.8.8.8', 'reserved'],
  ['fc00::1', 'private'],
  ['fd12:3456::1', 'private'],
  ['fd00:ec2::254', 'cloud metadata'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['febf::1', 'link-local'],
  ['fec0::1', 'private'],
  ['ff02::1', 'multicast'],
  ['2001:db8::1', 'for documentation only'],
  ['3fff::1', 'for documentation only'],
  ['2001:2::1', 'for benchmarking only'],
  ['2001::1', 'reserved'],
  ['100::1', 'reserved'],
  ['4000::1', 'reserved'],
];

describe('addressRisk', () => {
  for (const [ip, expected] of ADDRESSES) {
    test(`${ip} is ${expected}`, () => {
      assert.equal(addressRisk(ip) ?? 'public', expected);
    });
  }

  test('the reason names the address and an embedded IPv4 address', () => {
    assert.equal(unsafeAddressReason('10.0.0.1'), 'address 10.0.0.1 is private');
    assert.equal(
      unsafeAddressReason('::ffff:7f00:1'),
      'address ::ffff:7f00:1 is loopback (IPv4-mapped 127.0.0.1)',
    );
    assert.equal(unsafeAddressReason('8.8.8.8'), undefined);
  });
});

const noDns: Resolve = () => {
  throw new Error('DNS must not be asked for an IP literal');
};

function dns(answers: Record<string, string[]>): Resolve {
  return async (host) => {
    const list = answers[host];
    if (!list)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

async function refusal(url: string, resolve: Resolve = noDns, allowPrivate = false) {
  try {
    await checkWebhookTarget(url, allowPrivate, resolve);
  } catch (err) {
    assert.ok(err instanceof AppError, `not an AppError: ${String(err)}`);
    assert.equal(err.code, 'bad_request');
    assert.equal(err.status, 400);
    return err.message;
  }
  assert.fail(`${url} was accepted`);
}

describe('checkWebhookTarget', () => {
  test('accepts a public https URL, by IP literal or by a name resolving to public addresses', async () => {
    const url = await checkWebhookTarget('https://93.184.216.34:8443/hook?x=1', false, noDns);
    assert.equal(url.port, '8443');
    await checkWebhookTarget('https://[2606:4700:4700::1111]/hook', false, noDns);
    const resolve = dns({ 'hooks.example.com': ['93.184.216.34', '2606:4700:4700::1111'] });
    await checkWebhookTarget('https://hooks.example.com/x', false, resolve);
  });

  test('IP literals in every form WHATWG URL accepts are normalized and checked', async () => {
    for (const url of [
      'https://127.0.0.1/',
      'https://2130706433/',
      'https://0x7f000001/',
      'https://0x7f.1/',
      'https://017700000001/',
      'https://127.1/',
      'https://[::1]/',
      'https://[::ffff:127.0.0.1]/',
      'https://[0:0:0:0:0:ffff:7f00:1]/',
      'https://[64:ff9b::7f00:1]/',
      'https://169.254.169.254/latest/meta-data/',
      'https://[fd00:ec2::254]/',
      'https://100.100.100.200/',
      'https://0/',
      'https://10.1.2.3/',
      'https://192.168.0.1/',
      'https://[fe80::1]/',
      'https://[fc00::1]/',
    ]) {
      const message = await refusal(url);
      assert.match(message, /^webhook url is not allowed: address .* is /, url);
      assert.match(message, /ERRAND_WEBHOOK_ALLOW_PRIVATE/);
    }
    assert.match(await refusal('https://2130706433/'), /address 127\.0\.0\.1 is loopback/);
    assert.match(
      await refusal('http://[::ffff:127.0.0.1]/', noDns, false),
      /must use https:\/\//,
      'http is refused before the address',
    );
  });

  test('every address a name resolves to must be public', async () => {
    const resolve = dns({
      'mixed.example.com': ['93.184.216.34', '10.0.0.7'],
      'inside.example.com': ['::1'],
      'meta.example.com': ['169.254.169.254'],
    });
    assert.match(
      await refusal('https://mixed.example.com/', resolve),
      /host mixed\.example\.com resolves to address 10\.0\.0\.7 is private/,
    );
    assert.match(await refusal('https://inside.example.com/', resolve), /::1 is loopback/);
    assert.match(await refusal('https://meta.example.com/', resolve), /cloud metadata/);
    assert.match(
      await refusal('https://nowhere.example.com/', resolve),
      /host nowhere\.example\.com does not resolve/,
    );
  });

  test('localhost is refused through the real resolver', async () => {
    const message = await refusal('https://localhost/hook', resolveAll);
    assert.match(message, /host localhost resolves to address .* is loopback/);
  });

  test('http, other schemes, credentials and garbage are refused', async () => {
    assert.match(await refusal('http://93.184.216.34/'), /must use https:\/\//);
    assert.match(await refusal('ftp://93.184.216.34/'), /must use https:\/\//);
    assert.match(await refusal('file:///etc/passwd'), /must use https:\/\//);
    assert.match(await refusal('not a url'), /not a valid URL/);
    assert.match(await refusal('https://user:pw@93.184.216.34/'), /must not contain credentials/);
    assert.match(await refusal('https://user@93.184.216.34/'), /must not contain credentials/);
    const credentials = await refusal('http://user:pw@127.0.0.1/', noDns, true);
    assert.match(credentials, /must not contain credentials/);
    assert.doesNotMatch(credentials, /pw/, 'the password is not repeated');
    assert.match(
      await refusal('ftp://127.0.0.1/', noDns, true),
      /must use https:\/\/ or http:\/\//,
    );
  });

  test('allowPrivate allows http and private targets without asking DNS', async () => {
    await checkWebhookTarget('http://127.0.0.1:9999/hook', true, noDns);
    await checkWebhookTarget('http://[::1]/hook', true, noDns);
    await checkWebhookTarget('https://169.254.169.254/', true, noDns);
    await checkWebhookTarget('http://receiver.internal/', true, noDns);
  });
});

describe('resolveSafe', () => {
  test('returns the checked addresses, and refuses unsafe ones unless allowed', async () => {
    const resolve = dns({ 'a.example.com': ['93.184.216.34'], 'b.example.com': ['127.0.0.1'] });
    assert.deepEqual(await resolveSafe('a.example.com', false, resolve), [
      { address: '93.184.216.34', family: 4 },
    ]);
    await assert.rejects(resolveSafe('b.example.com', false, resolve), UnsafeTargetError);
    assert.deepEqual(await resolveSafe('b.example.com', true, resolve), [
      { address: '127.0.0.1', family: 4 },
    ]);
    await assert.rejects(resolveSafe('::1', false, noDns), /address ::1 is loopback/);
    assert.deepEqual(await resolveSafe('::1', true, noDns), [{ address: '::1', family: 6 }]);
  });
});
