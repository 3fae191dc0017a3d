// What a setup command's network reaches: public addresses only. Before the command starts, an
// nftables ruleset in the sandbox's own network namespace refuses every packet that would leave
// it for a loopback, private, link-local, CGNAT, multicast or reserved address, or for the
// networks of the host's own interfaces (the IPv4 ones also in their NAT64 and 6to4 forms),
// whatever name led there; only DNS to the resolver pasta
// maps passes, and the namespace's own loopback, which stays inside. The command holds no
// capability over that namespace, so it cannot change them.
import { spawn } from 'node:child_process';
import { BlockList, isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';
import { embeddingForms, NON_PUBLIC_RANGES } from '../projects/network.ts';
import { SANDBOX_PATH } from './args.ts';

export const HOW_TO_INSTALL_NFT =
  'install the nftables package, which provides nft (Debian/Ubuntu: apt-get install nftables; Fedora: dnf install nftables)';

/**
 * The networks of the host's interfaces (its own addresses, its gateway, its LAN), read now:
 * pasta gives the sandbox the host's address and routes, and carries a connection to any of
 * them out from the host, where a service bound to another of the host's addresses answers.
 */
function hostNetworks(): string[] {
  const out = new Set<string>();
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (!address.internal && address.cidr !== null) out.add(address.cidr);
    }
  }
  return [...out];
}

/**
 * Every network a sandbox's traffic may not reach, read now: the ranges that are never public
 * and the host's own networks. The one list both the setup network's filter and the egress
 * proxy (egress-proxy.ts) refuse.
 */
function refusedNetworks(): string[] {
  const host = hostNetworks();
  return [...NON_PUBLIC_RANGES, ...host, ...host.flatMap(embeddingForms)];
}

/** The same list as a BlockList, for checking addresses (an IPv4-mapped IPv6 one as its IPv4). */
export function refusedAddresses(): BlockList {
  const list = new BlockList();
  for (const network of refusedNetworks()) {
    const [base = '', length = ''] = network.split('/');
    list.addSubnet(base, Number(length), isIPv6(base) ? 'ipv6' : 'ipv4');
  }
  return list;
}

/**
 * The ruleset (nft's own syntax) for one run. An `icmpx admin-prohibited` reject fails a refused
 * connection at once, with "No route to host" (a dropped one would hang until its timeout).
 */
export function egressRuleset(resolver: string): string {
  const refuse = (range: string) =>
    `    ${range.includes(':') ? 'ip6' : 'ip'} daddr ${range} reject with icmpx type admin-prohibited`;
  return [
    'table inet errand_egress {',
    '  chain output {',
    '    type filter hook output priority filter; policy accept;',
    // The namespace's own loopback never leaves it (pasta maps no address to the host's): a
    // build tool's daemon on 127.0.0.1 (Gradle, Bazel) works. The addresses pasta copies from
    // the host are the namespace's own too, so they lead back to the sandbox itself.
    '    oifname "lo" accept',
    // The one address of a refused range that is let through: pasta's mapping to the host's
    // resolver, for DNS over UDP only. pasta maps nothing else (not DNS over TCP), so anything
    // else sent there would go from the host to that link-local address itself.
    `    ip daddr ${resolver} udp dport 53 accept`,
    // IPv6's neighbour discovery with pasta's side of the link, which answers it itself.
    '    icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept',
    // A refusal's own answer to the sandbox's socket, from one of its own (refused) addresses:
    // dropped, the connection would hang instead of failing. Only the kernel sends these: the
    // command has no raw sockets (no CAP_NET_RAW), and nothing refused can reach it to answer.
    '    icmp type destination-unreachable accept',
    '    icmpv6 type destination-unreachable accept',
    ...refusedNetworks().map(refuse),
    '  }',
    '}',
    '',
  ].join('\n');
}

const STDERR_CAP = 2_000;

/**
 * Loads `ruleset` into the network namespace of `pid` from outside (root, whose capabilities
 * reach every namespace): util-linux's nsenter joins only the network namespace, then runs nft.
 */
export function loadEgressRules(
  tools: { nsenter: string; nft: string },
  pid: number,
  ruleset: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(tools.nsenter, [`--net=/proc/${pid}/ns/net`, '--', tools.nft, '-f', '-'], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: { PATH: SANDBOX_PATH },
      cwd: '/',
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_CAP) stderr += chunk.toString('utf8');
    });
    child.stdin.on('error', () => {});
    child.stdin.end(ruleset);
    child.once('error', (err) => reject(new Error(`nft could not run: ${err.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else {
        const why = stderr.trim().split('\n')[0] || 'no message';
        reject(
          new Error(`the egress filter failed to load (nft exited with ${code ?? signal}): ${why}`),
        );
      }
    });
  });
}
