// Real git fixtures for the workspace tests: throwaway repositories, a bare "origin", and
// a loopback smart-HTTP git server (git http-backend behind a small CGI bridge).

import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gitInheritedEnv } from '../../src/config.ts';
import type { SpawnInfo, WorkspaceConfig } from '../../src/workspace/types.ts';

/** The environment for fixture git calls: nothing from the user's own configuration. */
const FIXTURE_ENV: Record<string, string> = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Fixture',
  GIT_AUTHOR_EMAIL: 'fixture@example.test',
  GIT_COMMITTER_NAME: 'Fixture',
  GIT_COMMITTER_EMAIL: 'fixture@example.test',
  LC_ALL: 'C',
};

/** Runs git for test setup and inspection (not through the module under test). */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    'git',
    ['-c', 'init.defaultBranch=main', '-c', 'protocol.file.allow=always', ...args],
    {
      cwd,
      env: FIXTURE_ENV,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  ).trim();
}

const execFileAsync = promisify(execFile);

/** Like `git`, without blocking the event loop: for talking to the in-process servers. */
export async function gitAsync(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('git', args, { cwd, env: FIXTURE_ENV, encoding: 'utf8' });
  return stdout.trim();
}

export async function makeTempDir(name: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `errand-ws-${name}-`));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

export async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

export interface Origin {
  /** The bare repository. */
  bare: string;
  url: string;
  /** A plain clone used to make commits "by someone else". */
  work: string;
  /** Commits `files` (null deletes) on `branch` in the work clone and pushes it; returns the sha. */
  commit(files: Record<string, string | null>, message?: string, branch?: string): Promise<string>;
  /** The sha of a branch on the origin, or null. */
  head(branch: string): string | null;
}

/** A bare origin at `<dir>/<name>` with one commit on main, reachable over file://. */
export async function makeOrigin(
  dir: string,
  files: Record<string, string> = { 'README.md': '# demo\n', 'src/app.txt': 'hello\n' },
  name = 'origin.git',
): Promise<Origin> {
  const bare = join(dir, name);
  const work = join(dir, `${name}-work`);
  await mkdir(bare, { recursive: true });
  git(bare, 'init', '--quiet', '--bare');
  git(dir, 'init', '--quiet', work);
  const origin: Origin = {
    bare,
    url: `file://${bare}`,
    work,
    async commit(changes, message = 'change', branch = 'main') {
      // Build on the origin's current tip of the branch (or of main for a new branch).
      const hasCommits = origin.head('main') !== null;
      if (hasCommits) {
        git(work, 'fetch', '--quiet', '--prune', bare, '+refs/heads/*:refs/remotes/o/*');
        const start = origin.head(branch) ?? origin.head('main') ?? '';
        git(work, 'checkout', '--quiet', '--force', '-B', branch, start);
      }
      for (const [path, content] of Object.entries(changes)) {
        if (content === null) await rm(join(work, path), { force: true });
        else await writeFiles(work, { [path]: content });
      }
      git(work, 'add', '--all');
      git(work, 'commit', '--quiet', '--allow-empty', '-m', message);
      git(work, 'push', '--quiet', bare, `HEAD:refs/heads/${branch}`);
      return git(work, 'rev-parse', 'HEAD');
    },
    head(branch) {
      try {
        return git(bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`);
      } catch {
        return null;
      }
    },
  };
  await origin.commit(files, 'initial');
  return origin;
}

export function testConfig(
  rootDir: string,
  overrides: Partial<WorkspaceConfig> = {},
): WorkspaceConfig & { spawns: SpawnInfo[] } {
  const spawns: SpawnInfo[] = [];
  return {
    rootDir,
    allowLocalRepos: true,
    identity: { name: 'Errand Bot', email: 'bot@errand.test' },
    inheritedEnv: gitInheritedEnv(process.env),
    onSpawn: (info) => spawns.push(info),
    ...overrides,
    spawns,
  };
}

/** Every file under `dir` whose content contains `needle` (binary files included). */
export async function filesContaining(dir: string, needle: string): Promise<string[]> {
  const found: string[] = [];
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const content = await readFile(path).catch(() => null);
    if (content?.includes(needle)) found.push(path);
  }
  return found;
}

/** Command lines of all processes visible in /proc that contain `needle`. */
export async function processesContaining(needle: string): Promise<string[]> {
  const hits: string[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) hits.push(cmdline.replaceAll('\0', ' '));
  }
  return hits;
}

export interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
}

export interface GitHttpServer {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export interface GitHttpServerOptions {
  /** Folder whose repositories are served at `/<path below it>`. */
  projectRoot: string;
  /** The exact Authorization header every request must carry; omit to serve anyone. */
  authorization?: string;
  /** Runs before a request is served; may answer it itself (return true). */
  intercept?: (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;
}

const backend = join(
  execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim(),
  'git-http-backend',
);

export async function startGitHttpServer(opts: GitHttpServerOptions): Promise<GitHttpServer> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    requests.push({
      method: req.method ?? '',
      path: url.pathname,
      authorization: req.headers.authorization,
    });
    if (opts.intercept && (await opts.intercept(req, res))) return;
    if (opts.authorization !== undefined && req.headers.authorization !== opts.authorization) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="errand-test"' });
      res.end('unauthorized\n');
      return;
    }
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_PROJECT_ROOT: opts.projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: 'tester',
      REMOTE_ADDR: '127.0.0.1',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      HTTP_CONTENT_ENCODING: String(req.headers['content-encoding'] ?? ''),
    };
    const length = req.headers['content-length'];
    if (length !== undefined) env.CONTENT_LENGTH = length;
    const cgi = spawn(backend, [], { env, stdio: ['pipe', 'pipe', 'ignore'] });
    req.pipe(cgi.stdin);
    cgi.stdin.on('error', () => {});

    let head = Buffer.alloc(0);
    let bodyStarted = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (bodyStarted) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      bodyStarted = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    await new Promise<void>((resolve) => cgi.on('close', () => resolve()));
    if (!bodyStarted) res.writeHead(502);
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A bare repository `<root>/acme/app.git` with one commit on main, for a git server that
 * serves `root` (as a forge would serve `acme/app`). Returns the bare repository's path.
 */
export async function makeServedRepo(root: string, scratch: string): Promise<string> {
  const bare = join(root, 'acme', 'app.git');
  await mkdir(bare, { recursive: true });
  git(bare, 'init', '--quiet', '--bare');
  const seed = join(scratch, 'seed');
  git(scratch, 'init', '--quiet', seed);
  git(seed, 'commit', '--quiet', '--allow-empty', '-m', 'initial');
  git(seed, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
  return bare;
}
