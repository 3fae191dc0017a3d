// `--image` of `errand job create` and `message` (docs/images.md): a file becomes inline
// base64, an http(s) URL is passed on for the service to fetch. The service decides what is an
// image; the CLI only refuses what it can tell at once (too many, too large, unreadable).
import { open } from 'node:fs/promises';
import type { Attachment } from '../client/index.ts';
import { CliError, UsageError } from './errors.ts';

const MAX_IMAGES = 5;
const MAX_BYTES = 5 * 1024 * 1024;

/** The attachments of `--image` values, in order; undefined when none were given. */
export async function imageAttachments(
  values: readonly string[] | undefined,
): Promise<Attachment[] | undefined> {
  if (values === undefined || values.length === 0) return undefined;
  if (values.length > MAX_IMAGES)
    throw new UsageError(
      `--image: ${values.length} images; a turn may carry at most ${MAX_IMAGES}`,
    );
  const attachments: Attachment[] = [];
  for (const value of values) {
    if (/^https?:\/\//i.test(value)) attachments.push({ url: value });
    else attachments.push({ data: (await readImage(value)).toString('base64') });
  }
  return attachments;
}

// Read through one handle, its size checked before its bytes are: a 5 GB file is not loaded.
async function readImage(file: string): Promise<Buffer> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch (err) {
    throw new CliError(
      `--image ${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
    );
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new CliError(`--image ${file}: not a file`);
    if (stat.size > MAX_BYTES)
      throw new CliError(
        `--image ${file}: ${stat.size} bytes; an image may have at most ${MAX_BYTES} (5 MB)`,
      );
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}
