// The end of a CI job's log, read from a stream without ever holding more than the tail: a job
// trace can be hundreds of megabytes, and the pull request watch only wants its last lines.
// GitLab's traces carry terminal colours and collapsible-section markers, removed here so that a
// prompt gets the text a person reads on the job's page.
import { stripVTControlCharacters } from 'node:util';

const NEWLINE = 0x0a;

/**
 * At most `maxBytes` UTF-8 bytes of the end of `body`, starting at a line start (or, when the
 * last line alone is longer, at a character start). Keeps one byte more than asked while
 * reading, to know whether the cut fell at the start of a line.
 */
export async function readTail(
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array> | null,
  maxBytes: number,
): Promise<Buffer> {
  if (body === null) return Buffer.alloc(0);
  const limit = Math.max(0, Math.floor(maxBytes));
  const keep = limit + 1;
  const chunks: Uint8Array[] = [];
  let kept = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    kept += chunk.byteLength;
    // Drop whole chunks the tail no longer needs; the last one is trimmed below.
    while (chunks.length > 1 && kept - (chunks[0]?.byteLength ?? 0) >= keep) {
      kept -= chunks.shift()?.byteLength ?? 0;
    }
  }
  const all = Buffer.concat(chunks);
  if (all.length <= limit) return all;
  const window = all.subarray(all.length - keep);
  const newline = window.indexOf(NEWLINE);
  if (newline >= 0) return window.subarray(newline + 1);
  // One line longer than the limit: its end, from the first whole character.
  let start = 1;
  while (start < window.length && ((window[start] ?? 0) & 0xc0) === 0x80) start++;
  return window.subarray(start);
}

/** A GitLab job trace as plain text: no colours, no section markers, no carriage returns. */
export function plainTrace(bytes: Buffer): string {
  return stripVTControlCharacters(bytes.toString('utf8'))
    .replace(/section_(?:start|end):\d+:[^\r\n]*\r/g, '')
    .replace(/\r\n/g, '\n')
    .replace(/\r/g, '\n');
}

/**
 * A text cut to at most `maxBytes` UTF-8 bytes of its end, at a line start where one falls in
 * the part kept: for logs that are already in memory (an external status's description).
 */
export async function tailOfText(text: string, maxBytes: number): Promise<string> {
  const tail = await readTail([Buffer.from(text, 'utf8')], maxBytes);
  return tail.toString('utf8');
}
