// Random identifiers: a type prefix and base62 characters from the system CSPRNG.
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * CSPRNG bytes drawn a few kilobytes at a time: a create makes several ids, and asking the
 * generator for each one's few bytes cost more than the rest of making it. Each byte is used
 * once.
 */
const pool = Buffer.alloc(4096);
let drawn = pool.length;

/** The next random byte of the pool. */
function randomByte(): number {
  if (drawn === pool.length) {
    randomFillSync(pool);
    drawn = 0;
  }
  return pool[drawn++] as number;
}

/** Fills `bytes` with random bytes of the pool. */
export function fillRandom<T extends Uint8Array>(bytes: T): T {
  for (let i = 0; i < bytes.length; i++) bytes[i] = randomByte();
  return bytes;
}

export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    // 248 = 4 * 62: rejecting the rest keeps every character equally likely.
    if (byte < 248) out += ALPHABET[byte % 62];
  }
  return out;
}

export function toBase62(value: number, width: number): string {
  let out = '';
  let n = value;
  while (n > 0) {
    out = ALPHABET[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out.padStart(width, '0');
}

export type IdPrefix = 'prj' | 'key' | 'job' | 'whk' | 'msg' | 'usr' | 'tok' | 'sch' | 'evr';

export const newId = (prefix: IdPrefix): string => `${prefix}_${randomBase62(20)}`;

const ID_PATTERN = /^(prj|key|job|whk|msg|tok|sch|evr)_[0-9A-Za-z]{20}$/;
export function isId(prefix: IdPrefix, value: string): boolean {
  return ID_PATTERN.test(value) && value.startsWith(`${prefix}_`);
}
