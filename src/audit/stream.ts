// The audit log as JSON lines for a SIEM (ERRAND_AUDIT_LOG=PATH|stdout): each committed row,
// as GET /v2/admin/audit shows it, one line each. Written after the commit and never in a
// request's way: lines wait in a bounded buffer while the file or stdout drains, and when the
// buffer is full new lines are dropped (the table keeps them) and a line counting the dropped
// ones is written once the stream drains again.
import { createWriteStream } from 'node:fs';
import type { Writable } from 'node:stream';
import type { Logger } from '../log.ts';
import type { AuditRecord } from '../records/audit.ts';
import type { AuditSink } from './audit.ts';

/** Most bytes of lines waiting for a slow disk or reader; past it, lines are dropped. */
const AUDIT_BUFFER_BYTES = 8 * 1024 * 1024;

export class AuditStream implements AuditSink {
  readonly #out: Writable;
  readonly #log: Logger;
  readonly #limit: number;
  #queued: string[] = [];
  #queuedBytes = 0;
  #waiting = false;
  #dropped = 0;

  constructor(out: Writable, log: Logger, limit = AUDIT_BUFFER_BYTES) {
    this.#out = out;
    this.#log = log;
    this.#limit = limit;
    out.on('drain', () => {
      this.#waiting = false;
      this.#pump();
    });
    out.on('error', (err) => this.#log.error({ err }, 'the audit log stream failed'));
  }

  /** The stream ERRAND_AUDIT_LOG names: a file appended to, or the process's stdout. */
  static open(target: string, log: Logger): AuditStream {
    return new AuditStream(
      target === 'stdout' ? process.stdout : createWriteStream(target, { flags: 'a', mode: 0o600 }),
      log,
    );
  }

  written(rows: readonly AuditRecord[]): void {
    for (const row of rows) {
      const line = `${JSON.stringify(row)}\n`;
      const bytes = Buffer.byteLength(line);
      if (this.#queuedBytes + bytes > this.#limit) {
        if (this.#dropped === 0)
          this.#log.warn('the audit log stream is behind: lines are dropped until it drains');
        this.#dropped++;
        continue;
      }
      this.#queued.push(line);
      this.#queuedBytes += bytes;
      // Straight to the stream while it takes lines: the buffer holds only what waits.
      this.#pump();
    }
  }

  #pump(): void {
    while (!this.#waiting) {
      if (this.#queued.length === 0 && this.#dropped > 0) {
        // Caught up: the reader is told how many lines it did not get.
        this.#queued.push(
          `${JSON.stringify({ dropped: this.#dropped, at: new Date().toISOString() })}\n`,
        );
        this.#log.warn({ dropped: this.#dropped }, 'the audit log stream dropped lines');
        this.#dropped = 0;
      }
      const line = this.#queued.shift();
      if (line === undefined) return;
      this.#queuedBytes -= Buffer.byteLength(line);
      if (!this.#out.write(line)) this.#waiting = true;
    }
  }

  /** Writes what is queued and closes a file (stdout stays open). */
  async close(): Promise<void> {
    this.#pump();
    if (this.#out === process.stdout) return;
    await new Promise<void>((resolve) => this.#out.end(resolve));
  }
}

/** No stream configured: the rows are in the table only. */
export const NO_AUDIT_STREAM: AuditSink = { written: () => {} };
