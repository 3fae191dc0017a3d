// Descriptors Errand's own process inherited without close-on-exec, from whatever started it (a
// shell, a supervisor, a test runner): every child would inherit them, bubblewrap hands them on
// into the sandbox, and a command there could read or write whatever they lead to. Node opens
// its own descriptors with close-on-exec, so these are the only ones a child gets unasked; a
// sandbox's host shell gets /dev/null in their places.
import { openSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

/** O_CLOEXEC as /proc/<pid>/fdinfo shows a descriptor's flags (octal). */
const O_CLOEXEC = 0o2000000;

/** The inherited descriptors above stderr, in order. */
export async function inheritedDescriptors(): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc/self/fd')) {
    const fd = Number(entry);
    if (!Number.isInteger(fd) || fd <= 2) continue;
    // One closed meanwhile (readdir's own) has no fdinfo left, and is no one's.
    const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8').catch(() => '');
    const flags = /^flags:\s+([0-7]+)$/m.exec(info)?.[1];
    if (flags !== undefined && (Number.parseInt(flags, 8) & O_CLOEXEC) === 0) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}

let devNull: number | undefined;

/**
 * `stdio` for a child, with /dev/null in place of every inherited descriptor beyond the ones it
 * is given: the child's descriptor at that number is then /dev/null, not what Errand inherited.
 */
export function withInheritedClosed<T>(
  stdio: readonly T[],
  inherited: readonly number[],
): (T | number | 'ignore')[] {
  const out: (T | number | 'ignore')[] = [...stdio];
  const last = inherited.at(-1);
  if (last === undefined || last < out.length) return out;
  // Opened once, with close-on-exec (Node's default): a child gets it only where it is placed.
  devNull ??= openSync('/dev/null', 'r');
  const replaced = new Set(inherited);
  for (let fd = out.length; fd <= last; fd++) out.push(replaced.has(fd) ? devNull : 'ignore');
  return out;
}
