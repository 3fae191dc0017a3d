// The bubblewrap command line for one run: what the sandbox sees (an allowlist, never the
// host's `/`), what it may write (the checkout, not its .git), its environment (built here,
// none inherited) and the limits every process in it runs under.
import { lstat, readFile, readlink, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, sep } from 'node:path';

/** Where the job's checkout appears inside the sandbox: paths in output read the same each run. */
const WORKSPACE = '/workspace';
/** The only PATH commands get; programs outside /usr (a user's ~/.local, /opt) are not there. */
export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const HOME = '/tmp/home';

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
  network: boolean;
  /** bwrap's version as [major, minor, patch], for options older releases lack. */
  version: readonly number[];
  prlimit: string;
  /** Descriptor bwrap writes the sandbox's init pid to (as JSON). */
  infoFd: number;
  /** Descriptor the wrapper writes one byte to once the sandbox is up, just before the command. */
  startedFd: number;
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

// In the sandbox: stderr joins stdout (one pipe, arrival order kept), the start is signalled
// and that descriptor closed so the command cannot hold or misuse it, then the command runs
// as the same process, so its exit ends the sandbox's init and with it every process left.
function wrapper(fd: number): string {
  return `exec 2>&1; printf 1 >&${fd}; exec ${fd}>&-; exec /bin/sh -c "$1"`;
}

export async function bwrapArgs(input: PlanInput): Promise<string[]> {
  const cwd = insideCwd(input.checkout, input.cwd);
  const args: string[] = [
    // A new user, PID, IPC, UTS, cgroup and network namespace; a user namespace always, even
    // for root, so the command has no capability anywhere.
    '--unshare-all',
    '--unshare-user',
    ...(input.network ? ['--share-net'] : []),
    ...(atLeast(input.version, [0, 8, 0]) ? ['--disable-userns'] : []),
    '--die-with-parent',
    // A new session: no controlling terminal, so no TIOCSTI into the service's terminal.
    '--new-session',
    '--cap-drop',
    'ALL',
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
  ];
  for (const dir of SYSTEM_DIRS) {
    const info = await lstat(dir).catch(() => null);
    if (info === null) continue;
    if (info.isSymbolicLink()) args.push('--symlink', await readlink(dir), dir);
    else if (info.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  args.push('--dir', '/etc');
  for (const entry of ETC_ENTRIES) args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`);
  args.push(
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    // A private /tmp lives in the host's memory: bounded like a file, where bwrap can.
    ...(atLeast(input.version, [0, 7, 0])
      ? ['--size', String(input.limits.fileSizeMb * 1024 * 1024)]
      : []),
    '--tmpfs',
    '/tmp',
    '--dir',
    HOME,
    '--bind',
    input.checkout,
    WORKSPACE,
  );
  const gitDir = join(input.checkout, '.git');
  if (await lstat(gitDir).catch(() => null)) {
    // After the checkout's bind, so it covers it: hooks and config cannot be planted.
    args.push('--ro-bind', gitDir, join(WORKSPACE, '.git'));
    for (const objects of await borrowedObjects(gitDir)) args.push('--ro-bind', objects, objects);
  }
  const { limits } = input;
  const mb = 1024 * 1024;
  args.push(
    // The root is bwrap's own tmpfs holding the mount points: read-only too, once they exist.
    '--remount-ro',
    '/',
    '--chdir',
    cwd,
    '--info-fd',
    String(input.infoFd),
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
    wrapper(input.startedFd),
    'sh',
    input.command,
  );
  return args;
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

function atLeast(version: readonly number[], want: readonly number[]): boolean {
  for (let i = 0; i < want.length; i++) {
    const have = version[i] ?? 0;
    const need = want[i] ?? 0;
    if (have !== need) return have > need;
  }
  return true;
}
