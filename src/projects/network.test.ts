// The allowlist's patterns: what each form allows (a host, the names below a domain but not the
// domain, a port or the default one), what is refused when a project is saved and why, the
// presets, and the ranges of addresses that are never reached.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import {
  embeddingForms,
  type HostPattern,
  isAllowed,
  NETWORK_PRESETS,
  nonPublicRange,
  normalHost,
  parseAllowList,
  parsePattern,
} from './network.ts';

/** The hosts a list of patterns allows, or its refusal. */
function parsed(...patterns: string[]): HostPattern[] {
  const out = parseAllowList(patterns);
  if ('error' in out) assert.fail(out.error);
  return out;
}

function refusal(pattern: string): string {
  const out = parsePattern(pattern);
  assert.ok('error' in out, `${pattern} was taken: ${JSON.stringify(out)}`);
  return out.error;
}

describe('network patterns: matching', () => {
  test('a host allows itself only, at 443 for CONNECT and 80 for plain HTTP', () => {
    const allow = parsed('registry.npmjs.org');
    assert.ok(isAllowed(allow, 'registry.npmjs.org', 443, 443));
    assert.ok(isAllowed(allow, 'registry.npmjs.org', 80, 80));
    assert.ok(!isAllowed(allow, 'registry.npmjs.org', 8443, 443));
    assert.ok(!isAllowed(allow, 'registry.npmjs.org', 443, 80));
    assert.ok(!isAllowed(allow, 'evil.registry.npmjs.org', 443, 443));
    assert.ok(!isAllowed(allow, 'registry.npmjs.org.evil.example', 443, 443));
    assert.ok(!isAllowed(allow, 'npmjs.org', 443, 443));
  });

  test('*.domain allows the names below it, not the domain itself nor a name that ends alike', () => {
    const allow = parsed('*.example.org');
    assert.ok(isAllowed(allow, 'a.example.org', 443, 443));
    assert.ok(isAllowed(allow, 'a.b.example.org', 443, 443));
    assert.ok(!isAllowed(allow, 'example.org', 443, 443));
    assert.ok(!isAllowed(allow, 'badexample.org', 443, 443));
    assert.ok(!isAllowed(allow, 'a.example.org.evil', 443, 443));
  });

  test('host:port allows that port only, for CONNECT and plain HTTP alike', () => {
    const allow = parsed('npm.example.com:8443', '*.cdn.example.com:8080');
    assert.ok(isAllowed(allow, 'npm.example.com', 8443, 443));
    assert.ok(isAllowed(allow, 'npm.example.com', 8443, 80));
    assert.ok(!isAllowed(allow, 'npm.example.com', 443, 443));
    assert.ok(isAllowed(allow, 'x.cdn.example.com', 8080, 80));
    assert.ok(!isAllowed(allow, 'x.cdn.example.com', 80, 80));
  });

  test('patterns are read without case or a trailing dot; requests are normalised alike', () => {
    const allow = parsed('Registry.NPMJS.org.', '[2001:DB8:0:0::1]:443');
    assert.ok(isAllowed(allow, normalHost('REGISTRY.npmjs.ORG.'), 443, 443));
    assert.ok(isAllowed(allow, normalHost('[2001:db8::1]'), 443, 443));
    assert.ok(isAllowed(allow, normalHost('2001:0db8:0000::0001'), 443, 443));
  });

  test('a preset expands to its hosts', () => {
    const allow = parsed('@npm', '@pypi', '@github');
    assert.ok(isAllowed(allow, 'registry.npmjs.org', 443, 443));
    assert.ok(isAllowed(allow, 'files.pythonhosted.org', 443, 443));
    assert.ok(isAllowed(allow, 'objects.githubusercontent.com', 443, 443));
    assert.ok(!isAllowed(allow, 'githubusercontent.com', 443, 443));
    assert.ok(!isAllowed(allow, 'registry.yarnpkg.com', 443, 443));
    // Every preset's hosts are patterns the parser takes.
    for (const [name, hosts] of Object.entries(NETWORK_PRESETS)) {
      assert.match(name, /^@[a-z]+$/);
      for (const host of hosts) assert.ok(!('error' in parsePattern(host)), host);
    }
  });

  test("docs/sandbox.md's table of presets says each preset's hosts, and no other preset", async () => {
    const doc = await readFile(new URL('../../docs/sandbox.md', import.meta.url), 'utf8');
    const rows = [...doc.matchAll(/^\| `(@[a-z]+)` \| ([^|]+) \|/gm)].map(([, name, hosts]) => [
      name,
      [...(hosts ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1]),
    ]);
    assert.deepEqual(Object.fromEntries(rows), NETWORK_PRESETS);
  });

  test('an empty list allows nothing', () => {
    assert.ok(!isAllowed(parsed(), 'registry.npmjs.org', 443, 443));
  });
});

describe('network patterns: refused when saved, naming the pattern', () => {
  test('malformed names, wildcards and ports', () => {
    assert.match(refusal(''), /"" must be 1 to 260 characters/);
    assert.match(refusal('*'), /"\*" would allow every host/);
    assert.match(refusal('*.org'), /would allow a whole top-level domain/);
    assert.match(refusal('a*.example.org'), /may hold \* only as its whole first label/);
    assert.match(refusal('*.*.example.org'), /may hold \* only as its whole first label/);
    assert.match(refusal('https://registry.npmjs.org'), /must be a host, not a URL or a path/);
    assert.match(refusal('registry.npmjs.org/path'), /must be a host, not a URL or a path/);
    assert.match(refusal('user@registry.npmjs.org'), /must be a host, not a URL or a path/);
    assert.match(refusal('registry.npmjs.org:0'), /port that is not a number from 1 to 65535/);
    assert.match(refusal('registry.npmjs.org:65536'), /port that is not a number/);
    assert.match(refusal('registry.npmjs.org:443:1'), /IPv6 address in brackets/);
    assert.match(refusal('bücher.example'), /xn-- form/);
    assert.match(refusal('a..example.org'), /is not a host name/);
    assert.match(refusal('-a.example.org'), /is not a host name/);
    assert.match(refusal(`${'a'.repeat(64)}.example.org`), /is not a host name/);
    assert.match(refusal('1.2.3'), /is not a host name/);
    assert.match(refusal('[not-an-address]'), /no IPv6 address between its brackets/);
    assert.match(refusal('@nope'), /"@nope" is no preset; the presets are @npm, @yarn, @pypi/);
  });

  test('an address that is never reached: loopback, private, link-local, CGNAT, multicast, reserved', () => {
    for (const [pattern, range] of [
      ['127.0.0.1', '127.0.0.0/8'],
      ['10.1.2.3:8081', '10.0.0.0/8'],
      ['172.16.0.1', '172.16.0.0/12'],
      ['192.168.1.10', '192.168.0.0/16'],
      ['169.254.169.254', '169.254.0.0/16'],
      ['100.64.0.1', '100.64.0.0/10'],
      ['0.0.0.0', '0.0.0.0/8'],
      ['224.0.0.1', '224.0.0.0/4'],
      ['255.255.255.255', '240.0.0.0/4'],
      ['[::1]', '::1/128'],
      ['[fd00::1]:443', 'fc00::/7'],
      ['[fe80::1]', 'fe80::/10'],
      ['[::ffff:127.0.0.1]', '127.0.0.0/8'],
    ] as const) {
      assert.match(
        refusal(pattern),
        new RegExp(`names an address of ${range.replaceAll('.', '\\.')}, which is never reached`),
        pattern,
      );
    }
  });

  test('a public address is a pattern like a name', () => {
    assert.deepEqual(parsePattern('198.51.100.7:8080'), [
      { host: '198.51.100.7', wildcard: false, port: 8080 },
    ]);
  });

  test('a list longer than 100 patterns is refused', () => {
    const many = Array.from({ length: 101 }, (_, i) => `h${i}.example.org`);
    assert.deepEqual(parseAllowList(many), { error: 'at most 100 patterns are allowed' });
  });
});

describe('addresses never reached', () => {
  test('each range, IPv4-mapped IPv6 as its IPv4, and public addresses not', () => {
    assert.equal(nonPublicRange('127.0.0.1'), '127.0.0.0/8');
    assert.equal(nonPublicRange('10.255.0.1'), '10.0.0.0/8');
    assert.equal(nonPublicRange('100.127.255.255'), '100.64.0.0/10');
    assert.equal(nonPublicRange('169.254.169.254'), '169.254.0.0/16');
    assert.equal(nonPublicRange('::ffff:10.1.2.3'), '10.0.0.0/8');
    assert.equal(nonPublicRange('::'), '::/128');
    assert.equal(nonPublicRange('fe80::abcd'), 'fe80::/10');
    assert.equal(nonPublicRange('ff02::1'), 'ff00::/8');
    for (const address of ['8.8.8.8', '100.128.0.1', '172.32.0.1', '198.51.100.7', '2001:db8::7']) {
      assert.equal(nonPublicRange(address), undefined, address);
    }
  });

  test('an IPv4 address carried by NAT64 or 6to4 is judged as itself', () => {
    // 64:ff9b::/96 is what DNS64 answers for a name with only an IPv4 address: a NAT64 gateway
    // carries the packet to the IPv4 address in its last 32 bits, the metadata service's too.
    assert.equal(nonPublicRange('64:ff9b::a9fe:a9fe'), '64:ff9b::a9fe:0/112');
    assert.equal(nonPublicRange('64:ff9b::127.0.0.1'), '64:ff9b::7f00:0/104');
    assert.equal(nonPublicRange('64:ff9b::192.168.1.1'), '64:ff9b::c0a8:0/112');
    assert.equal(nonPublicRange('64:ff9b:1::a00:1'), '64:ff9b:1::/48');
    assert.equal(nonPublicRange('2002:a00:1::1'), '2002:a00:0::/24');
    assert.equal(nonPublicRange('2002:ac10:fe01::1'), '2002:ac10:0::/28');
    // A public IPv4 address over NAT64 (an IPv6-only network's way to a registry) stays open.
    for (const address of ['64:ff9b::808:808', '64:ff9b::8.8.4.4', '2002:808:808::1']) {
      assert.equal(nonPublicRange(address), undefined, address);
    }
    // A host's own network, its host bits cleared.
    assert.deepEqual(embeddingForms('10.0.2.15/24'), ['64:ff9b::a00:200/120', '2002:a00:200::/40']);
    assert.deepEqual(embeddingForms('fd00::/8'), []);
  });
});
