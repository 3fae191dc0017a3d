// A project's network policy: what its setup command and its commands may reach. "none" is no
// network at all; "open" (the setup command only) is the user-mode network of the sandbox with its
// filter of non-public addresses; "allowlist" is the egress proxy outside the sandbox, which lets
// through only the hosts the project's patterns name (src/sandbox/egress-proxy.ts). The patterns'
// syntax, the presets and the matching are said here, below the sandbox, so that the project
// service refuses a bad pattern when it is saved, with the same rules the proxy applies.
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import type { Updateable } from 'kysely';
import type { ProjectRow, ProjectsTable } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type {
  COMMANDS_NETWORK_MODES,
  NETWORK_PRESET_NAMES,
  SETUP_NETWORK_MODES,
} from '../records/project.ts';

type SetupNetworkMode = (typeof SETUP_NETWORK_MODES)[number];
type CommandsNetworkMode = (typeof COMMANDS_NETWORK_MODES)[number];

/** A project's network policy as the admin API shows and takes it. */
export interface NetworkPolicy {
  /** The setup command's network. */
  setup: SetupNetworkMode;
  /** The network of the agent's run_command, and of an engine's whole sandbox. */
  commands: CommandsNetworkMode;
  /** The patterns of the allowlist (`host`, `*.domain`, `host:port`, `@preset`), as given. */
  allow: string[];
}

/** A change of the policy as an update gives it: a part left out is kept. */
export interface NetworkChange {
  setup?: SetupNetworkMode | undefined;
  commands?: CommandsNetworkMode | undefined;
  allow?: string[] | undefined;
}

type NetworkColumns = Pick<
  Updateable<ProjectsTable>,
  'network_setup' | 'network_commands' | 'network_allow'
>;

/** A project's policy, as stored. */
export function projectNetwork(row: ProjectRow): NetworkPolicy {
  return { setup: row.network_setup, commands: row.network_commands, allow: row.network_allow };
}

/** The network of a project's commands (run_command, an engine's sandbox): its mode and patterns. */
export function commandsNetwork(row: ProjectRow): CommandsNetwork {
  return { mode: row.network_commands, allow: row.network_allow };
}

/** What a project's commands may reach, as the agent's run_command and an engine take it. */
export interface CommandsNetwork {
  mode: CommandsNetworkMode;
  /** The patterns, as stored; read when each run starts. */
  allow: readonly string[];
}

/**
 * The policy's part of a project record: `network`, and `setupNetwork` as older clients read it,
 * true exactly when the setup network is "open" (what `setupNetwork: true` sets).
 */
export function networkRecord(row: ProjectRow): { setupNetwork: boolean; network: NetworkPolicy } {
  return { setupNetwork: row.network_setup === 'open', network: projectNetwork(row) };
}

/**
 * The columns a create or update body changes: `network`'s parts given, or the older
 * `setupNetwork` (true: setup "open", false: "none"); both at once are refused. The patterns'
 * syntax is the body schema's to check (network-schema.ts).
 */
export function networkChanges(body: {
  setupNetwork?: boolean | undefined;
  network?: NetworkChange | undefined;
}): NetworkColumns {
  const { setupNetwork, network } = body;
  if (setupNetwork !== undefined && network !== undefined) {
    throw new AppError(
      'bad_request',
      'give "network" or the older "setupNetwork" (true is network.setup "open"), not both',
    );
  }
  const out: NetworkColumns = {};
  if (setupNetwork !== undefined) out.network_setup = setupNetwork ? 'open' : 'none';
  if (network?.setup !== undefined) out.network_setup = network.setup;
  if (network?.commands !== undefined) out.network_commands = network.commands;
  if (network?.allow !== undefined) out.network_allow = network.allow.map((p) => p.trim());
  return out;
}

/** The network columns of a new project's row: those its body gave (the others default). */
export function networkColumns(changes: NetworkColumns): NetworkColumns {
  const out: NetworkColumns = {};
  if (changes.network_setup !== undefined) out.network_setup = changes.network_setup;
  if (changes.network_commands !== undefined) out.network_commands = changes.network_commands;
  if (changes.network_allow !== undefined) out.network_allow = changes.network_allow;
  return out;
}

/** At most this many patterns in a project's allowlist, each at most PATTERN_MAX_CHARS long. */
export const ALLOW_MAX_PATTERNS = 100;
const PATTERN_MAX_CHARS = 260;

/**
 * The hosts of the common package registries, as their clients reach them by default. Each is
 * a host the client's own documentation or default configuration names: npm's `registry` (its
 * tarballs are under the same host), Yarn's `npmRegistryServer`, pip's index and the host its
 * files are served from, cargo's sparse index, its download host and the crates.io API, the Go
 * command's GOPROXY and GOSUMDB, RubyGems and Bundler's compact index, Composer's metadata, Maven
 * Central. A tool that falls back elsewhere (Go's `direct`, Composer's dist downloads from GitHub)
 * needs that host too: `@github`. Their names are the project record's (src/records/project.ts).
 */
export const NETWORK_PRESETS: Readonly<Record<string, readonly string[]>> = {
  '@npm': ['registry.npmjs.org'],
  '@yarn': ['registry.yarnpkg.com'],
  '@pypi': ['pypi.org', 'files.pythonhosted.org'],
  '@crates': ['index.crates.io', 'static.crates.io', 'crates.io'],
  '@go': ['proxy.golang.org', 'sum.golang.org'],
  '@github': ['github.com', 'api.github.com', 'codeload.github.com', '*.githubusercontent.com'],
  '@rubygems': ['rubygems.org', 'index.rubygems.org'],
  '@packagist': ['repo.packagist.org', 'packagist.org'],
  '@maven': ['repo.maven.apache.org', 'repo1.maven.org'],
} satisfies Record<(typeof NETWORK_PRESET_NAMES)[number], readonly string[]>;

/** The IPv4 networks that are never public. */
const NON_PUBLIC_V4 = [
  '0.0.0.0/8', // "this network"; connecting to 0.0.0.0 reaches the local host
  '10.0.0.0/8',
  '100.64.0.0/10', // CGNAT: a provider's shared space, often its internal services
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local: the cloud metadata service (169.254.169.254)
  '172.16.0.0/12',
  '192.168.0.0/16',
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and the LAN's broadcast 255.255.255.255
] as const;

/**
 * The IPv6 networks whose addresses carry an IPv4 network's, for a gateway to carry a packet
 * there: the NAT64 well-known prefix (64:ff9b::/96, which DNS64 gives for names with only an
 * IPv4 address) and 6to4 (2002::/16). An IPv4-mapped address (::ffff:a.b.c.d) needs none: a
 * socket sends to its IPv4 address, which the IPv4 ranges hold.
 */
export function embeddingForms(network: string): string[] {
  const [base = '', length = ''] = network.split('/');
  const bits = Number(length);
  const octets = base.split('.').map(Number);
  if (!isIPv4(base) || !Number.isInteger(bits) || bits < 0 || bits > 32) return [];
  const value = octets.reduce((sum, octet) => sum * 256 + octet, 0);
  // The network's own address: the bits past its length cleared.
  const masked = bits === 0 ? 0 : value - (value % 2 ** (32 - bits));
  const high = Math.floor(masked / 65536).toString(16);
  const low = (masked % 65536).toString(16);
  return [`64:ff9b::${high}:${low}/${96 + bits}`, `2002:${high}:${low}::/${16 + bits}`];
}

/**
 * Never public addresses, refused whatever a name resolves to: by the setup network's filter
 * (src/sandbox/egress.ts) and by the egress proxy alike, with the host's own networks beside
 * them. The IPv4 ones also in their NAT64 and 6to4 forms (embeddingForms).
 */
export const NON_PUBLIC_RANGES: readonly string[] = [
  ...NON_PUBLIC_V4,
  '::/128',
  '::1/128',
  '64:ff9b:1::/48', // NAT64 for a network's local use (RFC 8215): its own addresses
  'fc00::/7', // unique local
  'fe80::/10', // link-local
  'fec0::/10', // the old site-local
  'ff00::/8', // multicast
  ...NON_PUBLIC_V4.flatMap(embeddingForms),
];

/** One host a pattern allows: a name, every name below a domain, or an IP address. */
export interface HostPattern {
  /** Lower case, without a trailing dot; an IPv6 address without brackets, in its short form. */
  host: string;
  /** `*.domain`: the names below `host`, not `host` itself. */
  wildcard: boolean;
  /** The one port allowed; null: 443 for CONNECT, 80 for plain HTTP. */
  port: number | null;
}

const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** A host as a request names it, for matching: lower case, no trailing dot, IPv6 unbracketed and short. */
export function normalHost(host: string): string {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const lower = bare.toLowerCase().replace(/\.$/, '');
  return isIPv6(lower) ? shortIPv6(lower) : lower;
}

/** An IPv6 address in its one short form (as URLs print it). */
function shortIPv6(address: string): string {
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

/** Whether `name` is a DNS name a pattern may hold: labels of letters, digits, `-` and `_`. */
function isHostName(name: string): boolean {
  const labels = name.split('.');
  return (
    name.length <= 253 &&
    labels.every((label) => LABEL.test(label)) &&
    // A last label of digits only would be an IPv4 address's, which isIPv4 did not take.
    !/^\d+$/.test(labels.at(-1) ?? '')
  );
}

/**
 * One pattern of an allowlist, its preset expanded: the hosts it allows, or why it is refused
 * (a sentence that quotes the pattern).
 */
export function parsePattern(text: string): HostPattern[] | { error: string } {
  const refuse = (why: string) => ({ error: `pattern ${JSON.stringify(text)} ${why}` });
  const given = text.trim().toLowerCase();
  if (given === '' || given.length > PATTERN_MAX_CHARS) {
    return refuse(`must be 1 to ${PATTERN_MAX_CHARS} characters`);
  }
  if (given === '*') {
    return refuse(
      'would allow every host: name the hosts (a setup command may have "open" instead)',
    );
  }
  if (/[/?#]/.test(given) || given.indexOf('@') > 0) {
    return refuse(
      'must be a host, not a URL or a path: give the host alone (with :port if not 443)',
    );
  }
  if (given.startsWith('@')) {
    const hosts = NETWORK_PRESETS[given];
    if (hosts === undefined) {
      return refuse(`is no preset; the presets are ${Object.keys(NETWORK_PRESETS).join(', ')}`);
    }
    return hosts.map((host) => parseHost(host, null));
  }
  let host = given;
  let port: number | null = null;
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(given);
  if (bracketed) {
    host = bracketed[1] ?? '';
    if (!isIPv6(host)) return refuse('holds no IPv6 address between its brackets');
    if (bracketed[2] !== undefined) {
      const parsed = portOf(bracketed[2]);
      if (parsed === undefined) return refuse('has a port that is not a number from 1 to 65535');
      port = parsed;
    }
  } else {
    const colons = given.split(':').length - 1;
    if (colons > 1) return refuse('must put an IPv6 address in brackets: [2001:db8::1]:443');
    if (colons === 1) {
      const at = given.lastIndexOf(':');
      host = given.slice(0, at);
      const parsed = portOf(given.slice(at + 1));
      if (parsed === undefined) return refuse('has a port that is not a number from 1 to 65535');
      port = parsed;
    }
  }
  host = host.replace(/\.$/, '');
  if (isIPv4(host) || isIPv6(host)) {
    const range = nonPublicRange(host);
    if (range !== undefined) {
      return refuse(
        `names an address of ${range}, which is never reached: the proxy refuses loopback, private, link-local, CGNAT, multicast and reserved addresses`,
      );
    }
    return [parseHost(host, port)];
  }
  const wildcard = host.startsWith('*.');
  const name = wildcard ? host.slice(2) : host;
  if (name.includes('*')) {
    return refuse('may hold * only as its whole first label: *.example.org');
  }
  if (!isHostName(name)) {
    return refuse(
      'is not a host name (letters, digits, "-" and "_" in dot-separated labels; a name in another script in its xn-- form), an IP address or a preset',
    );
  }
  if (wildcard && !name.includes('.')) {
    return refuse('would allow a whole top-level domain: name a domain below it, *.example.org');
  }
  return [{ host: name, wildcard, port }];
}

function parseHost(host: string, port: number | null): HostPattern {
  if (host.startsWith('*.')) return { host: host.slice(2), wildcard: true, port };
  return { host: normalHost(host), wildcard: false, port };
}

function portOf(text: string): number | undefined {
  if (!/^[1-9]\d{0,4}$/.test(text)) return undefined;
  const port = Number(text);
  return port <= 65_535 ? port : undefined;
}

/** A project's patterns, presets expanded: every host they allow, or the first refusal. */
export function parseAllowList(patterns: readonly string[]): HostPattern[] | { error: string } {
  if (patterns.length > ALLOW_MAX_PATTERNS) {
    return { error: `at most ${ALLOW_MAX_PATTERNS} patterns are allowed` };
  }
  const out: HostPattern[] = [];
  for (const pattern of patterns) {
    const parsed = parsePattern(pattern);
    if ('error' in parsed) return parsed;
    out.push(...parsed);
  }
  return out;
}

/**
 * Whether a request for `host` (as normalHost gives it) at `port` is allowed: a pattern names
 * the host exactly, or a domain it is below (`*.example.org`: `a.example.org`, `a.b.example.org`,
 * not `example.org`), with the pattern's port, else `defaultPort` (443 for CONNECT, 80 for plain
 * HTTP).
 */
export function isAllowed(
  patterns: readonly HostPattern[],
  host: string,
  port: number,
  defaultPort: number,
): boolean {
  return patterns.some(
    (p) =>
      (p.port ?? defaultPort) === port &&
      (p.wildcard ? host.endsWith(`.${p.host}`) : host === p.host),
  );
}

/** Each of NON_PUBLIC_RANGES as a list of its own, so that a refusal can name its range. */
const RANGE_LISTS: readonly (readonly [string, BlockList])[] = NON_PUBLIC_RANGES.map((range) => {
  const [base = '', length = ''] = range.split('/');
  const list = new BlockList();
  list.addSubnet(base, Number(length), isIPv6(base) ? 'ipv6' : 'ipv4');
  return [range, list] as const;
});

/**
 * The range of NON_PUBLIC_RANGES that holds an IP address, if any. An IPv4-mapped IPv6 address
 * (`::ffff:127.0.0.1`) is in the ranges of its IPv4 address: a socket sends to that one.
 */
export function nonPublicRange(address: string): string | undefined {
  const family = isIPv6(address) ? 'ipv6' : isIPv4(address) ? 'ipv4' : undefined;
  if (family === undefined) return undefined;
  return RANGE_LISTS.find(([, list]) => list.check(address, family))?.[0];
}
