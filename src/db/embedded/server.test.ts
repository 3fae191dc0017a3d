// The embedded PostgreSQL on its own: the cluster it makes (durable, no TCP port, a private
// socket and password, a role that is not a superuser), what it keeps across starts, the
// servers it finds left behind, the data directories it refuses, and that it restarts a server
// that stopped by itself. `serve` killed outright is tested with real processes in
// test/lifecycle/embedded.test.ts.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmod,
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createLogger } from '../../log.ts';
import { EmbeddedUnsupportedError, findPrograms, libraryPath } from './platform.ts';
import { EmbeddedPostgres, EmbeddedStartError, embeddedLayout } from './server.ts';

const log = createLogger(process.env.ERRAND_TEST_LOG_LEVEL ?? 'silent');

async function query<R extends object>(
  server: EmbeddedPostgres,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client(server.connection);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the embedded PostgreSQL', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'errand-embedded-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  test('makes a durable cluster reachable only through a private socket, as a role that is not a superuser', async () => {
    const dataDir = path.join(root, 'made');
    const server = await EmbeddedPostgres.start({ dataDir, log });
    const layout = embeddedLayout(dataDir);
    try {
      const [settings] = await query<Record<string, string>>(
        server,
        `SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sync,
           current_setting('full_page_writes') AS fpw, current_setting('data_checksums') AS checksums,
           current_setting('listen_addresses') AS listen, current_setting('server_version_num') AS version,
           (SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user) AS superuser,
           (SELECT rolcreatedb::text FROM pg_roles WHERE rolname = current_user) AS createdb`,
      );
      assert.deepEqual(settings, {
        fsync: 'on',
        sync: 'on',
        fpw: 'on',
        checksums: 'on',
        listen: '',
        version: settings?.version,
        superuser: 'false',
        createdb: 'false',
      });
      assert.ok(Number(settings?.version) >= 180000, `PostgreSQL ${settings?.version}`);
      // The superuser's password was kept nowhere; Errand's own signs in.
      await assert.rejects(
        new pg.Client({ ...server.connection, user: 'postgres', database: 'postgres' }).connect(),
        /password authentication failed/,
      );
      for (const dir of [layout.root, layout.socketDir, layout.cluster])
        assert.equal((await stat(dir)).mode & 0o777, 0o700, dir);
      assert.equal((await stat(layout.passwordFile)).mode & 0o777, 0o600);
      assert.equal(
        (await readFile(layout.passwordFile, 'utf8')).trim(),
        server.connection.password,
      );
      // Nothing listens on TCP: the server's sockets are Unix sockets only.
      const pid = server.pid ?? 0;
      const inodes = new Set<string>();
      for (const fd of await readdir(`/proc/${pid}/fd`)) {
        const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode) inodes.add(inode);
      }
      for (const table of ['tcp', 'tcp6']) {
        const listening = (await readFile(`/proc/net/${table}`, 'utf8'))
          .split('\n')
          .slice(1)
          .map((line) => line.trim().split(/\s+/))
          .filter((f) => f[3] === '0A' && inodes.has(f[9] ?? ''));
        assert.deepEqual(listening, [], `the server listens on ${table}`);
      }
    } finally {
      await server.stop();
    }
    const pid = server.pid;
    assert.equal(pid, undefined, 'the server still runs after stop');
  });

  test('keeps its data across starts and makes the cluster only when there is none', async () => {
    const dataDir = path.join(root, 'kept');
    const first = await EmbeddedPostgres.start({ dataDir, log });
    await query(first, 'CREATE TABLE kept (n integer)');
    await query(first, 'INSERT INTO kept VALUES (1), (2)');
    const password = first.connection.password;
    await first.stop();
    const second = await EmbeddedPostgres.start({ dataDir, log });
    try {
      assert.equal(second.connection.password, password);
      assert.deepEqual(await query(second, 'SELECT n FROM kept ORDER BY n'), [{ n: 1 }, { n: 2 }]);
    } finally {
      await second.stop();
    }
  });

  test('a start cut short while making the cluster leaves nothing half made', async () => {
    const dataDir = path.join(root, 'cut');
    const layout = embeddedLayout(dataDir);
    // As if initdb had been killed halfway: a staging directory with some of a cluster.
    await mkdir(`${layout.cluster}.new/base`, { recursive: true, mode: 0o700 });
    await writeFile(`${layout.cluster}.new/PG_VERSION`, '18\n');
    const server = await EmbeddedPostgres.start({ dataDir, log });
    try {
      assert.deepEqual(await query(server, 'SELECT 1 AS one'), [{ one: 1 }]);
      await assert.rejects(stat(`${layout.cluster}.new`), { code: 'ENOENT' });
    } finally {
      await server.stop();
    }
  });

  test('stops a server left running on its cluster by a process that ended, and removes a stale pid file', async () => {
    const dataDir = path.join(root, 'leftover');
    const layout = embeddedLayout(dataDir);
    const first = await EmbeddedPostgres.start({ dataDir, log });
    await first.stop();
    // A server started as Errand starts it, but by nobody who is still there to stop it (as
    // after a `serve` killed on a machine without setpriv), and the lock of a dead process.
    const programs = await findPrograms(path.join(layout.root, 'lib'));
    const [command = '', ...args] = programs.command(programs.postgres, [
      '-D',
      layout.cluster,
      '-c',
      'listen_addresses=',
      '-c',
      `unix_socket_directories=${layout.socketDir}`,
    ]);
    const orphan = spawn(command, args, { env: programs.env, detached: true, stdio: 'ignore' });
    orphan.unref();
    const orphanPid = orphan.pid ?? 0;
    await until('the left server to run', async () =>
      (
        await readFile(path.join(layout.cluster, 'postmaster.pid'), 'utf8').catch(() => '')
      ).includes('ready'),
    );
    await writeFile(
      layout.lockFile,
      JSON.stringify({ pid: 2 ** 30, host: hostname(), token: 'killed' }),
    );
    const second = await EmbeddedPostgres.start({ dataDir, log });
    try {
      assert.equal(alive(orphanPid), false, 'the left server still runs');
      assert.notEqual(second.pid, orphanPid);
      assert.deepEqual(await query(second, 'SELECT 1 AS one'), [{ one: 1 }]);
    } finally {
      await second.stop();
    }
    // Lock files naming a live process that is not a server of this cluster (its pid reused
    // after a reboot or a container's restart): PostgreSQL would refuse them; they are removed.
    // Not this process's pid: PostgreSQL takes its parent's for stale by itself.
    const socketLock = path.join(layout.socketDir, '.s.PGSQL.5432.lock');
    const unrelated = spawn('sleep', ['300'], { stdio: 'ignore' });
    try {
      await writeFile(
        path.join(layout.cluster, 'postmaster.pid'),
        `${unrelated.pid}\n${layout.cluster}\n0\n5432\n\n\n0 0\nready\n`,
      );
      await writeFile(
        socketLock,
        `${unrelated.pid}\n${layout.cluster}\n0\n5432\n${layout.socketDir}\n`,
      );
      const third = await EmbeddedPostgres.start({ dataDir, log });
      await third.stop();
      assert.equal(unrelated.exitCode, null, 'the unrelated process was touched');
    } finally {
      unrelated.kill('SIGKILL');
    }
    // And a lock file cut short while it was written.
    await writeFile(socketLock, '');
    const fourth = await EmbeddedPostgres.start({ dataDir, log });
    await fourth.stop();
  });

  test('never starts a second server on a cluster whose server still runs', async () => {
    const dataDir = path.join(root, 'running');
    const first = await EmbeddedPostgres.start({ dataDir, log });
    try {
      const pid = first.pid;
      await assert.rejects(
        EmbeddedPostgres.start({ dataDir, log }),
        /in use by another Errand process/,
      );
      assert.equal(first.pid, pid);
      assert.deepEqual(await query(first, 'SELECT 1 AS one'), [{ one: 1 }]);
    } finally {
      await first.stop();
    }
  });

  test('starts its server again when it stops by itself', async () => {
    const dataDir = path.join(root, 'restarted');
    const server = await EmbeddedPostgres.start({ dataDir, log });
    try {
      const killed = server.pid ?? 0;
      process.kill(killed, 'SIGKILL');
      await until('the server to start again', async () => {
        const pid = server.pid;
        if (pid === undefined || pid === killed) return false;
        return query(server, 'SELECT 1').then(
          () => true,
          () => false,
        );
      });
    } finally {
      await server.stop();
    }
  });

  test('refuses a data directory of PGlite, the earlier embedded database, and changes nothing', async () => {
    const dataDir = path.join(root, 'pglite');
    await mkdir(path.join(dataDir, 'pgdata'), { recursive: true });
    await writeFile(path.join(dataDir, 'pgdata', 'PG_VERSION'), '17\n');
    await assert.rejects(EmbeddedPostgres.start({ dataDir, log }), (err: unknown) => {
      assert.ok(err instanceof EmbeddedStartError);
      assert.match(err.message, /earlier Errand, made with PGlite/);
      assert.match(err.message, /Nothing was changed or deleted/);
      return true;
    });
    assert.equal(await readFile(path.join(dataDir, 'pgdata', 'PG_VERSION'), 'utf8'), '17\n');
    await assert.rejects(stat(path.join(dataDir, 'postgres')), { code: 'ENOENT' });
    await assert.rejects(stat(path.join(dataDir, 'errand.lock')), { code: 'ENOENT' });
  });

  test('refuses a cluster of another PostgreSQL major version, saying how to move it', async () => {
    const dataDir = path.join(root, 'major');
    const made = await EmbeddedPostgres.start({ dataDir, log });
    await made.stop();
    const layout = embeddedLayout(dataDir);
    const copy = path.join(root, 'major-17');
    await cp(dataDir, copy, { recursive: true });
    await writeFile(path.join(embeddedLayout(copy).cluster, 'PG_VERSION'), '17\n');
    await assert.rejects(EmbeddedPostgres.start({ dataDir: copy, log }), (err: unknown) => {
      assert.ok(err instanceof EmbeddedStartError);
      assert.match(err.message, /made by PostgreSQL 17, and this Errand runs PostgreSQL 18/);
      assert.match(err.message, /errand export FILE/);
      return true;
    });
    assert.ok(await stat(layout.cluster));
  });

  test('a socket directory another user could enter is refused', async () => {
    const dataDir = path.join(root, 'open-socket');
    const layout = embeddedLayout(dataDir);
    await mkdir(layout.socketDir, { recursive: true, mode: 0o755 });
    await chmod(layout.socketDir, 0o755);
    await assert.rejects(
      EmbeddedPostgres.start({ dataDir, log }),
      /only it may enter \(mode 0700\)/,
    );
  });

  test('as root, a system that refuses the user namespace is told apart, with what to do', {
    skip:
      process.getuid?.() === 0
        ? false
        : 'skipped: only root runs the server in a user namespace (this test runs as another user)',
  }, async () => {
    // The kernel's refusal (a container's seccomp profile) cannot be made here: an unshare
    // that answers as util-linux's does when the kernel refuses stands in for it.
    const bin = path.join(root, 'refusing-bin');
    await mkdir(bin);
    await writeFile(
      path.join(bin, 'unshare'),
      '#!/bin/sh\necho "unshare: unshare failed: Operation not permitted" >&2\nexit 1\n',
      { mode: 0o755 },
    );
    const saved = process.env.PATH;
    process.env.PATH = `${bin}:${saved}`;
    try {
      await assert.rejects(
        EmbeddedPostgres.start({ dataDir: path.join(root, 'refused'), log }),
        (err: unknown) => {
          assert.ok(err instanceof EmbeddedStartError);
          assert.match(
            err.message,
            /runs it in a user namespace as \w+, and this system refused one/,
          );
          assert.match(err.message, /Operation not permitted/);
          assert.match(err.message, /Run Errand as a user other than root/);
          assert.match(err.message, /set DATABASE_URL/);
          return true;
        },
      );
    } finally {
      process.env.PATH = saved;
    }
  });

  test('a data directory too deep for a socket path gets a private socket directory elsewhere', async () => {
    const deep = path.join(root, 'd'.repeat(60), 'e'.repeat(60));
    const layout = embeddedLayout(deep);
    assert.ok(layout.socketDir.startsWith(tmpdir()));
    assert.ok(`${layout.socketDir}/.s.PGSQL.5432`.length <= 107);
    const server = await EmbeddedPostgres.start({ dataDir: deep, log });
    try {
      assert.deepEqual(await query(server, 'SELECT 1 AS one'), [{ one: 1 }]);
      assert.equal((await stat(layout.socketDir)).mode & 0o777, 0o700);
    } finally {
      await server.stop();
      await rm(layout.socketDir, { recursive: true, force: true });
    }
  });
});

describe('the embedded PostgreSQL’s programs', () => {
  test('a machine without them is refused with a message that says to set DATABASE_URL', async () => {
    for (const machine of [
      { platform: 'linux' as const, arch: 'riscv64', glibc: true },
      { platform: 'linux' as const, arch: 'x64', glibc: false },
      { platform: 'darwin' as const, arch: 'arm64', glibc: false },
    ]) {
      await assert.rejects(findPrograms(tmpdir(), process.env, machine), (err: unknown) => {
        assert.ok(err instanceof EmbeddedUnsupportedError);
        assert.match(err.message, /set DATABASE_URL to a PostgreSQL server/);
        return true;
      });
    }
  });

  test('library links the package install did not make are made beside the data', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'errand-libs-'));
    try {
      await mkdir(path.join(dir, 'native', 'lib'), { recursive: true });
      await writeFile(path.join(dir, 'native', 'lib', 'libicuuc.so.60.2'), 'library');
      await writeFile(
        path.join(dir, 'native', 'pg-symlinks.json'),
        JSON.stringify([
          { source: 'native/lib/libicuuc.so.60.2', target: 'native/lib/libicuuc.so.60' },
        ]),
      );
      const libDir = path.join(dir, 'links');
      assert.equal(await libraryPath(dir, libDir), libDir);
      assert.equal(await readFile(path.join(libDir, 'libicuuc.so.60'), 'utf8'), 'library');
      // With the package's own links in place, nothing is needed.
      await symlink('libicuuc.so.60.2', path.join(dir, 'native', 'lib', 'libicuuc.so.60'));
      assert.equal(await libraryPath(dir, libDir), undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
