// An exclusive lock on a data directory, held by a file that names the owning process.
// A lock left by a process that no longer exists (SIGKILL, power loss) is taken over.
import { open, readFile, unlink } from 'node:fs/promises';

export interface DirLock {
  release(): Promise<void>;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export async function acquireDirLock(file: string): Promise<DirLock> {
  for (let attempt = 0; attempt < 4; attempt++) {
    try {
      const handle = await open(file, 'wx', 0o600);
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      let released = false;
      return {
        async release() {
          if (released) return;
          released = true;
          await unlink(file).catch(() => {});
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const content = (await readFile(file, 'utf8').catch(() => '')).trim();
    if (content === '' && attempt === 0) {
      // Another process may have created the file and not written its pid yet.
      await new Promise((resolve) => setTimeout(resolve, 250));
      continue;
    }
    const owner = Number.parseInt(content, 10);
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner)) {
      throw new Error(`locked by process ${owner}`);
    }
    if (owner === process.pid) throw new Error('already open in this process');
    // The owner is gone: remove its lock and race for a new one (only one 'wx' open wins).
    await unlink(file).catch(() => {});
  }
  throw new Error('could not take the lock');
}
