// Each run's control groups: one bound on its tasks (pids) and one on the memory of all its
// processes together, with the kernel's OOM kills in it counted and everything in it killed at
// the end. Groups are made below this process's own group in each hierarchy (v1), or below the
// nearest ancestor that hands the controller down (v2), so bounds the host sets on Errand hold.
import { randomUUID } from 'node:crypto';
import { access, mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { signalAll } from './processes.ts';

type Controller = 'pids' | 'memory';

/** Where a run's group for one controller is made: the parent directory and its version. */
interface CgroupPlace {
  parent: string;
  version: 1 | 2;
}

export type CgroupPlaces = Record<Controller, CgroupPlace | null>;

export interface RunBounds {
  /** Tasks (processes and threads) at once. */
  tasks: number;
  /** Memory of all the run's processes together (with its tmpfs files), no swap on top. */
  memoryBytes: number;
}

const GROUP_PREFIX = 'errand-sandbox-';
const MB = 1024 * 1024;

/** Where this process can make run groups for each controller; each proven by making one. */
export async function findCgroupPlaces(): Promise<CgroupPlaces> {
  const candidates = await candidatePlaces();
  const out: CgroupPlaces = { pids: null, memory: null };
  for (const controller of ['pids', 'memory'] as const) {
    for (const place of candidates[controller]) {
      if (!(await writable(place.parent))) continue;
      const trial = await RunCgroup.create(
        { pids: null, memory: null, [controller]: place },
        { tasks: 8, memoryBytes: 64 * MB },
      ).catch(() => null);
      if (trial === null) continue;
      await trial.remove();
      out[controller] = place;
      break;
    }
  }
  // A process is in one v2 group: where the two controllers are handed down at different
  // levels, the memory bound is kept (the process bound falls back to RLIMIT_NPROC).
  if (
    out.pids?.version === 2 &&
    out.memory?.version === 2 &&
    out.pids.parent !== out.memory.parent
  ) {
    out.pids = null;
  }
  return out;
}

interface Mount {
  root: string;
  point: string;
  type: string;
  options: string[];
}

/** The candidates for each controller, v2's first, from this process's mounts and groups. */
async function candidatePlaces(): Promise<Record<Controller, CgroupPlace[]>> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8').catch(() => ''))
    .split('\n')
    .map(parseMount)
    .filter((m): m is Mount => m !== null && (m.type === 'cgroup' || m.type === 'cgroup2'));
  const own = (await readFile('/proc/self/cgroup', 'utf8').catch(() => ''))
    .split('\n')
    .map((line) => /^\d+:([^:]*):(\/.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map(([, controllers, path]) => ({ controllers: (controllers ?? '').split(','), path }));
  const out: Record<Controller, CgroupPlace[]> = { pids: [], memory: [] };
  for (const controller of ['pids', 'memory'] as const) {
    const unified = mounts.find((m) => m.type === 'cgroup2');
    const ownUnified = own.find((g) => g.controllers.join() === '')?.path;
    const unifiedDir = unified && ownUnified !== undefined ? inside(unified, ownUnified) : null;
    if (unified && unifiedDir !== null) {
      // A group with processes cannot hand controllers down (v2): its nearest ancestor that does.
      for (
        let d: string | null = unifiedDir;
        d !== null;
        d = d === unified.point ? null : dirname(d)
      ) {
        const control = await readFile(join(d, 'cgroup.subtree_control'), 'utf8').catch(() => '');
        if (control.split(/\s+/).includes(controller)) {
          out[controller].push({ parent: d, version: 2 });
          break;
        }
      }
    }
    const v1 = mounts.find((m) => m.type === 'cgroup' && m.options.includes(controller));
    const ownV1 = own.find((g) => g.controllers.includes(controller))?.path;
    const dir = v1 && ownV1 !== undefined ? inside(v1, ownV1) : null;
    if (dir !== null) out[controller].push({ parent: dir, version: 1 });
  }
  return out;
}

/** One line of /proc/self/mountinfo: its root, mount point, type and super options. */
function parseMount(line: string): Mount | null {
  const [left, right] = line.split(' - ');
  const fields = left?.split(' ') ?? [];
  const [type, , superOptions] = right?.split(' ') ?? [];
  const root = fields[3];
  const point = fields[4];
  if (root === undefined || point === undefined || type === undefined) return null;
  return {
    root: unescapeMount(root),
    point: unescapeMount(point),
    type,
    options: (superOptions ?? '').split(','),
  };
}

/** mountinfo writes space, tab, newline and backslash as octal escapes. */
function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) =>
    String.fromCharCode(parseInt(octal, 8)),
  );
}

/** The directory of group `path` in `mount`, or null when the mount does not hold it. */
function inside(mount: Mount, path: string): string | null {
  const rel = relative(mount.root, path);
  if (rel.startsWith('..')) return null;
  return join(mount.point, rel);
}

async function writable(dir: string): Promise<boolean> {
  return access(join(dir, 'cgroup.procs'))
    .then(() => access(dir, 2 /* W_OK */))
    .then(
      () => true,
      () => false,
    );
}

interface Group {
  dir: string;
  version: 1 | 2;
  controllers: Controller[];
}

/** One run's groups (one per hierarchy), with its bounds written. */
export class RunCgroup {
  private readonly groups: readonly Group[];
  private constructor(groups: readonly Group[]) {
    this.groups = groups;
  }

  /** null when there is no place for any controller; rejects when a group cannot be made. */
  static async create(places: CgroupPlaces, bounds: RunBounds): Promise<RunCgroup | null> {
    const planned: Group[] = [];
    for (const controller of ['pids', 'memory'] as const) {
      const place = places[controller];
      if (place === null) continue;
      const same = planned.find((g) => dirname(g.dir) === place.parent);
      if (same) same.controllers.push(controller);
      else {
        planned.push({
          dir: join(place.parent, `${GROUP_PREFIX}${randomUUID()}`),
          version: place.version,
          controllers: [controller],
        });
      }
    }
    if (planned.length === 0) return null;
    const made: Group[] = [];
    try {
      for (const group of planned) {
        await mkdir(group.dir);
        made.push(group);
        await bound(group, bounds);
      }
    } catch (err) {
      await new RunCgroup(made).remove();
      throw err;
    }
    return new RunCgroup(made);
  }

  /** The files a process writes its pid to, to join every group of the run. */
  get procsFiles(): string[] {
    return this.groups.map((g) => join(g.dir, 'cgroup.procs'));
  }

  get bindsMemory(): boolean {
    return this.groups.some((g) => g.controllers.includes('memory'));
  }

  async pids(): Promise<number[]> {
    const all = new Set<number>();
    for (const file of this.procsFiles) {
      const text = await readFile(file, 'utf8').catch(() => '');
      for (const line of text.split('\n')) if (line !== '') all.add(Number(line));
    }
    return [...all];
  }

  /** How many processes the kernel killed in the run for want of memory (0 without a bound). */
  async oomKills(): Promise<number> {
    const group = this.groups.find((g) => g.controllers.includes('memory'));
    if (group === undefined) return 0;
    const file = group.version === 1 ? 'memory.oom_control' : 'memory.events';
    const text = await readFile(join(group.dir, file), 'utf8').catch(() => '');
    return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0);
  }

  /** Kills whatever is still inside, then removes the groups (each must be empty to go). */
  async remove(): Promise<void> {
    for (const group of this.groups) {
      for (let attempt = 0; attempt < 50; attempt++) {
        const text = await readFile(join(group.dir, 'cgroup.procs'), 'utf8').catch(() => '');
        signalAll(
          text
            .split('\n')
            .filter((l) => l !== '')
            .map(Number),
          'SIGKILL',
        );
        const removed = await rmdir(group.dir)
          .then(() => true)
          .catch((err: NodeJS.ErrnoException) => err.code === 'ENOENT');
        if (removed) break;
        await sleep(20);
      }
    }
  }
}

/** Writes a group's bounds: tasks, and memory without swap (an OOM kill in v2 takes them all). */
async function bound(group: Group, bounds: RunBounds): Promise<void> {
  const set = (file: string, value: string) => writeFile(join(group.dir, file), value);
  // A file the kernel lacks (no swap accounting, an older kernel) leaves that part out.
  const setIfThere = (file: string, value: string) =>
    set(file, value).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  if (group.controllers.includes('pids')) await set('pids.max', String(bounds.tasks));
  if (!group.controllers.includes('memory')) return;
  const bytes = String(bounds.memoryBytes);
  if (group.version === 1) {
    // Memory first: memory plus swap may not be set below it.
    await set('memory.limit_in_bytes', bytes);
    await setIfThere('memory.memsw.limit_in_bytes', bytes);
  } else {
    await set('memory.max', bytes);
    await setIfThere('memory.swap.max', '0');
    await setIfThere('memory.oom.group', '1');
  }
}
