// The end of a log, bounded: a CI log can run to hundreds of megabytes, and the pull request
// watch wants only its last lines. A stream is read chunk by chunk keeping only enough chunks
// to hold the tail, so memory stays near `maxBytes` whatever the log's size.

/** The last `maxBytes` of `body`, cut at a line start (see `cutTail`). */
export async function streamTail(body: ReadableStream<unknown>, maxBytes: number): Promise<string> {
  if (maxBytes <= 0) {
    await body.cancel();
    return '';
  }
  const chunks: Uint8Array[] = [];
  let held = 0;
  for await (const chunk of body) {
    // A fetch body gives bytes; anything else is not a log.
    if (!(chunk instanceof Uint8Array))
      throw new TypeError('a log stream gave something other than bytes');
    chunks.push(chunk);
    held += chunk.byteLength;
    // Drop the oldest chunk while the rest still hold the whole tail.
    for (let first = chunks[0]; first && held - first.byteLength >= maxBytes; first = chunks[0]) {
      chunks.shift();
      held -= first.byteLength;
    }
  }
  return cutTail(Buffer.concat(chunks), maxBytes);
}

/** The last `maxBytes` UTF-8 bytes of `text`, cut at a line start (see `cutTail`). */
export function textTail(text: string, maxBytes: number): string {
  return cutTail(Buffer.from(text, 'utf8'), maxBytes);
}

/**
 * At most `maxBytes` of the end of `bytes` as text. When something had to go, the partial first
 * line goes with it, so the text starts at a line's start; a tail that is one long line keeps
 * its end, started at a character's first byte.
 */
export function cutTail(bytes: Buffer, maxBytes: number): string {
  if (maxBytes <= 0) return '';
  if (bytes.byteLength <= maxBytes) return bytes.toString('utf8');
  const tail = bytes.subarray(bytes.byteLength - maxBytes);
  const newline = tail.indexOf(0x0a);
  if (newline >= 0) return tail.subarray(newline + 1).toString('utf8');
  let start = 0;
  // UTF-8 continuation bytes are 10xxxxxx: skip them to the next character's first byte.
  while (start < tail.byteLength && ((tail[start] ?? 0) & 0xc0) === 0x80) start++;
  return tail.subarray(start).toString('utf8');
}

/** The UTF-8 length of a text. */
export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
