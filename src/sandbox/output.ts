// A command's output kept within a bound while it streams: the first half of the cap and a
// rolling tail, so a command that prints gigabytes never holds more than about twice the cap
// in memory, and the model still sees how the output began and how it ended.
import { StringDecoder } from 'node:string_decoder';

export class CappedOutput {
  readonly #headCap: number;
  readonly #tailCap: number;
  readonly #decoder = new StringDecoder('utf8');
  #head = '';
  #headDone = false;
  #tail = '';
  #total = 0;

  constructor(cap: number) {
    this.#headCap = Math.ceil(cap / 2);
    this.#tailCap = cap - this.#headCap;
  }

  write(chunk: Buffer): void {
    this.#add(this.#decoder.write(chunk));
  }

  #add(text: string): void {
    if (text === '') return;
    this.#total += text.length;
    const room = this.#headDone ? 0 : this.#headCap - this.#head.length;
    if (room > 0) {
      // Never half of a surrogate pair at the cut.
      const take = isHighSurrogate(text.charCodeAt(room - 1)) ? room - 1 : room;
      this.#head += text.slice(0, take);
      text = text.slice(take);
    }
    // Once anything went past the head, the head is closed: a later character must not join it.
    if (text !== '') this.#headDone = true;
    if (text === '') return;
    this.#tail += text;
    // Trimmed only once it doubles, so each character is copied a bounded number of times.
    if (this.#tail.length > 2 * this.#tailCap) this.#tail = this.#tail.slice(-this.#tailCap);
  }

  /** Everything kept, with a line saying how much was cut from the middle if anything was. */
  finish(): { text: string; truncated: boolean; totalChars: number } {
    this.#add(this.#decoder.end());
    if (this.#total <= this.#headCap + this.#tailCap) {
      return { text: this.#head + this.#tail, truncated: false, totalChars: this.#total };
    }
    let tail = this.#tailCap > 0 ? this.#tail.slice(-this.#tailCap) : '';
    if (isLowSurrogate(tail.charCodeAt(0))) tail = tail.slice(1);
    const cut = this.#total - this.#head.length - tail.length;
    const note = `\n[… ${cut.toLocaleString('en-US')} characters cut …]\n`;
    return { text: this.#head + note + tail, truncated: true, totalChars: this.#total };
  }
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** Past this many characters a line without its end is handed on as it stands. */
const MAX_LINE_CHARS = 32 * 1024 * 1024;

/** A stream's lines as they complete, for a caller that reads a command's output line by line. */
export class LineSplitter {
  readonly #decoder = new StringDecoder('utf8');
  #partial = '';

  /** The lines this chunk completes, without their newline. */
  push(chunk: Buffer): string[] {
    const parts = (this.#partial + this.#decoder.write(chunk)).split('\n');
    this.#partial = parts.pop() ?? '';
    if (this.#partial.length > MAX_LINE_CHARS) {
      parts.push(this.#partial);
      this.#partial = '';
    }
    return parts;
  }

  /** The last line, if the stream ended without a newline. */
  end(): string[] {
    const rest = this.#partial + this.#decoder.end();
    this.#partial = '';
    return rest === '' ? [] : [rest];
  }
}
