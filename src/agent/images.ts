// A turn's images in the model conversation (docs/images.md): file parts of an image type in the
// turn's user message while the turn runs, so that each provider sends them in its own format; a short
// line naming each in what the turn stores, so that a job's history does not carry megabytes
// of base64 into every later request (and its row).
import type { FilePart, ModelMessage } from 'ai';

/** An image as the loop gives it to the model. */
export interface PromptImage {
  /** Its place among the turn's images, from 1. */
  n: number;
  mediaType: string;
  data: Uint8Array;
}

/** Characters an image counts for in the conversation's estimate: about 1,600 tokens. */
const IMAGE_ESTIMATE_CHARS = 6_400;

export function imageParts(images: readonly PromptImage[]): FilePart[] {
  return images.map((image) => ({
    type: 'file',
    data: { type: 'data', data: image.data },
    mediaType: image.mediaType,
    filename: `image-${image.n}`,
  }));
}

const isImage = (part: { type: string; mediaType?: string }): boolean =>
  part.type === 'image' || (part.type === 'file' && /^image(\/|$)/.test(part.mediaType ?? ''));

/** `messages` with each image part of a user message replaced by a line that names it. */
export function withoutImages(messages: readonly ModelMessage[]): ModelMessage[] {
  return messages.map((m) => {
    if (m.role !== 'user' || typeof m.content === 'string') return m;
    if (!m.content.some(isImage)) return m;
    let n = 0;
    return {
      ...m,
      content: m.content.map((p) => {
        if (p.type === 'text' || !isImage(p)) return p;
        n += 1;
        const bytes = p.type === 'file' ? dataOf(p.data) : p.image;
        const size = bytes instanceof Uint8Array ? `, ${bytes.length} bytes` : '';
        return {
          type: 'text',
          text: `[image ${n} of this prompt (${p.mediaType ?? 'image'}${size}): you saw it when the prompt was sent; it is not kept in the conversation]`,
        };
      }),
    };
  });
}

/** JSON.stringify's replacer for the estimate: an image's bytes count as a fixed allowance. */
export function estimateReplacer(_key: string, value: unknown): unknown {
  return value instanceof Uint8Array ? 'x'.repeat(IMAGE_ESTIMATE_CHARS) : value;
}

function dataOf(data: FilePart['data']): unknown {
  return typeof data === 'object' && data !== null && 'type' in data && data.type === 'data'
    ? data.data
    : data;
}
