// The bubblewrap command line for one run: what the sandbox sees (an allowlist, never the
// host's `/`), what it may write (the checkout, not its .git), its environment (built here,
// none inherited) and the limits every process in it runs under.
import { lstat, readFile, readlink, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, sep } from 'node:path';

/** Where the job's checkout appears inside the sandbox: paths in output read the same each run. */
const WORKSPACE = '/workspace';
/** The only PATH commands get; programs outside /usr (a user's ~/.local, /opt) are not there. */
export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** HOME inside the sandbox: an empty directory, or SandboxRun's `home` mounted there. */
export const SANDBOX_HOME = '/tmp/home';
const HOME = SANDBOX_HOME;
/** The size of /dev/shm, as a container runtime's default. */
const SHM_BYTES = 64 * 1024 * 1024;
/** Where the forwarder's sockets are mounted: `<name>.sock` (model.sock, egress.sock). */
const SOCKET_DIR = '/run/errand';
/** The forwarder's ready line arrives through this FIFO in the sandbox's private /tmp. */
const FORWARDER_FIFO = '/tmp/.errand-forwarder';

// Top-level directories that are (or link into) the system's programs and libraries.
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

// What of /etc programs need: users and groups by name (no shadow files), name resolution,
// the dynamic linker's cache, Debian's alternatives (links under /usr/bin point there), TLS
// roots, time zone. Left out on purpose: ssh and its keys, shadow, sudoers, system-wide
// gitconfig and npmrc (they may carry credentials or redirect tools), the service's own files.
const ETC_ENTRIES = [
  'alternatives',
  'ca-certificates',
  'ca-certificates.conf',
  'debian_version',
  'gai.conf',
  'group',
  'host.conf',
  'hostname',
  'hosts',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'locale.alias',
  'localtime',
  'mime.types',
  'nsswitch.conf',
  'os-release',
  'passwd',
  'protocols',
  'resolv.conf',
  'services',
  'ssl',
  'timezone',
];

interface Limits {
  cpuSeconds: number;
  memoryMb: number;
  processes: number;
  fileSizeMb: number;
}

export interface PlanInput {
  checkout: string;
  cwd: string;
  command: string;
  limits: Limits;
  /** bwrap's version as [major, minor, patch], for options older releases lack. */
  version: readonly number[];
  prlimit: string;
  /** Descriptor bwrap writes the sandbox's init pid to (as JSON). */
  infoFd: number;
  /** Descriptor the wrapper writes one byte to once the sandbox is up, just before the command. */
  startedFd: number;
  /**
   * Descriptor the sandbox waits on before anything runs in it (bwrap's --block-fd): the user-
   * mode network is attached to its namespace meanwhile. Only with `network`.
   */
  blockFd?: number;
  /**
   * One user namespace, not two: without --disable-userns and devpts (each makes bwrap nest a
   * second one), so that pasta, run by a user other than root, can enter the namespace that
   * owns the sandbox's network. Only for network runs of a non-root service.
   */
  flatUserns?: boolean;
  /**
   * Descriptor bwrap reads the sandbox's /etc/resolv.conf from, instead of binding the host's:
   * a network run's, which names the resolver pasta maps. Only with `network`.
   */
  resolvConfFd?: number;
  /**
   * The egress filter loaded inside (a non-root network run, whose sandbox owns its network
   * namespace; root loads it from outside, network.ts): the sandbox keeps CAP_NET_ADMIN and
   * CAP_SETPCAP until `nft` has read the ruleset from descriptor `fd`, and `setpriv` drops them
   * all, bounding set included, before the command runs.
   */
  egress?: { fd: number; nft: string; setpriv: string };
  /** Size of the private /tmp (HOME's parent) in bytes, where bwrap can bound it. */
  scratchBytes: number;
  /** More environment, set after (and over) the sandbox's own. */
  env?: Readonly<Record<string, string>>;
  /** Host paths mounted read-only at the same path. */
  readOnlyBinds?: readonly string[];
  /** A host directory mounted writable as HOME, instead of an empty one in /tmp. */
  home?: string;
  /**
   * The forwarder to start: Errand's Node and its script, listening on 127.0.0.1 at each route's
   * port and piping to the route's socket, which is mounted at /run/errand/<name>.sock.
   */
  forwarder?: { node: string; source: string; routes: readonly ForwarderRoute[] };
  /** The command's stderr kept apart from its stdout (not joined to it). */
  separateStderr: boolean;
  /**
   * Descriptor the wrapper reads the secrets' script (secretScript) from, after the forwarder
   * started and just before the command: their values are on no command line.
   */
  secretsFd?: number;
}

/** One port of the forwarder and the socket of Errand's it leads to (a proxy's). */
export interface ForwarderRoute {
  /** The socket's name inside: /run/errand/<name>.sock. */
  name: string;
  socketPath: string;
  port: number;
}

export class InvalidRunError extends Error {
  override name = 'InvalidRunError';
}

/** The directory the command starts in, as seen inside the sandbox. */
function insideCwd(checkout: string, cwd: string): string {
  if (!isAbsolute(checkout) || !isAbsolute(cwd)) {
    throw new InvalidRunError('checkout and cwd must be absolute paths');
  }
  const rel = relative(checkout, cwd);
  if (rel === '') return WORKSPACE;
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw new InvalidRunError('cwd must be inside the checkout');
  }
  return join(WORKSPACE, rel);
}

// In the sandbox: the egress filter loaded (if it is loaded here), the forwarder started and
// listening (if any), the secrets read into the environment (if any), stderr joined to stdout
// (one pipe, arrival order kept) unless kept apart, the start signalled and that descriptor
// closed so the command cannot hold or misuse it, then the command runs as the same process
// (without a capability left, where the filter was loaded here), so its exit ends the sandbox's
// init and with it every process left (the forwarder too). Positional parameters: $1 the
// command; with a forwarder $2 node, $3 its script, then a port and a socket for each of its
// routes. A filter or forwarder that fails leaves its message on stderr, before the start.
function wrapper(
  fd: number,
  forwarder: boolean,
  separateStderr: boolean,
  egress: PlanInput['egress'],
  secretsFd: number | undefined,
): string {
  const steps: string[] = [];
  if (egress !== undefined) {
    steps.push(`${quote(egress.nft)} -f - <&${egress.fd} || exit 125`, `exec ${egress.fd}<&-`);
  }
  if (forwarder) {
    const closed = secretsFd === undefined ? '' : ` ${secretsFd}<&-`;
    steps.push(
      `mkfifo ${FORWARDER_FIFO}`,
      `(n=$2 s=$3; shift 3; exec "$n" -e "$s" "$@") </dev/null >${FORWARDER_FIFO} ${fd}>&-${closed} &`,
      `read -r ready <${FORWARDER_FIFO} || { echo "the forwarder to Errand's proxies did not start" >&2; exit 125; }`,
      `rm -f ${FORWARDER_FIFO}`,
    );
  }
  if (secretsFd !== undefined) {
    // Errand's own script of `export NAME='value'` lines (secretScript), read whole first.
    steps.push(
      `secrets=$(cat <&${secretsFd}) || { echo "the secrets could not be read" >&2; exit 125; }`,
      `exec ${secretsFd}<&-`,
      'eval "$secrets"',
      'unset secrets',
    );
  }
  if (!separateStderr) steps.push('exec 2>&1');
  const drop =
    egress === undefined
      ? ''
      : `${quote(egress.setpriv)} --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- `;
  steps.push(`printf 1 >&${fd}`, `exec ${fd}>&-`, `exec ${drop}/bin/sh -c "$1"`);
  // Lines, not '; ': a background job's '&' cannot be followed by ';'.
  return steps.join('\n');
}

/** A word the shell reads as `text` itself. */
function quote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function checkEnv(name: string, value: string): void {
  if (!ENV_NAME.test(name))
    throw new InvalidRunError(`environment name ${JSON.stringify(name)} is not valid`);
  if (value.includes('\0'))
    throw new InvalidRunError(`environment value of ${name} contains a NUL byte`);
}

function extraEnv(env: Readonly<Record<string, string>>): string[] {
  const args: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    checkEnv(name, value);
    args.push('--setenv', name, value);
  }
  return args;
}

/** The variables the sandbox sets itself (bwrapArgs): no secret replaces them. */
const OWN_ENV = new Set(['PATH', 'HOME', 'LANG', 'TERM', 'TMPDIR']);

/**
 * The shell script that exports `secrets` (SandboxRun.secretEnv), for the wrapper to read from
 * its descriptor: every value one quoted word. A name the sandbox or `env` (an engine's own
 * variables) sets keeps their value. Empty when there is nothing to export.
 */
export function secretScript(
  secrets: Readonly<Record<string, string>>,
  env: Readonly<Record<string, string>>,
): string {
  let script = '';
  for (const [name, value] of Object.entries(secrets)) {
    checkEnv(name, value);
    if (OWN_ENV.has(name) || Object.hasOwn(env, name)) continue;
    script += `export ${name}=${quote(value)}\n`;
  }
  return script;
}

export async function bwrapArgs(input: PlanInput): Promise<string[]> {
  const cwd = insideCwd(input.checkout, input.cwd);
  const isolated = isolation(input);
  return [...isolated, ...(await mounts(input)), ...limitedCommand(input, cwd)];
}

/** The namespaces, capabilities and environment: nothing of the host's but what is named. */
function isolation(input: PlanInput): string[] {
  return [
    // A new user, PID, IPC, UTS, cgroup and network namespace; a user namespace always, even
    // for root, so the command has no capability anywhere.
    '--unshare-all',
    '--unshare-user',
    ...(atLeast(input.version, [0, 8, 0]) && !input.flatUserns ? ['--disable-userns'] : []),
    '--die-with-parent',
    // A new session: no controlling terminal, so no TIOCSTI into the service's terminal.
    '--new-session',
    '--cap-drop',
    'ALL',
    // Held by the wrapper only, to load the egress filter; dropped before the command runs.
    ...(input.egress === undefined
      ? []
      : ['--cap-add', 'CAP_NET_ADMIN', '--cap-add', 'CAP_SETPCAP']),
    '--clearenv',
    '--setenv',
    'PATH',
    SANDBOX_PATH,
    '--setenv',
    'HOME',
    HOME,
    '--setenv',
    'LANG',
    'C.UTF-8',
    '--setenv',
    'TERM',
    'dumb',
    '--setenv',
    'TMPDIR',
    '/tmp',
    ...extraEnv(input.env ?? {}),
  ];
}

/**
 * The sandbox's file system: the system read-only, its own /proc, /dev, /tmp and HOME, the
 * checkout writable with its .git read-only, and then the root and /dev made read-only.
 */
async function mounts(input: PlanInput): Promise<string[]> {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    const info = await lstat(dir).catch(() => null);
    if (info === null) continue;
    if (info.isSymbolicLink()) args.push('--symlink', await readlink(dir), dir);
    else if (info.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  args.push('--dir', '/etc');
  for (const entry of ETC_ENTRIES) {
    if (entry === 'resolv.conf' && input.resolvConfFd !== undefined) {
      // A file of the root's tmpfs, read-only with it.
      args.push('--file', String(input.resolvConfFd), '/etc/resolv.conf');
    } else args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`);
  }
  const sized = (bytes: number) =>
    atLeast(input.version, [0, 7, 0]) ? ['--size', String(bytes)] : [];
  args.push('--proc', '/proc', ...(input.flatUserns ? await plainDev() : ['--dev', '/dev']));
  args.push(
    // Shared memory and a private /tmp (HOME in it) live in the host's memory: bounded, where
    // bwrap can, and /dev itself read-only (made so at the end), so nothing else holds files.
    ...sized(SHM_BYTES),
    '--tmpfs',
    '/dev/shm',
    ...sized(input.scratchBytes),
    '--tmpfs',
    '/tmp',
    ...(input.home === undefined
      ? ['--dir', HOME]
      : ['--bind', await directory(input.home, 'home'), HOME]),
    '--bind',
    input.checkout,
    WORKSPACE,
  );
  for (const path of input.readOnlyBinds ?? []) {
    if (!isAbsolute(path) || (await lstat(path).catch(() => null)) === null) {
      throw new InvalidRunError(
        `read-only bind ${JSON.stringify(path)} must be an existing absolute path`,
      );
    }
    args.push('--ro-bind', path, path);
  }
  const { forwarder } = input;
  if (forwarder !== undefined) args.push(...(await forwarderMounts(forwarder)));
  const gitDir = join(input.checkout, '.git');
  if (await lstat(gitDir).catch(() => null)) {
    // After the checkout's bind, so it covers it: hooks and config cannot be planted.
    args.push('--ro-bind', gitDir, join(WORKSPACE, '.git'));
    for (const objects of await borrowedObjects(gitDir)) args.push('--ro-bind', objects, objects);
  }
  args.push(
    '--remount-ro',
    '/dev',
    // The root is bwrap's own tmpfs holding the mount points: read-only too, once they exist.
    '--remount-ro',
    '/',
  );
  return args;
}

/** Where the command starts, and the command itself under its resource limits and wrapper. */
function limitedCommand(input: PlanInput, cwd: string): string[] {
  const { limits, forwarder } = input;
  const mb = 1024 * 1024;
  return [
    '--chdir',
    cwd,
    '--info-fd',
    String(input.infoFd),
    ...(input.blockFd === undefined ? [] : ['--block-fd', String(input.blockFd)]),
    '--',
    input.prlimit,
    // Soft then hard: SIGXCPU at the limit, SIGKILL a few seconds later for one that ignores it.
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 5}`,
    // RLIMIT_DATA, not RLIMIT_AS: runtimes (V8, Go, WebAssembly) reserve far more address
    // space than they use, and an address-space bound breaks them at start.
    `--data=${limits.memoryMb * mb}`,
    // Counted per user inside this sandbox's own user namespace, i.e. this run only.
    `--nproc=${limits.processes}`,
    `--fsize=${limits.fileSizeMb * mb}`,
    '--core=0',
    '--',
    '/bin/sh',
    '-c',
    wrapper(
      input.startedFd,
      forwarder !== undefined,
      input.separateStderr,
      input.egress,
      input.secretsFd,
    ),
    'sh',
    input.command,
    ...(forwarder === undefined
      ? []
      : [
          forwarder.node,
          forwarder.source,
          ...forwarder.routes.flatMap((r) => [String(r.port), `${SOCKET_DIR}/${r.name}.sock`]),
        ]),
  ];
}

/** The forwarder's node and each route's socket, mounted read-only, once each is checked. */
async function forwarderMounts(forwarder: NonNullable<PlanInput['forwarder']>): Promise<string[]> {
  const { routes } = forwarder;
  if (routes.length === 0) throw new InvalidRunError('the forwarder needs a route');
  const args: string[] = [];
  for (const route of routes) {
    if (!Number.isInteger(route.port) || route.port < 1 || route.port > 65_535) {
      throw new InvalidRunError(
        `the ${route.name} proxy port must be a whole number from 1 to 65535`,
      );
    }
    if (!/^[a-z]+$/.test(route.name))
      throw new InvalidRunError('a route name is lower-case letters');
    const socket = await lstat(route.socketPath).catch(() => null);
    if (socket === null || !socket.isSocket()) {
      throw new InvalidRunError(`the ${route.name} proxy socket does not exist`);
    }
    // A Unix socket takes connections through a read-only mount too.
    args.push('--ro-bind', route.socketPath, `${SOCKET_DIR}/${route.name}.sock`);
  }
  const distinct = (values: readonly unknown[]) => new Set(values).size === values.length;
  if (!distinct(routes.map((r) => r.port)) || !distinct(routes.map((r) => r.name))) {
    throw new InvalidRunError("the forwarder's routes need distinct ports and names");
  }
  return [...args, '--ro-bind', forwarder.node, forwarder.node];
}

/**
 * The object directories a `--reference`/`--shared` clone borrows from (its alternates file),
 * bound read-only at the same path so git inside can read history. They are the project's
 * mirror's objects: this repository's content and nothing else of the data directory.
 */
async function borrowedObjects(gitDir: string): Promise<string[]> {
  const text = await readFile(join(gitDir, 'objects', 'info', 'alternates'), 'utf8').catch(
    () => '',
  );
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const path = line.trim();
    if (!isAbsolute(path) || basename(path) !== 'objects' || !dirname(path).endsWith('.git')) {
      continue;
    }
    if ((await stat(path).catch(() => null))?.isDirectory()) out.push(path);
  }
  return out;
}

/**
 * /dev without devpts (which --dev mounts, and which makes bwrap nest a user namespace): the
 * usual devices bound from the host, and the links to the process's descriptors.
 */
async function plainDev(): Promise<string[]> {
  const args = ['--tmpfs', '/dev'];
  for (const device of ['null', 'zero', 'full', 'random', 'urandom', 'tty']) {
    if ((await lstat(`/dev/${device}`).catch(() => null))?.isCharacterDevice()) {
      args.push('--dev-bind', `/dev/${device}`, `/dev/${device}`);
    }
  }
  args.push('--symlink', '/proc/self/fd', '/dev/fd');
  for (const [i, name] of ['stdin', 'stdout', 'stderr'].entries()) {
    args.push('--symlink', `/proc/self/fd/${i}`, `/dev/${name}`);
  }
  return args;
}

async function directory(path: string, what: string): Promise<string> {
  if (!isAbsolute(path) || !(await stat(path).catch(() => null))?.isDirectory()) {
    throw new InvalidRunError(`${what} must be an existing absolute directory`);
  }
  return path;
}

function atLeast(version: readonly number[], want: readonly number[]): boolean {
  for (let i = 0; i < want.length; i++) {
    const have = version[i] ?? 0;
    const need = want[i] ?? 0;
    if (have !== need) return have > need;
  }
  return true;
}
