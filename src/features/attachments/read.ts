// The images of a create or a message, read before the job core is called (docs/images.md):
// base64 decoded, URLs fetched, each one's type read from its bytes. The first that is not a
// PNG, JPEG, WebP or GIF of at most 5 MB refuses the request, naming it, before anything is
// stored.
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import type { NewAttachment } from '../../jobs/accept.ts';
import {
  type AttachmentInput,
  type AttachmentReader,
  MAX_ATTACHMENT_BYTES,
} from '../../jobs/attachments.ts';
import { errandVersion } from '../../version.ts';
import type { Resolve } from '../webhooks/index.ts';
import { fetchImage, ImageFetchError } from './fetch.ts';
import { sniffImage } from './sniff.ts';

/** The bound on one URL's fetch, from connect to its last byte. */
const FETCH_TIMEOUT_MS = 15_000;

const BASE64 = /^(?:[A-Za-z0-9+/]*|[A-Za-z0-9_-]*)={0,2}$/;
const DATA_URL = /^data:[^,;]*(?:;[^,;]*)*;base64,/i;

/** The bytes of an inline image: base64, or a data URL whose payload is. */
function decode(data: string): Buffer | string {
  const payload = data.startsWith('data:') ? data.replace(DATA_URL, '') : data;
  if (payload === data && data.startsWith('data:'))
    return 'is a data URL without ";base64,": only base64 data URLs are taken';
  if (payload.length === 0) return 'is empty';
  if (!BASE64.test(payload) || payload.replace(/=+$/, '').length % 4 === 1)
    return 'is not valid base64';
  return Buffer.from(
    payload,
    payload.includes('-') || payload.includes('_') ? 'base64url' : 'base64',
  );
}

export interface ReaderOptions {
  allowPrivate: boolean;
  /** Name resolution for URLs; tests inject one, never reaching a real resolver. */
  resolve?: Resolve | undefined;
  timeoutMs?: number | undefined;
}

/** The reader the routes use (the context's `attachments`). */
export function attachmentReader(opts: ReaderOptions): AttachmentReader {
  return { read: (inputs) => readAttachments(inputs, opts) };
}

/** The reader a service's settings give: private addresses as the webhooks allow them. */
export function configuredReader(config: Config): AttachmentReader {
  return attachmentReader({ allowPrivate: config.webhooks.allowPrivate });
}

async function readAttachments(
  inputs: readonly AttachmentInput[] | undefined,
  opts: ReaderOptions,
): Promise<NewAttachment[] | undefined> {
  if (inputs === undefined) return undefined;
  const read: NewAttachment[] = [];
  for (const [i, input] of inputs.entries()) {
    const field = 'data' in input ? `attachments[${i}].data` : `attachments[${i}].url`;
    const refuse = (why: string) => new AppError('bad_request', `invalid "${field}": ${why}`);
    let data: Buffer;
    if ('data' in input) {
      const decoded = decode(input.data);
      if (typeof decoded === 'string') throw refuse(decoded);
      data = decoded;
    } else {
      try {
        data = await fetchImage(input.url, {
          allowPrivate: opts.allowPrivate,
          resolve: opts.resolve,
          maxBytes: MAX_ATTACHMENT_BYTES,
          timeoutMs: opts.timeoutMs ?? FETCH_TIMEOUT_MS,
          userAgent: `Errand/${errandVersion()}`,
        });
      } catch (err) {
        if (err instanceof ImageFetchError) throw refuse(err.message);
        throw err;
      }
    }
    if (data.length > MAX_ATTACHMENT_BYTES)
      throw refuse(
        `is ${data.length} bytes; the most one image may have is ${MAX_ATTACHMENT_BYTES} (5 MB)`,
      );
    if (data.length === 0) throw refuse('is empty');
    const mediaType = sniffImage(data);
    if (!mediaType)
      throw refuse(
        `is not a PNG, JPEG, WebP or GIF image (its first bytes are ${data.subarray(0, 8).toString('hex') || 'none'})`,
      );
    read.push({ mediaType, data, source: 'url' in input ? shownSource(input.url) : null });
  }
  return read;
}

/** The URL an image came from as the job keeps it: without its query, which may hold a token. */
function shownSource(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}
