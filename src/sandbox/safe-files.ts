// Files the service reads or writes in a place a sandboxed process could have written to (or
// once could): whatever it planted there, a link to a host file, a FIFO, a second name of
// another file, is never followed, never waited on, never written through. Reads are bounded in
// bytes and time; writes make a new file beside the target and rename it into place.
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** What was at a path is not a plain file of one name (or not a directory): it was refused. */
export class UnsafeFileError extends Error {
  override name = 'UnsafeFileError';
}

/** How long a read may take before it is given up (a hung network file system, say). */
const DEFAULT_READ_TIMEOUT_MS = 5_000;

/**
 * The content of the regular file at `path`, or undefined when nothing is there. Refused with
 * UnsafeFileError: a symbolic link (the last component is opened with O_NOFOLLOW), anything but
 * a regular file (a FIFO is opened with O_NONBLOCK and never waited on), a file with a second
 * name (a hard link), one larger than `maxBytes`, and a read that takes longer than `timeoutMs`.
 * The directories above `path` must be the service's own: only its last component is checked.
 */
export async function readRegularFile(
  path: string,
  options: { maxBytes: number; timeoutMs?: number },
): Promise<Buffer | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(
      path,
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY,
    );
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new UnsafeFileError(`${path} is a symbolic link; it was not read`);
    throw err;
  }
  const reading = readBounded(handle, path, options.maxBytes);
  // Closed whenever the read ends, also after the caller stopped waiting for it; its outcome
  // reaches the caller through the race below, so this second copy of it is dropped.
  void reading.finally(() => handle.close()).catch(() => {});
  const timeoutMs = options.timeoutMs ?? DEFAULT_READ_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new UnsafeFileError(`reading ${path} took longer than ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([reading, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

async function readBounded(handle: FileHandle, path: string, maxBytes: number): Promise<Buffer> {
  const info = await handle.stat();
  if (!info.isFile()) throw new UnsafeFileError(`${path} is not a regular file; it was not read`);
  if (info.nlink !== 1) {
    throw new UnsafeFileError(`${path} has ${info.nlink} names (hard links); it was not read`);
  }
  if (info.size > maxBytes) {
    throw new UnsafeFileError(`${path} is larger than ${maxBytes} bytes; it was not read`);
  }
  // One byte more than allowed: a file that grew since its stat is refused too.
  const buffer = Buffer.alloc(maxBytes + 1);
  let length = 0;
  for (;;) {
    const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
    if (bytesRead === 0) break;
    length += bytesRead;
    if (length > maxBytes) {
      throw new UnsafeFileError(`${path} is larger than ${maxBytes} bytes; it was not read`);
    }
  }
  return buffer.subarray(0, length);
}

/**
 * Makes `path` hold `content`: written to a new file in the same directory (O_CREAT|O_EXCL|
 * O_NOFOLLOW, so nothing that exists is opened) and renamed over `path`. Whatever was at
 * `path`, a link, a FIFO or a second name of another file, is replaced, never followed or
 * written into. The directory must be a real one (not a link), and its ancestors the service's.
 */
export async function replaceFile(
  path: string,
  content: string | Uint8Array,
  options: { mode?: number } = {},
): Promise<void> {
  const dir = dirname(path);
  const info = await lstat(dir);
  if (!info.isDirectory()) throw new UnsafeFileError(`${dir} is not a directory`);
  const temporary = join(dir, `.${basename(path)}.${randomUUID()}.tmp`);
  const handle = await open(
    temporary,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    options.mode ?? 0o600,
  );
  try {
    try {
      await handle.writeFile(content);
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await rename(temporary, path);
  } catch (err) {
    await rm(temporary, { force: true });
    throw err;
  }
}

/**
 * Makes `path` a real directory: kept when it is one, made when nothing is there, and whatever
 * else is there (a link, even to a directory, a FIFO, a file) removed first, never followed.
 * Its parent must be the service's own: nothing may swap the entry between check and use.
 */
export async function makeDirectory(path: string, options: { mode?: number } = {}): Promise<void> {
  const mode = options.mode ?? 0o700;
  const info = await lstat(path).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  });
  if (info?.isDirectory()) return;
  // Not recursive: a link is removed itself, never what it points to.
  if (info !== undefined) await rm(path);
  await mkdir(path, { mode });
}
