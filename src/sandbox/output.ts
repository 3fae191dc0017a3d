// A command's output kept within a bound while it streams: the first half of the cap and a
// rolling tail, so a command that prints gigabytes never holds more than about twice the cap
// in memory, and the model still sees how the output began and how it ended.
import { StringDecoder } from 'node:string_decoder';

export class CappedOutput {
  readonly #headCap: number;
  readonly #tailCap: number;
  readonly #decoder = new StringDecoder('utf8');
  #head = '';
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
    const room = this.#headCap - this.#head.length;
    if (room > 0) {
      this.#head += text.slice(0, room);
      text = text.slice(room);
    }
    if (text === '') return;
    this.#tail += text;
    // Trimmed only once it doubles, so each character is copied a bounded number of times.
    if (this.#tail.length > 2 * this.#tailCap) this.#tail = this.#tail.slice(-this.#tailCap);
  }

  /** Everything kept, with a line saying how much was cut from the middle if anything was. */
  finish(): { text: string; truncated: boolean; totalChars: number } {
    this.#add(this.#decoder.end());
    const kept = this.#head.length + Math.min(this.#tail.length, this.#tailCap);
    if (this.#total <= this.#headCap + this.#tailCap) {
      return { text: this.#head + this.#tail, truncated: false, totalChars: this.#total };
    }
    const cut = this.#total - kept;
    const tail = this.#tailCap > 0 ? this.#tail.slice(-this.#tailCap) : '';
    const note = `\n[… ${cut.toLocaleString('en-US')} characters cut …]\n`;
    return { text: this.#head + note + tail, truncated: true, totalChars: this.#total };
  }
}
