// Run by resolver.test.ts in a mount namespace of its own whose /etc/resolv.conf names a
// resolver on the host's loopback (not a test file itself): one setup command with the network,
// which prints the sandbox's resolv.conf, resolves a name, and connects by a second name to a
// server of its own on the address that one resolves to. Prints the run's output.
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import { runSandboxed } from '../../src/sandbox/sandbox.ts';

const [checkout, name, rebinding] = process.argv.slice(2);
if (checkout === undefined || name === undefined || rebinding === undefined) {
  throw new Error('usage: resolver-child.ts <checkout> <name> <name resolving to 127.0.0.1>');
}
const listen =
  'perl -MIO::Socket::IP -e \'my $s = IO::Socket::IP->new(LocalHost => "127.0.0.1", LocalPort => 7779, ' +
  'Listen => 5) or die "listen: $@"; open my $f, ">", "/tmp/up"; sleep 30\' & ' +
  'while [ ! -e /tmp/up ]; do sleep 0.05; done';
const connect =
  `perl -MIO::Socket::IP -e 'print "rebinding: ", (IO::Socket::IP->new(PeerHost => "${rebinding}", ` +
  'PeerPort => 7779, Timeout => 5) ? "connected" : $@ =~ s/^IO::Socket::IP: //r), "\\n"\'';
const r = await runSandboxed({
  checkout,
  cwd: checkout,
  command: [
    'cat /etc/resolv.conf',
    `getent ahostsv4 ${name} | head -1 || echo not-resolved`,
    `getent ahostsv4 ${rebinding} | head -1`,
    listen,
    connect,
  ].join('\n'),
  limits: { ...DEFAULT_LIMITS, timeoutSeconds: 20 },
  network: true,
  signal: new AbortController().signal,
});
process.stdout.write(r.output);
