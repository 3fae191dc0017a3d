// Finding and signalling what a sandboxed command started. Every process of a PID namespace
// descends from its init (orphans are reparented to it), so the host's /proc tree below the
// sandbox's init is the whole command; a pids cgroup, where this process may create one, adds
// a bound on their number that holds even for root, whom RLIMIT_NPROC does not bind.
import { randomUUID } from 'node:crypto';
import { access, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The host pids of every process below `root` (not `root` itself). */
export async function descendants(root: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const name of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => null);
    if (stat === null) continue;
    // "pid (comm) state ppid …": comm may itself hold parentheses and spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  const out: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** Sends `signal`, ignoring processes that are already gone. */
export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Exited meanwhile (ESRCH): nothing to do.
    }
  }
}

const CGROUP_PREFIX = 'errand-sandbox-';

/** A pids cgroup hierarchy this process can create groups in, if any (v1, or v2 with pids). */
export async function pidsCgroupRoot(): Promise<string | null> {
  const candidates: string[] = [];
  const v2 = await readFile('/sys/fs/cgroup/cgroup.subtree_control', 'utf8').catch(() => '');
  if (v2.split(/\s+/).includes('pids')) candidates.push('/sys/fs/cgroup');
  candidates.push('/sys/fs/cgroup/pids');
  for (const dir of candidates) {
    const ok = await access(join(dir, 'cgroup.procs'))
      .then(() => access(dir, 2 /* W_OK */))
      .then(() => true)
      .catch(() => false);
    if (!ok) continue;
    // Proves it for real: creating, limiting and removing a group.
    const group = await RunCgroup.create(dir, 8).catch(() => null);
    if (group === null) continue;
    await group.remove();
    return dir;
  }
  return null;
}

/** One run's pids cgroup: a bound on tasks, and a list of every process to kill. */
export class RunCgroup {
  readonly dir: string;
  private constructor(dir: string) {
    this.dir = dir;
  }

  static async create(root: string, maxTasks: number): Promise<RunCgroup> {
    const dir = join(root, `${CGROUP_PREFIX}${randomUUID()}`);
    await mkdir(dir);
    const group = new RunCgroup(dir);
    try {
      await writeFile(join(dir, 'pids.max'), String(maxTasks));
    } catch (err) {
      await rmdir(dir).catch(() => {});
      throw err;
    }
    return group;
  }

  get procsFile(): string {
    return join(this.dir, 'cgroup.procs');
  }

  async pids(): Promise<number[]> {
    const text = await readFile(this.procsFile, 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter((l) => l !== '')
      .map(Number);
  }

  /** Kills whatever is still inside, then removes the group (it must be empty to go). */
  async remove(): Promise<void> {
    for (let attempt = 0; attempt < 50; attempt++) {
      signalAll(await this.pids(), 'SIGKILL');
      const removed = await rmdir(this.dir)
        .then(() => true)
        .catch((err: NodeJS.ErrnoException) => err.code === 'ENOENT');
      if (removed) return;
      await sleep(20);
    }
  }
}
