// The embedded mode's secret key, for a fresh install to seal webhook secrets and forge tokens
// without a setting: made once in the data directory (0600), as the first admin key is. The
// PostgreSQL mode has no such file: its processes may run on many machines, which must all be
// given the same ERRAND_SECRET_KEY.
import { randomBytes } from 'node:crypto';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';

export function secretKeyPath(dataDir: string): string {
  return path.join(dataDir, 'secret.key');
}

/** The data directory's secret key, made (0600) when there is none. */
export async function ensureSecretKeyFile(dataDir: string): Promise<string> {
  const file = secretKeyPath(dataDir);
  for (;;) {
    const existing = (await readFile(file, 'utf8').catch(() => '')).trim();
    if (existing) return existing;
    const key = randomBytes(32).toString('base64url');
    try {
      // Exclusive: of two processes making it at once, one writes it and both use that one.
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(`${key}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      return key;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
