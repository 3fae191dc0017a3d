// How much disk a run's writable host directories hold (the checkout without its .git, and an
// engine's HOME), measured with du: the sandbox compares it with the size before the run and
// stops a command whose writes grow it past the run's bound. du counts allocated blocks, so a
// sparse file counts for what it really takes, and a file linked twice counts once.
import { spawn } from 'node:child_process';
import { SANDBOX_PATH } from './args.ts';

export class MeasureError extends Error {
  override name = 'MeasureError';
  /** What du did count before the problem, if it got to its total. */
  readonly partial: number | null;
  constructor(message: string, partial: number | null) {
    super(message);
    this.partial = partial;
  }
}

const STDERR_CAP = 1_000;

/**
 * Bytes used under `dirs` (each on its own file system: mounts inside are not followed), `.git`
 * directories left out. Rejects when du reports a problem (a file vanished mid-walk, a
 * directory it may not read), with what it did count.
 */
export function diskUsage(dirs: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      '/usr/bin/du',
      [
        '--summarize',
        '--total',
        '--one-file-system',
        '--block-size=1',
        '--exclude=.git',
        '--',
        ...dirs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: SANDBOX_PATH, LC_ALL: 'C' }, cwd: '/' },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_CAP) stderr += chunk.toString('utf8');
    });
    child.once('error', (err) =>
      reject(new MeasureError(`du could not run: ${err.message}`, null)),
    );
    child.once('close', (code) => {
      const total = /^(\d+)\s+total$/m.exec(stdout);
      if (code === 0 && total) {
        resolve(Number(total[1]));
        return;
      }
      reject(
        new MeasureError(
          `du failed (${code}): ${stderr.trim().split('\n')[0] ?? 'no message'}`,
          total ? Number(total[1]) : null,
        ),
      );
    });
  });
}
