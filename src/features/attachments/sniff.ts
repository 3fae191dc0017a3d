// An image's type as its first bytes say (docs/images.md): what a client claims (a data URL's
// type, a server's Content-Type, a file name) is never asked.
import type { AttachmentMediaType } from '../../db/schema.ts';

const ascii = (bytes: Uint8Array, at: number, text: string): boolean =>
  bytes.length >= at + text.length && [...text].every((c, i) => bytes[at + i] === c.charCodeAt(0));

/** The type of `bytes` when they start as a PNG, JPEG, WebP or GIF does; else undefined. */
export function sniffImage(bytes: Uint8Array): AttachmentMediaType | undefined {
  if (ascii(bytes, 0, '\x89PNG\r\n\x1a\n')) return 'image/png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (ascii(bytes, 0, 'GIF87a') || ascii(bytes, 0, 'GIF89a')) return 'image/gif';
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WEBP')) return 'image/webp';
  return undefined;
}
