// The setup network's egress filter (src/sandbox/egress.ts) with real bubblewrap, pasta and
// nftables: the sandbox's own loopback stays inside it, the command cannot lift the filter, the
// ruleset loaded in the namespace refuses every non-public range and the host's networks, and,
// seen from a network of the test's own (outside.ts), where a server of the test listens on each
// address, a connection to any but a public one is refused at once, as root and as nobody.
// Nothing is sent to a private or public address of this machine's or beyond it.
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
import { OUTSIDE, PORT, runOutside, skipOutside, TRY } from './outside.ts';
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

/** A server in the sandbox, answering on every address (v4 and v6) at `port`. */
const LISTEN = (port: number) =>
  `perl -MIO::Socket::IP -e 'my $s = IO::Socket::IP->new(LocalHost => "::", LocalPort => ${port}, ` +
  `Listen => 5, V6Only => 0) or die "listen: $@"; open my $f, ">", "/tmp/up-${port}"; close $f; ` +
  `while (my $c = $s->accept) { print $c "x\\n"; close $c }' & ` +
  `while [ ! -e /tmp/up-${port} ]; do sleep 0.05; done`;

describe('setup network: the egress filter', { skip: skipNetwork }, () => {
  test("the sandbox's own loopback, and the addresses pasta copies from the host, stay inside it", async () => {
    const own = hostAddress();
    // Local addresses of the namespace: the sandbox's own server answers (a build tool's daemon
    // on 127.0.0.1 works), and nothing reaches the host's.
    const targets = ['127.0.0.1,7777', '::1,7777', `${own},7777`];
    const r = await run(checkout, `${LISTEN(7777)}; perl -e '${TRY}' ${targets.join(' ')}`, {
      network: 'open',
    });
    assert.equal(
      r.output,
      ['127.0.0.1,7777 answered', '::1,7777 answered', `${own},7777 answered`, ''].join('\n'),
    );
  });

  test('the command has no capability, and cannot flush or replace the filter', async () => {
    const r = await run(
      checkout,
      [
        "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status | awk '{ print $2 }' | sort -u",
        'nft flush ruleset 2>/dev/null || echo flush-refused',
        "echo 'table inet errand_egress { }' | nft -f - 2>/dev/null || echo replace-refused",
        'unshare --user --map-root-user nft flush ruleset 2>/dev/null; echo "unshare: $?"',
      ].join('\n'),
      { network: 'open' },
    );
    const lines = r.output.split('\n');
    assert.deepEqual(lines.slice(0, 3), ['0000000000000000', 'flush-refused', 'replace-refused']);
    // A user namespace of its own (where one may be made) holds a network namespace of its own:
    // flushing that leaves the sandbox's filter as it was.
    assert.match(lines[3] ?? '', /^unshare: \d+$/);
  });

  test("the ruleset in the sandbox's namespace refuses every non-public range and the host's networks", async (t) => {
    if (process.getuid?.() !== 0) return t.skip("needs root to enter the sandbox's namespace");
    const seconds = `${3000 + Math.floor(Math.random() * 1000)}.${randomBytes(3).readUIntBE(0, 3)}`;
    const stop = new AbortController();
    const running = run(checkout, `sleep ${seconds}`, { network: 'open', signal: stop.signal });
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
    // What passes first: the namespace's own loopback, DNS to pasta's resolver mapping, IPv6's
    // neighbour discovery with pasta, and the refusals' own ICMP answers; nothing else.
    assert.deepEqual(rules.accepted, [
      'meta oifname lo',
      'ip daddr 169.254.1.1 udp dport 53',
      'icmpv6 type nd-router-solicit,nd-neighbor-solicit,nd-neighbor-advert',
      'icmp type destination-unreachable',
      'icmpv6 type destination-unreachable',
    ]);
    assert.deepEqual(rules.chains, ['filter output policy accept']);
  });
});

/** `host,port[,udp]` for TRY, at the port the outside's servers listen on. */
const at = (host: string, udp = false) => `${host},${PORT}${udp ? ',udp' : ''}`;

describe("setup network, seen from a network of the test's own", {
  skip: skipNetwork || skipOutside,
}, () => {
  for (const user of ['root', 'nobody'] as const) {
    test(`${user}: every address of the host's but a public one is refused at once, where a server of the test listens`, async (t) => {
      const targets = [
        // The internet (a public address the outside routes to itself): reached, TCP and UDP.
        at(OUTSIDE.public),
        at(OUTSIDE.public, true),
        at(OUTSIDE.public6),
        at(OUTSIDE.public6, true),
        // Each with a server of the test: the host's other, private network; its link-local
        // cloud metadata address; a network of its interfaces with public-looking addresses.
        // Without the filter each answers. And its gateway, where what is sent goes into the
        // outside's discarding interface (without the filter: timed out).
        at(OUTSIDE.lan),
        at(OUTSIDE.lan, true),
        at(OUTSIDE.lan6),
        at(OUTSIDE.metadata),
        at(OUTSIDE.hostPublic),
        at(OUTSIDE.gateway),
        // The sandbox's own loopback and its copy of the host's address: its own, where nothing
        // listens; the host's servers there are out of reach, filter or not.
        at('127.0.0.1'),
        at(OUTSIDE.own),
      ];
      const r = await runOutside(`perl -e '${TRY}' ${targets.join(' ')}`, user);
      if ('skipped' in r) return t.skip(r.skipped);
      assert.equal(
        r.output,
        [
          `${at(OUTSIDE.public)} answered`,
          `${at(OUTSIDE.public, true)} answered`,
          `${at(OUTSIDE.public6)} answered`,
          `${at(OUTSIDE.public6, true)} answered`,
          `${at(OUTSIDE.lan)} No route to host`,
          `${at(OUTSIDE.lan, true)} Operation not permitted`,
          `${at(OUTSIDE.lan6)} Permission denied`,
          `${at(OUTSIDE.metadata)} No route to host`,
          `${at(OUTSIDE.hostPublic)} No route to host`,
          `${at(OUTSIDE.gateway)} No route to host`,
          `${at('127.0.0.1')} Connection refused`,
          `${at(OUTSIDE.own)} Connection refused`,
          '',
        ].join('\n'),
      );
      assert.deepEqual(r.reached, [
        `${OUTSIDE.public} tcp`,
        `${OUTSIDE.public} udp`,
        `${OUTSIDE.public6} tcp`,
        `${OUTSIDE.public6} udp`,
      ]);
    });

    test(`${user}: after the command's attempts to flush or replace the filter, the host's network is refused still`, async (t) => {
      const r = await runOutside(
        [
          'nft flush ruleset 2>/dev/null || echo flush-refused',
          "echo 'table inet errand_egress { }' | nft -f - 2>/dev/null || echo replace-refused",
          'nft delete table inet errand_egress 2>/dev/null || echo delete-refused',
          'unshare --user --map-root-user nft flush ruleset 2>/dev/null; echo "unshare: $?"',
          `perl -e '${TRY}' ${at(OUTSIDE.lan)} ${at(OUTSIDE.public)}`,
        ].join('\n'),
        user,
      );
      if ('skipped' in r) return t.skip(r.skipped);
      const lines = r.output.split('\n');
      assert.deepEqual(lines.slice(0, 3), ['flush-refused', 'replace-refused', 'delete-refused']);
      // A user namespace of its own (where one may be made) holds a network namespace of its
      // own: flushing that leaves the sandbox's filter as it was.
      assert.match(lines[3] ?? '', /^unshare: \d+$/);
      assert.deepEqual(lines.slice(4), [
        `${at(OUTSIDE.lan)} No route to host`,
        `${at(OUTSIDE.public)} answered`,
        '',
      ]);
      assert.deepEqual(r.reached, [`${OUTSIDE.public} tcp`]);
    });
  }
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
      // A packet's field (`ip daddr`) or its metadata (`meta oifname`).
      const left = m.left as { payload?: Expr; meta?: Expr };
      const field = left.payload
        ? `${left.payload.protocol} ${left.payload.field}`
        : `meta ${left.meta?.key}`;
      const right = m.right as unknown;
      const value =
        typeof right === 'string' || typeof right === 'number'
          ? String(right)
          : 'prefix' in (right as Expr)
            ? `${(right as { prefix: Expr }).prefix.addr}/${(right as { prefix: Expr }).prefix.len}`
            : ((right as { set: string[] }).set ?? []).join(',');
      return `${field} ${value}`;
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
