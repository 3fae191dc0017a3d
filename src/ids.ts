// Random identifiers: a type prefix and base62 characters from the system CSPRNG.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 * 62: rejecting the rest keeps every character equally likely.
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
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
