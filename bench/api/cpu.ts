// Where the CPU went during a measurement: per-process CPU time from /proc (Linux only),
// grouped into the server under test, the load generator, PostgreSQL backends of the bench
// database, the rest of PostgreSQL, and everything else on the machine (on a shared machine,
// the last one says how much the numbers were disturbed).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

type CpuGroup =
  | 'server'
  | 'loadGenerator'
  | 'postgresBenchDb'
  | 'postgresOther'
  /** Interrupt and softirq time (loopback networking is partly here), no process's own. */
  | 'irq'
  | 'other';

export interface CpuUse {
  /**
   * CPU cores used on average, per group (1 = one core busy for the whole interval). `other`
   * is the machine's busy time (/proc/stat) minus the other groups, so it includes processes
   * that came and went during the interval.
   */
  cores: Record<CpuGroup, number>;
  /** The whole machine's busy cores (user + system + irq + softirq; not idle, iowait, steal). */
  machineBusyCores: number;
  /** Cores' worth of time the hypervisor gave to other guests (steal). */
  stealCores: number;
  /** Whole-machine CPU cores available. */
  machineCores: number;
  intervalSec: number;
}

interface ProcSample {
  ticks: number;
  comm: string;
  cmdline: string;
}

interface Snapshot {
  at: number;
  /** Busy ticks of the whole machine, from the "cpu" line of /proc/stat. */
  machineBusy: number;
  /** Of which interrupt + softirq ticks. */
  irq: number;
  steal: number;
  procs: Map<number, ProcSample>;
}

function machineTicks(): { busy: number; irq: number; steal: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal guest guest_nice (guest is in user)
  const [, user, nice, system, , , irq, softirq, steal] = line
    .trim()
    .split(/\s+/)
    .map((v) => Number(v) || 0);
  const interrupts = (irq ?? 0) + (softirq ?? 0);
  return {
    busy: (user ?? 0) + (nice ?? 0) + (system ?? 0) + interrupts,
    irq: interrupts,
    steal: steal ?? 0,
  };
}

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    } catch {
      ticksPerSecond = 100;
    }
    if (!Number.isFinite(ticksPerSecond) || ticksPerSecond <= 0) ticksPerSecond = 100;
  }
  return ticksPerSecond;
}

export function cpuAccountingAvailable(): boolean {
  try {
    readFileSync('/proc/self/stat', 'utf8');
    return true;
  } catch {
    return false;
  }
}

function snapshotCpu(): Snapshot {
  const procs = new Map<number, ProcSample>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // comm is in parentheses and may contain spaces; the fields after it are fixed.
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after comm.
      const ticks = Number(fields[11]) + Number(fields[12]);
      let cmdline = '';
      if (comm === 'postgres') {
        cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      }
      procs.set(Number(entry), { ticks, comm, cmdline });
    } catch {
      // The process ended between readdir and read.
    }
  }
  const m = machineTicks();
  return { at: performance.now(), machineBusy: m.busy, irq: m.irq, steal: m.steal, procs };
}

export interface Roles {
  serverPid: number | undefined;
  loadGeneratorPids: number[];
  benchDb: string | undefined;
}

function classify(pid: number, p: ProcSample, roles: Roles): CpuGroup {
  if (pid === roles.serverPid) return 'server';
  if (roles.loadGeneratorPids.includes(pid) || p.comm === 'pgbench') return 'loadGenerator';
  if (p.comm === 'postgres') {
    // A backend's title is "postgres: USER DATABASE HOST(PORT) STATE".
    if (roles.benchDb && p.cmdline.split(' ').includes(roles.benchDb)) return 'postgresBenchDb';
    return 'postgresOther';
  }
  return 'other';
}

/**
 * Records CPU use from start() to stop(). Processes are sampled every `sampleMs` as well as
 * at both ends, so that processes which exit before stop() (pgbench and its backends) are
 * still attributed, minus at most one interval of their time (which then counts as "other").
 */
export class CpuRecorder {
  readonly #roles: Roles;
  readonly #sampleMs: number;
  #first: Snapshot | undefined;
  readonly #last = new Map<number, ProcSample>();
  #timer: NodeJS.Timeout | undefined;

  constructor(roles: Roles, sampleMs = 500) {
    this.#roles = roles;
    this.#sampleMs = sampleMs;
  }

  start(): void {
    this.#first = snapshotCpu();
    this.#timer = setInterval(() => this.#sample(), this.#sampleMs);
    this.#timer.unref();
  }

  #sample(): Snapshot {
    const snap = snapshotCpu();
    for (const [pid, p] of snap.procs) this.#last.set(pid, p);
    return snap;
  }

  stop(): CpuUse | null {
    clearInterval(this.#timer);
    const first = this.#first;
    if (!first) return null;
    const end = this.#sample();
    return cpuUse(first, end, this.#last, this.#roles);
  }
}

function cpuUse(
  first: Snapshot,
  end: Snapshot,
  lastSeen: Map<number, ProcSample>,
  roles: Roles,
): CpuUse {
  const hz = clockTicks();
  const intervalSec = (end.at - first.at) / 1000;
  const ticks: Record<CpuGroup, number> = {
    server: 0,
    loadGenerator: 0,
    postgresBenchDb: 0,
    postgresOther: 0,
    irq: end.irq - first.irq,
    other: 0,
  };
  for (const [pid, a] of lastSeen) {
    const b = first.procs.get(pid);
    // A process that was not there at the start (or is another one under a reused pid)
    // counts from zero.
    const delta = b && b.comm === a.comm ? a.ticks - b.ticks : a.ticks;
    const group = classify(pid, a, roles);
    if (delta > 0 && group !== 'other' && group !== 'irq') ticks[group] += delta;
  }
  const busy = end.machineBusy - first.machineBusy;
  const known =
    ticks.server + ticks.loadGenerator + ticks.postgresBenchDb + ticks.postgresOther + ticks.irq;
  ticks.other = Math.max(0, busy - known);
  const toCores = (t: number) =>
    intervalSec > 0 ? Math.round((t / hz / intervalSec) * 100) / 100 : 0;
  const cores = {} as Record<CpuGroup, number>;
  for (const [group, t] of Object.entries(ticks) as [CpuGroup, number][]) {
    cores[group] = toCores(t);
  }
  let machineCores = 0;
  try {
    machineCores = readFileSync('/proc/cpuinfo', 'utf8').match(/^processor\s*:/gm)?.length ?? 0;
  } catch {
    machineCores = 0;
  }
  return {
    cores,
    machineBusyCores: toCores(busy),
    stealCores: toCores(end.steal - first.steal),
    machineCores,
    intervalSec: Math.round(intervalSec * 10) / 10,
  };
}
