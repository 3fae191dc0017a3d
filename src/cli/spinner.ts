// The line that shows a job is still being worked on while no event arrives (a model reply can
// take a minute). Only on a terminal: piped or redirected output gets the event lines alone,
// with no escape codes in it.

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const INTERVAL_MS = 100;
const CLEAR_LINE = '\r\x1b[2K';

export interface LineWriter {
  write(text: string): unknown;
}

/** Prints lines; on a TTY keeps a spinner under them until stopped. */
export class ProgressOutput {
  readonly #out: LineWriter;
  readonly #spin: boolean;
  readonly #started = Date.now();
  #timer: NodeJS.Timeout | undefined;
  #frame = 0;
  #shown = false;

  constructor(out: LineWriter, spin: boolean) {
    this.#out = out;
    this.#spin = spin;
  }

  /** Whether stdout is a terminal the spinner may draw on. */
  static wanted(stream: NodeJS.WriteStream): boolean {
    return stream.isTTY === true;
  }

  start(): void {
    if (!this.#spin || this.#timer) return;
    this.#timer = setInterval(() => this.#draw(), INTERVAL_MS);
    this.#timer.unref();
    this.#draw();
  }

  line(text: string): void {
    this.#clear();
    this.#out.write(`${text}\n`);
    if (this.#timer) this.#draw();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#clear();
  }

  #draw(): void {
    const seconds = Math.floor((Date.now() - this.#started) / 1000);
    const frame = FRAMES[this.#frame++ % FRAMES.length];
    this.#out.write(`${CLEAR_LINE}${frame} working… ${seconds}s`);
    this.#shown = true;
  }

  #clear(): void {
    if (!this.#shown) return;
    this.#out.write(CLEAR_LINE);
    this.#shown = false;
  }
}
