// The setup network's egress filter (src/sandbox/egress.ts) with real bubblewrap, pasta and
// nftables: packets to the sandbox's loopback and to the host's own address are refused before
// they leave its namespace, even to a server listening there, the command cannot lift the
// filter, and the ruleset loaded in the namespace refuses every non-public range and the host's
// networks. Only such targets are used: nothing is sent to a private or public address.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { BlockList, isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { makeTempDir, removeDir } from '../support/git.ts';
import { hostProcesses, run, skipNetwork } from './support.ts';

const execFileP = promisify(execFile);

let root: string;
let checkout: string;
before(async () => {
  if (skipNetwork) return;
  root = await makeTempDir('sandbox-egress');
  checkout = join(root, 'checkout');
  await mkdir(join(checkout, '.git'), { recursive: true });
});
after(async () => {
  if (root) await removeDir(root);
});

/** The host's first IPv4 address that is not loopback: pasta gives the sandbox the same one. */
function hostAddress(): string {
  const address = Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && !a.internal && a.family === 'IPv4')?.address;
  assert.ok(address, 'the host has no IPv4 address but loopback');
  return address;
}

/**
 * A Perl script (Perl is part of every Debian system) that tries each `host,port[,udp]` of its
 * arguments and prints one line each: `connected`, `sent`, or the error.
 */
const TRY = [
  'use IO::Socket::IP;',
  'for (@ARGV) {',
  '  my ($host, $port, $udp) = split /,/;',
  '  my $s = IO::Socket::IP->new(PeerHost => $host, PeerPort => $port, Timeout => 5,',
  '    Proto => $udp ? "udp" : "tcp");',
  '  my $r = !$s ? $@ : !$udp ? "connected" : $s->send("x") ? "sent" : "$!";',
  '  $r =~ s/^IO::Socket::IP: //; print "$_ $r\\n";',
  '}',
].join(' ');

/** A server in the sandbox, listening on every address (v4 and v6) at `port`, for 30 s. */
const LISTEN = (port: number) =>
  `perl -MIO::Socket::IP -e 'my $s = IO::Socket::IP->new(LocalHost => "::", LocalPort => ${port}, ` +
  `Listen => 5, V6Only => 0) or die "listen: $@"; open my $f, ">", "/tmp/up-${port}"; sleep 30' & ` +
  `while [ ! -e /tmp/up-${port} ]; do sleep 0.05; done`;

describe('setup network: the egress filter', { skip: skipNetwork }, () => {
  test("loopback and the host's own address are refused, even where a server listens; UDP too", async () => {
    const own = hostAddress();
    const targets = [`127.0.0.1,7777`, `::1,7777`, `${own},7777`, '127.0.0.1,53,udp'];
    const r = await run(checkout, `${LISTEN(7777)}; perl -e '${TRY}' ${targets.join(' ')}`, {
      network: true,
    });
    // Without the filter: connected, connected, connected, sent.
    assert.equal(
      r.output,
      [
        '127.0.0.1,7777 No route to host',
        '::1,7777 Permission denied',
        `${own},7777 No route to host`,
        '127.0.0.1,53,udp Operation not permitted',
        '',
      ].join('\n'),
    );
  });

  test('the command has no capability, cannot flush or replace the filter, and stays refused', async () => {
    const r = await run(
      checkout,
      [
        LISTEN(7778),
        "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status | awk '{ print $2 }' | sort -u",
        'nft flush ruleset 2>/dev/null || echo flush-refused',
        "echo 'table inet errand_egress { }' | nft -f - 2>/dev/null || echo replace-refused",
        'unshare --user --map-root-user nft flush ruleset 2>/dev/null; echo "unshare: $?"',
        `perl -e '${TRY}' 127.0.0.1,7778`,
      ].join('\n'),
      { network: true },
    );
    const lines = r.output.split('\n');
    assert.deepEqual(lines.slice(0, 3), ['0000000000000000', 'flush-refused', 'replace-refused']);
    // A user namespace of its own (where one may be made) holds a network namespace of its own:
    // flushing that leaves the sandbox's filter as it was.
    assert.match(lines[3] ?? '', /^unshare: \d+$/);
    assert.equal(lines[4], '127.0.0.1,7778 No route to host');
  });

  test("the ruleset in the sandbox's namespace refuses every non-public range and the host's networks", async (t) => {
    if (process.getuid?.() !== 0) return t.skip("needs root to enter the sandbox's namespace");
    const seconds = `${3000 + Math.floor(Math.random() * 1000)}.${randomBytes(3).readUIntBE(0, 3)}`;
    const stop = new AbortController();
    const running = run(checkout, `sleep ${seconds}`, { network: true, signal: stop.signal });
    let listed: string;
    try {
      let pid: number | undefined;
      for (let i = 0; i < 500 && pid === undefined; i++) {
        pid = (await hostProcesses('sleep', seconds))[0];
        if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.ok(pid, 'the command never started');
      listed = (
        await execFileP('/usr/bin/nsenter', [
          `--net=/proc/${pid}/ns/net`,
          '/usr/sbin/nft',
          '-j',
          'list',
          'ruleset',
        ])
      ).stdout;
    } finally {
      stop.abort();
      await running;
    }
    const rules = loadedRules(listed);
    // Loopback, private, link-local (cloud metadata), CGNAT, "this network", multicast.
    const required = [
      '0.0.0.0/8',
      '10.0.0.0/8',
      '100.64.0.0/10',
      '127.0.0.0/8',
      '169.254.0.0/16',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '224.0.0.0/4',
      '::1/128',
      'fc00::/7',
      'fe80::/10',
      'ff00::/8',
    ];
    for (const range of required) assert.ok(rules.refused.includes(range), `${range} not refused`);
    const refused = new BlockList();
    for (const range of rules.refused) {
      const [address = '', length] = range.split('/');
      refused.addSubnet(address, Number(length), isIPv6(address) ? 'ipv6' : 'ipv4');
    }
    assert.ok(refused.check('169.254.169.254', 'ipv4'), 'the cloud metadata address');
    for (const a of Object.values(networkInterfaces()).flat()) {
      if (a === undefined || a.internal) continue;
      const family = a.family === 'IPv6' ? 'ipv6' : 'ipv4';
      assert.ok(refused.check(a.address, family), `the host's own ${a.address} is not refused`);
    }
    // What passes first: DNS to pasta's resolver mapping, and IPv6's neighbour discovery with
    // pasta, and the refusals' own ICMP answers; nothing else.
    assert.deepEqual(rules.accepted, [
      'ip daddr 169.254.1.1 udp dport 53',
      'icmpv6 type nd-router-solicit,nd-neighbor-solicit,nd-neighbor-advert',
      'icmp type destination-unreachable',
      'icmpv6 type destination-unreachable',
    ]);
    assert.deepEqual(rules.chains, ['filter output policy accept']);
  });
});

type Expr = Record<string, unknown>;

/**
 * nft's JSON listing, read back: the ranges each reject rule refuses (as prefix/length), each
 * accept rule as `field value …`, and each base chain. Any other kind of rule fails the test.
 */
function loadedRules(json: string): { refused: string[]; accepted: string[]; chains: string[] } {
  const out = { refused: [] as string[], accepted: [] as string[], chains: [] as string[] };
  const items = (JSON.parse(json) as { nftables: Expr[] }).nftables;
  for (const item of items) {
    const chain = item.chain as Expr | undefined;
    if (chain) out.chains.push(`${chain.type} ${chain.hook} policy ${chain.policy}`);
    const rule = item.rule as { expr: Expr[] } | undefined;
    if (!rule) continue;
    const matches = rule.expr.filter((e) => 'match' in e).map((e) => e.match as Expr);
    const words = matches.map((m) => {
      const left = (m.left as { payload: Expr }).payload;
      const right = m.right as unknown;
      const value =
        typeof right === 'string' || typeof right === 'number'
          ? String(right)
          : 'prefix' in (right as Expr)
            ? `${(right as { prefix: Expr }).prefix.addr}/${(right as { prefix: Expr }).prefix.len}`
            : ((right as { set: string[] }).set ?? []).join(',');
      return `${left.protocol} ${left.field} ${value}`;
    });
    if (rule.expr.some((e) => 'reject' in e)) {
      assert.equal(matches.length, 1, JSON.stringify(rule));
      const [, , value = ''] = (words[0] ?? '').split(' ');
      out.refused.push(value.includes('/') ? value : `${value}/${value.includes(':') ? 128 : 32}`);
    } else if (rule.expr.some((e) => 'accept' in e)) {
      out.accepted.push(words.join(' '));
    } else assert.fail(`an unexpected rule: ${JSON.stringify(rule)}`);
  }
  return out;
}
