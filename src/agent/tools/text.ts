// Reading files as text for the tools: binary detection, line scanning of files of any size
// with bounded memory, and how a file's size is shown to the model.

import type { FileHandle } from 'node:fs/promises';

/** Bytes inspected for a NUL byte to call a file binary; git's heuristic uses the same. */
export const binarySniffBytes = 8000;

export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, binarySniffBytes).includes(0);
}

interface ScannedLine {
  /** The line without its `\n`, at most `maxLineBytes` long. */
  bytes: Buffer;
  /** True when the line was longer than `maxLineBytes` and is cut. */
  cut: boolean;
}

export interface ScanOptions {
  maxLineBytes: number;
  signal?: AbortSignal | undefined;
  /** Whether line `lineNo` (1-based) is needed; the others are only counted, never copied. */
  wants(lineNo: number): boolean;
  onLine(lineNo: number, line: ScannedLine): void;
}

/**
 * Reads an open file in chunks and hands over the wanted lines, keeping memory bounded by
 * `maxLineBytes` however large the file or its lines. A final line without `\n` still counts.
 * Returns the number of lines in the file.
 */
export async function scanLines(file: FileHandle, opts: ScanOptions): Promise<number> {
  const chunk = Buffer.allocUnsafe(64 * 1024);
  let lineNo = 1;
  let wanted = opts.wants(1);
  let parts: Buffer[] = [];
  let kept = 0;
  let cut = false;
  let pending = false;
  let position = 0;

  const take = (piece: Buffer) => {
    pending = true;
    if (!wanted) return;
    const room = opts.maxLineBytes - kept;
    if (piece.length > room) cut = true;
    const slice = piece.length > room ? piece.subarray(0, Math.max(0, room)) : piece;
    if (slice.length > 0) {
      parts.push(Buffer.from(slice));
      kept += slice.length;
    }
  };
  const finish = () => {
    if (wanted) opts.onLine(lineNo, { bytes: Buffer.concat(parts, kept), cut });
    parts = [];
    kept = 0;
    cut = false;
    pending = false;
    lineNo++;
    wanted = opts.wants(lineNo);
  };

  for (;;) {
    opts.signal?.throwIfAborted();
    const { bytesRead } = await file.read(chunk, 0, chunk.length, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    const data = chunk.subarray(0, bytesRead);
    let start = 0;
    for (;;) {
      const newline = data.indexOf(10, start);
      if (newline === -1) {
        if (start < data.length) take(data.subarray(start));
        break;
      }
      take(data.subarray(start, newline));
      finish();
      start = newline + 1;
    }
  }
  if (pending) finish();
  return lineNo - 1;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${Math.round(n / 1024)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function countNewlines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}
