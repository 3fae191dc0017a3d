// The end of a CI log, bounded, for the pull request watch's prompts: a log can run to hundreds
// of megabytes and the watch wants its last lines. A stream is read chunk by chunk, keeping only
// the chunks that hold the tail, so memory stays near `maxBytes` whatever the log's size. The
// forges' clients (src/forges/*/) all cut their logs here.

/** The last `maxBytes` UTF-8 bytes of a stream as text, cut as `cutTail` cuts; null: empty. */
export async function streamTail(
  body: AsyncIterable<unknown> | null,
  maxBytes: number,
): Promise<string> {
  if (body === null) return '';
  if (maxBytes <= 0) {
    if (body instanceof ReadableStream) await body.cancel();
    return '';
  }
  // One byte more than the tail: whether the cut falls at a line's start shows in it.
  const keep = Math.floor(maxBytes) + 1;
  const chunks: Uint8Array[] = [];
  let held = 0;
  for await (const chunk of body) {
    // A fetch body gives bytes; anything else is not a log.
    if (!(chunk instanceof Uint8Array))
      throw new TypeError('a log stream gave something other than bytes');
    chunks.push(chunk);
    held += chunk.byteLength;
    // Drop the oldest chunk while the rest still hold what is kept.
    for (let first = chunks[0]; first && held - first.byteLength >= keep; first = chunks[0]) {
      chunks.shift();
      held -= first.byteLength;
    }
  }
  return cutTail(Buffer.concat(chunks), maxBytes);
}

/** The last `maxBytes` UTF-8 bytes of `text`, cut as `cutTail` cuts. */
export function textTail(text: string, maxBytes: number): string {
  return cutTail(Buffer.from(text, 'utf8'), maxBytes);
}

/**
 * At most `maxBytes` of the end of `bytes` as text. When something had to go, the partial
 * first line goes with it, so the text starts at a line's start (a whole line that fits is
 * kept); a tail that is one long line keeps its end, started at a character's first byte.
 */
export function cutTail(bytes: Buffer, maxBytes: number): string {
  if (maxBytes <= 0) return '';
  const limit = Math.floor(maxBytes);
  if (bytes.byteLength <= limit) return bytes.toString('utf8');
  const window = bytes.subarray(bytes.byteLength - limit - 1);
  const newline = window.indexOf(0x0a);
  if (newline >= 0) return window.subarray(newline + 1).toString('utf8');
  let start = 1;
  // UTF-8 continuation bytes are 10xxxxxx: skip them to the next character's first byte.
  while (start < window.byteLength && ((window[start] ?? 0) & 0xc0) === 0x80) start++;
  return window.subarray(start).toString('utf8');
}

/** The UTF-8 length of a text. */
export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
