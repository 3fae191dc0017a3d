// Where a webhook may send: a URL is checked when an endpoint is created and again, after DNS
// resolution, at every delivery attempt, so that a project admin cannot make Errand's workers
// reach its own network (loopback, private ranges, cloud metadata) — directly, through a name
// that resolves there, or through a name whose answer changes between check and connect.
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';
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

type Address = ipaddr.IPv4 | ipaddr.IPv6;

interface Range {
  cidr: [Address, number];
  risk: AddressRisk;
}

function range(cidr: string, risk: AddressRisk): Range {
  return { cidr: ipaddr.parseCIDR(cidr), risk };
}

// The IANA special-purpose registries. Order matters: the first match names the risk, so the
// metadata addresses and the broadcast address come before the ranges that hold them.
const IPV4_RANGES: readonly Range[] = [
  range('169.254.169.254/32', 'cloud metadata'),
  range('100.100.100.200/32', 'cloud metadata'),
  range('255.255.255.255/32', 'broadcast'),
  range('0.0.0.0/8', 'unspecified'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'shared (carrier-grade NAT)'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'),
  range('192.0.2.0/24', 'for documentation only'),
  range('192.88.99.0/24', 'reserved'),
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'for benchmarking only'),
  range('198.51.100.0/24', 'for documentation only'),
  range('203.0.113.0/24', 'for documentation only'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
];

const IPV6_RANGES: readonly Range[] = [
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  range('fd00:ec2::254/128', 'cloud metadata'),
  range('64:ff9b:1::/48', 'private'),
  range('100::/64', 'reserved'),
  range('2001:db8::/32', 'for documentation only'),
  range('2001:2::/48', 'for benchmarking only'),
  range('2001::/23', 'reserved'),
  range('3fff::/20', 'for documentation only'),
  range('fc00::/7', 'private'),
  range('fe80::/10', 'link-local'),
  range('fec0::/10', 'private'),
  range('ff00::/8', 'multicast'),
];

// IPv6 forms that carry an IPv4 address a packet may end up at: the embedded address is
// judged as itself (`::ffff:127.0.0.1` is loopback).
const EMBEDDING_V4: readonly { range: Range; offset: number; form: string }[] = [
  { range: range('::ffff:0:0/96', 'reserved'), offset: 12, form: 'IPv4-mapped' },
  { range: range('64:ff9b::/96', 'reserved'), offset: 12, form: 'NAT64' },
  { range: range('2002::/16', 'reserved'), offset: 2, form: '6to4' },
];

// Only 2000::/3 is allocated as global unicast; everything else (the deprecated
// IPv4-compatible ::a.b.c.d among it) is not an Internet host.
const GLOBAL_UNICAST_V6 = range('2000::/3', 'reserved');

/** Whether the address is in the range (an address of the other family never is). */
function matches(address: Address, { cidr }: Range): boolean {
  return address.kind() === cidr[0].kind() && address.match(cidr);
}

/** An IPv6 address in any textual form (`::`, a trailing dotted quad, a zone), or undefined. */
function parseIPv6(text: string): ipaddr.IPv6 | undefined {
  const ip = text.replace(/%.*$/, '');
  if (!isIPv6(ip)) return undefined;
  // ipaddr.js reads the deprecated IPv4-compatible `::a.b.c.d` as IPv4-mapped `::ffff:a.b.c.d`:
  // a trailing dotted quad written as its two hex groups is read as the address it is.
  const hex = ip.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) =>
    [Number(a) * 256 + Number(b), Number(c) * 256 + Number(d)].map((g) => g.toString(16)).join(':'),
  );
  try {
    return ipaddr.IPv6.parse(hex);
  } catch {
    return undefined;
  }
}

/** What makes an IP address unsafe for a webhook, with the IPv4 address it embeds if any. */
export function addressRisk(ip: string): AddressRisk | undefined {
  return assess(ip)?.risk;
}

function assess(ip: string): { risk: AddressRisk; via?: string } | undefined {
  if (isIPv4(ip)) {
    const address = ipaddr.IPv4.parse(ip);
    return IPV4_RANGES.find((r) => matches(address, r));
  }
  const address = parseIPv6(ip);
  if (!address) return { risk: 'reserved' };
  const loopbackOrUnspecified = IPV6_RANGES.slice(0, 2).find((r) => matches(address, r));
  if (loopbackOrUnspecified) return loopbackOrUnspecified;
  for (const e of EMBEDDING_V4) {
    if (!matches(address, e.range)) continue;
    const inner = address
      .toByteArray()
      .slice(e.offset, e.offset + 4)
      .join('.');
    const risk = addressRisk(inner);
    return risk ? { risk, via: `${e.form} ${inner}` } : undefined;
  }
  const special = IPV6_RANGES.find((r) => matches(address, r));
  if (special) return special;
  return matches(address, GLOBAL_UNICAST_V6) ? undefined : { risk: 'reserved' };
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

/**
 * Resolves through the address check and answers node:net with checked addresses only. Node
 * asks with `all: true` (it tries each address in turn) or for one address of a family.
 */
export function checkedLookup(allowPrivate: boolean, resolve: Resolve): LookupFunction {
  return (hostname, options, callback) => {
    resolveSafe(hostname, allowPrivate, resolve).then(
      (addresses) => {
        const family = options.family === 4 || options.family === 6 ? options.family : undefined;
        const usable = family ? addresses.filter((a) => a.family === family) : addresses;
        const first = usable[0];
        if (!first) {
          callback(new UnsafeTargetError(`host ${hostname} has no IPv${family} address`), '');
        } else if (options.all) {
          callback(null, usable);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), ''),
    );
  };
}
