// Where a webhook may send: a URL is checked when an endpoint is created and again, after DNS
// resolution, at every delivery attempt, so that a project admin cannot make Errand's workers
// reach its own network (loopback, private ranges, cloud metadata) — directly, through a name
// that resolves there, or through a name whose answer changes between check and connect.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIPv4, isIPv6 } from 'node:net';
import { AppError, errorMessage } from '../../errors.ts';

/** One address of a resolved name, as node:dns gives it. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has; injectable for tests without DNS. */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

export const resolveAll: Resolve = async (hostname) => {
  const answers = await dnsLookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** Why an address is unsafe to send to; `undefined` when it is a public unicast address. */
export type AddressRisk =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'shared (carrier-grade NAT)'
  | 'cloud metadata'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'for documentation only'
  | 'for benchmarking only';

interface Range {
  bytes: number[];
  prefix: number;
  risk: AddressRisk;
}

function v4(cidr: string, risk: AddressRisk): Range {
  const [ip = '', prefix = '32'] = cidr.split('/');
  return { bytes: ip.split('.').map(Number), prefix: Number(prefix), risk };
}

function v6(cidr: string, risk: AddressRisk): Range {
  const [ip = '', prefix = '128'] = cidr.split('/');
  const bytes = parseIPv6(ip);
  if (!bytes) throw new Error(`bad range ${cidr}`);
  return { bytes, prefix: Number(prefix), risk };
}

// The IANA special-purpose registries. Order matters: the first match names the risk, so the
// metadata addresses and the broadcast address come before the ranges that hold them.
const IPV4_RANGES: readonly Range[] = [
  v4('169.254.169.254/32', 'cloud metadata'),
  v4('100.100.100.200/32', 'cloud metadata'),
  v4('255.255.255.255/32', 'broadcast'),
  v4('0.0.0.0/8', 'unspecified'),
  v4('10.0.0.0/8', 'private'),
  v4('100.64.0.0/10', 'shared (carrier-grade NAT)'),
  v4('127.0.0.0/8', 'loopback'),
  v4('169.254.0.0/16', 'link-local'),
  v4('172.16.0.0/12', 'private'),
  v4('192.0.0.0/24', 'reserved'),
  v4('192.0.2.0/24', 'for documentation only'),
  v4('192.88.99.0/24', 'reserved'),
  v4('192.168.0.0/16', 'private'),
  v4('198.18.0.0/15', 'for benchmarking only'),
  v4('198.51.100.0/24', 'for documentation only'),
  v4('203.0.113.0/24', 'for documentation only'),
  v4('224.0.0.0/4', 'multicast'),
  v4('240.0.0.0/4', 'reserved'),
];

const IPV6_RANGES: readonly Range[] = [
  v6('::/128', 'unspecified'),
  v6('::1/128', 'loopback'),
  v6('fd00:ec2::254/128', 'cloud metadata'),
  v6('64:ff9b:1::/48', 'private'),
  v6('100::/64', 'reserved'),
  v6('2001:db8::/32', 'for documentation only'),
  v6('2001:2::/48', 'for benchmarking only'),
  v6('2001::/23', 'reserved'),
  v6('3fff::/20', 'for documentation only'),
  v6('fc00::/7', 'private'),
  v6('fe80::/10', 'link-local'),
  v6('fec0::/10', 'private'),
  v6('ff00::/8', 'multicast'),
];

// IPv6 forms that carry an IPv4 address a packet may end up at: the embedded address is
// judged as itself (`::ffff:127.0.0.1` is loopback).
const EMBEDDING_V4: readonly { range: Range; offset: number; form: string }[] = [
  { range: v6('::ffff:0:0/96', 'reserved'), offset: 12, form: 'IPv4-mapped' },
  { range: v6('64:ff9b::/96', 'reserved'), offset: 12, form: 'NAT64' },
  { range: v6('2002::/16', 'reserved'), offset: 2, form: '6to4' },
];

// Only 2000::/3 is allocated as global unicast; everything else (the deprecated
// IPv4-compatible ::a.b.c.d among it) is not an Internet host.
const GLOBAL_UNICAST_V6 = v6('2000::/3', 'reserved');

function matches(bytes: readonly number[], range: Range): boolean {
  let bits = range.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((range.bytes[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** The 16 bytes of an IPv6 address in any textual form (`::`, a trailing dotted quad, a zone). */
function parseIPv6(text: string): number[] | undefined {
  const ip = text.replace(/%.*$/, '');
  if (!isIPv6(ip)) return undefined;
  let tail: number[] = [];
  let head = ip;
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(ip);
  if (quad?.[1]) {
    tail = quad[1].split('.').map(Number);
    head = `${ip.slice(0, -quad[1].length)}0:0`;
  }
  const [left = '', right] = head.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const l = groups(left);
  const r = right === undefined ? [] : groups(right);
  const fill = right === undefined ? [] : Array<string>(8 - l.length - r.length).fill('0');
  const all = [...l, ...fill, ...r];
  if (all.length !== 8) return undefined;
  const bytes = all.flatMap((g) => {
    const n = Number.parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** What makes an IP address unsafe for a webhook, with the IPv4 address it embeds if any. */
export function addressRisk(ip: string): AddressRisk | undefined {
  return assess(ip)?.risk;
}

function assess(ip: string): { risk: AddressRisk; via?: string } | undefined {
  if (isIPv4(ip)) {
    const bytes = ip.split('.').map(Number);
    return IPV4_RANGES.find((r) => matches(bytes, r));
  }
  const bytes = parseIPv6(ip);
  if (!bytes) return { risk: 'reserved' };
  const loopbackOrUnspecified = IPV6_RANGES.slice(0, 2).find((r) => matches(bytes, r));
  if (loopbackOrUnspecified) return loopbackOrUnspecified;
  for (const e of EMBEDDING_V4) {
    if (!matches(bytes, e.range)) continue;
    const inner = bytes.slice(e.offset, e.offset + 4).join('.');
    const risk = addressRisk(inner);
    return risk ? { risk, via: `${e.form} ${inner}` } : undefined;
  }
  const range = IPV6_RANGES.find((r) => matches(bytes, r));
  if (range) return range;
  return matches(bytes, GLOBAL_UNICAST_V6) ? undefined : { risk: 'reserved' };
}

/**
 * A readable reason why `ip` must not be sent to ("address 10.0.0.1 is private"), or
 * undefined for a public unicast address.
 */
export function unsafeAddressReason(ip: string): string | undefined {
  const found = assess(ip);
  if (!found) return undefined;
  return `address ${ip} is ${found.risk}${found.via ? ` (${found.via})` : ''}`;
}

/** A URL's host without the brackets of an IPv6 literal. */
export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

export class UnsafeTargetError extends Error {
  override name = 'UnsafeTargetError';
}

/**
 * Every address `hostname` has, all checked: throws UnsafeTargetError naming the first unsafe
 * one (or the name that does not resolve). An IP literal is checked as itself.
 */
export async function resolveSafe(
  hostname: string,
  allowPrivate: boolean,
  resolve: Resolve = resolveAll,
): Promise<ResolvedAddress[]> {
  if (isIPv4(hostname) || isIPv6(hostname)) {
    const reason = allowPrivate ? undefined : unsafeAddressReason(hostname);
    if (reason) throw new UnsafeTargetError(reason);
    return [{ address: hostname, family: isIPv4(hostname) ? 4 : 6 }];
  }
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolve(hostname);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new UnsafeTargetError(
      code === 'ENOTFOUND' || code === 'ENODATA'
        ? `host ${hostname} does not resolve`
        : `host ${hostname} could not be resolved (${typeof code === 'string' ? code : errorMessage(err)})`,
    );
  }
  if (addresses.length === 0) throw new UnsafeTargetError(`host ${hostname} does not resolve`);
  if (!allowPrivate) {
    for (const a of addresses) {
      const reason = unsafeAddressReason(a.address);
      if (reason) throw new UnsafeTargetError(`host ${hostname} resolves to ${reason}`);
    }
  }
  return addresses;
}

/**
 * Checks a URL a webhook may target: https only (http too with `allowPrivate`), no
 * credentials, and every address of its host public unless `allowPrivate`. Throws
 * AppError('bad_request') saying why; returns the parsed URL.
 */
export async function checkWebhookTarget(
  url: string,
  allowPrivate: boolean,
  resolve: Resolve = resolveAll,
): Promise<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new AppError('bad_request', 'webhook url is not a valid URL');
  }
  if (parsed.protocol !== 'https:' && !(allowPrivate && parsed.protocol === 'http:')) {
    throw new AppError(
      'bad_request',
      allowPrivate
        ? 'webhook url must use https:// or http://'
        : 'webhook url must use https:// (http:// only with ERRAND_WEBHOOK_ALLOW_PRIVATE=true)',
    );
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new AppError(
      'bad_request',
      'webhook url must not contain credentials: receivers verify the signature instead',
    );
  }
  // A local receiver is allowed whatever its name resolves to, or whether it resolves yet.
  if (allowPrivate) return parsed;
  try {
    await resolveSafe(bareHost(parsed), false, resolve);
  } catch (err) {
    if (!(err instanceof UnsafeTargetError)) throw err;
    throw new AppError(
      'bad_request',
      `webhook url is not allowed: ${err.message}; only public addresses can receive webhooks (ERRAND_WEBHOOK_ALLOW_PRIVATE=true allows private ones)`,
    );
  }
  return parsed;
}
