// Finding and signalling what a sandboxed command started. Every process of a PID namespace
// descends from its init (orphans are reparented to it), so the host's /proc tree below the
// sandbox's init is the whole command (the run's control groups, cgroup.ts, list them too).
import { readdir, readFile } from 'node:fs/promises';

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

/**
 * The memory the processes `pids` hold in RAM that the kernel cannot drop, in bytes, together:
 * RssAnon (heaps, stacks) and RssShmem (shared memory they map: a memfd, /dev/shm, which
 * RLIMIT_DATA does not bound), not the files they map. A process gone meanwhile counts nothing;
 * pages a fork still shares with its parent count in each.
 */
export async function unreclaimableResident(pids: readonly number[]): Promise<number> {
  let kb = 0;
  for (const pid of pids) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    for (const field of ['RssAnon', 'RssShmem'])
      kb += Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? 0);
  }
  return kb * 1024;
}
