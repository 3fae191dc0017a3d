// A host of the test's own for commands with network ("the outside"): network and mount
// namespaces whose only interfaces but loopback discard whatever is sent through them (dummy, or
// ifb where the kernel has no dummy), with private, link-local and public-looking addresses, a
// server of the test on each, a fake resolver on its loopback, and where asked a fake npm
// registry on a public-looking address that the resolver gives for registry.npmjs.org. The
// sandbox's pasta, or its egress proxy, started there, takes it for the host: a refusal is proven
// by a connection that would reach a server of the test without it, and no packet can leave the
// machine, whatever the filter or the proxy does.
import { execFile } from 'node:child_process';
import { access, chmod, copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { makeTempDir, removeDir } from '../support/git.ts';
import { readableByOthers } from './support.ts';

const execFileP = promisify(execFile);

/** The port every server of the outside listens on, TCP and UDP. */
export const PORT = 7780;

/**
 * The outside's addresses. `gateway` has no server (and no one behind it: the interface discards
 * what is sent there). `public` and `public6` are a local route of the outside, not an address of
 * an interface, so they are not among the host's networks the filter reads: the internet.
 */
export const OUTSIDE = {
  /** The address of the interface with the default route: pasta gives the sandbox the same one. */
  own: '10.77.0.1',
  gateway: '10.77.0.254',
  /** The host's other, private network (a container bridge, a LAN). */
  lan: '10.88.0.1',
  lan6: 'fd88::1',
  /** A network of the host's interfaces with public-looking addresses (RFC 5737's TEST-NET-3). */
  hostPublic: '203.0.113.1',
  metadata: '169.254.169.254',
  /** RFC 5737's TEST-NET-2 and RFC 3849's documentation prefix, routed to the outside itself. */
  public: '198.51.100.7',
  public6: '2001:db8::7',
} as const;

/** The addresses the outside's servers listen on (its loopback too: pasta maps nothing there). */
const LISTENING: readonly string[] = [
  '127.0.0.1',
  OUTSIDE.own,
  OUTSIDE.lan,
  OUTSIDE.lan6,
  OUTSIDE.hostPublic,
  OUTSIDE.metadata,
  OUTSIDE.public,
  OUTSIDE.public6,
];

/**
 * The names the outside's resolver knows: a public one, one that rebinds to the host's LAN, one
 * that resolves to loopback, and the npm registry's, at the outside's public address.
 */
export const NAMES = {
  public: 'errand-public-check.test',
  rebinding: 'errand-rebinding-check.test',
  loopback: 'errand-loopback-check.test',
  registry: 'registry.npmjs.org',
} as const;

/** The outside resolver's A records. */
const RECORDS: Readonly<Record<string, string>> = {
  [NAMES.public]: OUTSIDE.public,
  [NAMES.rebinding]: OUTSIDE.lan,
  [NAMES.loopback]: '127.0.0.1',
  [NAMES.registry]: OUTSIDE.public,
};

/** The one package the outside's fake npm registry knows: version 1.2.3. */
export const NPM_PACKAGE = 'errand-egress-check';

/** What a run on the outside gets beside its command. */
export interface OutsideOptions {
  /** The run's network (default 'open'): 'none', 'open', or an allowlist of patterns. */
  network?: 'none' | 'open' | { allow: string[] };
  /**
   * A fake npm registry on the outside's public address at 443 (TLS, with a certificate of a
   * CA of the test, which is at /workspace/ca.pem in the sandbox), and npm from this clone
   * ($NODE $NPM).
   */
  npm?: boolean;
}

/** The outside's /etc/resolv.conf, as systemd-resolved writes it: a resolver on its loopback. */
const HOST_RESOLV_CONF =
  '# as systemd-resolved writes it\nnameserver 127.0.0.1\noptions edns0 trust-ad\nsearch corp.example\n';

/**
 * A Perl script (Perl is part of every Debian system) that tries each `host,port[,udp]` of its
 * arguments and prints one line each: `answered` once the server there has answered (so it has
 * recorded the attempt), `connected` or `sent` if it has not within 5 s, or the error.
 */
export const TRY = [
  'use IO::Socket::IP; use IO::Select;',
  'for (@ARGV) {',
  '  my ($host, $port, $udp) = split /,/;',
  '  my $s = IO::Socket::IP->new(PeerHost => $host, PeerPort => $port, Timeout => 5,',
  '    Proto => $udp ? "udp" : "tcp");',
  '  my $r = !$s ? $@ : $udp && !$s->send("x") ? "$!"',
  '    : IO::Select->new($s)->can_read(5) && $s->sysread(my $b, 64) ? "answered"',
  '    : $udp ? "sent" : "connected";',
  '  $r =~ s/^IO::Socket::IP: //; print "$_ $r\\n";',
  '}',
].join(' ');

/**
 * The outside, made in the new namespaces before "$@" runs. The sandbox is given the address and
 * routes of the interface with the default route; the rest is only the outside's.
 */
const SETUP = [
  'set -e',
  'kind=$1 resolv=$2 repo=$3 view=$4',
  'shift 4',
  'ip link set lo up',
  'ip link add outside0 type "$kind"',
  `ip addr add ${OUTSIDE.own}/24 dev outside0`,
  'ip -6 addr add fd77::1/64 dev outside0 nodad',
  'ip link set outside0 up',
  `ip route add default via ${OUTSIDE.gateway} dev outside0`,
  'ip -6 route add default via fd77::fe dev outside0',
  'ip link add lan0 type "$kind"',
  `ip addr add ${OUTSIDE.lan}/24 dev lan0`,
  `ip addr add ${OUTSIDE.hostPublic}/24 dev lan0`,
  `ip addr add ${OUTSIDE.metadata}/32 dev lan0`,
  `ip -6 addr add ${OUTSIDE.lan6}/64 dev lan0 nodad`,
  'ip link set lan0 up',
  `ip route add local ${OUTSIDE.public}/32 dev lo`,
  `ip -6 route add local ${OUTSIDE.public6}/128 dev lo`,
  // IPv6 binds only an interface's addresses, unless told otherwise (IPv4 takes a local route).
  'echo 1 > /proc/sys/net/ipv6/ip_nonlocal_bind',
  'mount --bind "$resolv" /etc/resolv.conf',
  'if [ -n "$view" ]; then mount --bind "$repo" "$view"; fi',
  'exec "$@"',
].join('\n');

/** The outside's programs run with this PATH (ip is often under sbin). */
const PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

/** An interface kind that discards what is sent through it, or why the outside cannot be made. */
async function discardingKind(): Promise<{ kind: string } | { why: string }> {
  if (process.getuid?.() !== 0) return { why: 'needs root to make network namespaces' };
  for (const tool of ['/usr/bin/unshare', '/usr/bin/setpriv']) {
    const found = await access(tool).then(
      () => true,
      () => false,
    );
    if (!found) return { why: `${tool} (util-linux) is not installed` };
  }
  const errors: string[] = [];
  for (const kind of ['dummy', 'ifb']) {
    try {
      await execFileP('/usr/bin/unshare', ['--net', 'ip', 'link', 'add', 'probe0', 'type', kind], {
        env: { PATH },
      });
      return { kind };
    } catch (err) {
      errors.push(`${kind}: ${(err as { stderr?: string }).stderr?.trim() || String(err)}`);
    }
  }
  return { why: `no interface that discards can be made (iproute2's ip: ${errors.join('; ')})` };
}

const probed = await discardingKind();
/** false where the outside can be made; otherwise why not, printed as the tests' skip reason. */
export const skipOutside: false | string = 'why' in probed ? probed.why : false;
if (skipOutside) console.log(`# the outside network of the egress tests: ${skipOutside}`);

export interface OutsideReport {
  /** The command's output. */
  output: string;
  /** The network.denied events of the run, in order. */
  denied: Record<string, unknown>[];
  /** What reached a server of the outside, as `address tcp|udp`, sorted. */
  reached: string[];
  /** The names the outside's resolver was asked. */
  asked: string[];
}

/**
 * Runs `command` as a setup command with network on the outside, by Errand running as root or
 * as nobody (whose sandbox loads its filter itself); `skipped` says why not where nobody cannot
 * read this clone.
 */
export async function runOutside(
  command: string,
  user: 'root' | 'nobody',
  options: OutsideOptions = {},
): Promise<OutsideReport | { skipped: string }> {
  if ('why' in probed) throw new Error(`the outside cannot be made: ${probed.why}`);
  const repo = new URL('../..', import.meta.url).pathname;
  const dir = await makeTempDir('sandbox-outside');
  try {
    const resolv = join(dir, 'resolv.conf');
    await writeFile(resolv, HOST_RESOLV_CONF);
    await mkdir(join(dir, 'checkout', '.git'), { recursive: true });
    const registry = options.npm ? await registryCertificate(dir) : undefined;
    if (registry) await writeFile(join(dir, 'checkout', 'ca.pem'), await readFile(registry.ca));
    let runner: string[] = [process.execPath, join(repo, 'test/sandbox/outside-run.ts')];
    let view = '';
    if (user === 'nobody') {
      // As limits.test.ts's nobody: a copy of this node (its own may sit under /root), and the
      // clone seen at a path of the temporary directory, in the outside's mount namespace.
      if (!(await readableByOthers(repo))) {
        return { skipped: `nobody cannot read this clone's files (${repo})` };
      }
      const node = join(dir, 'node');
      await copyFile(process.execPath, node);
      view = join(dir, 'errand');
      await mkdir(view);
      await execFileP('chown', ['-R', '65534:65534', dir]);
      await chmod(dir, 0o755);
      runner = [
        '/usr/bin/setpriv',
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        node,
        join(view, 'test/sandbox/outside-run.ts'),
      ];
    }
    const { stdout } = await execFileP(
      '/usr/bin/unshare',
      [
        '--net',
        '--mount',
        '--propagation=private',
        'sh',
        '-c',
        SETUP,
        'sh',
        probed.kind,
        resolv,
        repo,
        view,
        process.execPath,
        join(repo, 'test/sandbox/outside-host.ts'),
        JSON.stringify({
          runner: [...runner, join(dir, 'checkout'), command, JSON.stringify(options)],
          home: dir,
          listen: LISTENING,
          port: PORT,
          names: RECORDS,
          ...(registry
            ? {
                registry: {
                  address: OUTSIDE.public,
                  cert: registry.cert,
                  key: registry.key,
                  name: NPM_PACKAGE,
                },
              }
            : {}),
        }),
      ],
      { env: { PATH }, cwd: dir, timeout: 120_000 },
    );
    return JSON.parse(stdout) as OutsideReport;
  } finally {
    await removeDir(dir);
  }
}

/**
 * A CA of the test's and a certificate it signed for registry.npmjs.org (OpenSSL, P-256, a day),
 * made in `dir`: the fake registry serves it, and npm in the sandbox trusts only that CA.
 */
async function registryCertificate(
  dir: string,
): Promise<{ ca: string; cert: string; key: string }> {
  const openssl = async (...args: string[]) =>
    execFileP('openssl', args, { cwd: dir, env: { PATH } });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  await openssl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '1',
    '-subj',
    '/CN=errand test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  );
  await openssl(
    'req',
    '-new',
    ...ec,
    '-keyout',
    'registry.key',
    '-out',
    'registry.csr',
    '-subj',
    `/CN=${NAMES.registry}`,
    '-addext',
    `subjectAltName=DNS:${NAMES.registry}`,
  );
  await openssl(
    'x509',
    '-req',
    '-in',
    'registry.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-copy_extensions',
    'copy',
    '-out',
    'registry.pem',
  );
  return {
    ca: join(dir, 'ca.pem'),
    cert: join(dir, 'registry.pem'),
    key: join(dir, 'registry.key'),
  };
}
