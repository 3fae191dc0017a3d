// API key format: `errand_` + 32 random base62 characters + a 6-character CRC32 checksum.
// The prefix lets secret scanners recognise a leaked key; the checksum lets the server
// reject a mistyped or made-up key without touching the database. Only a SHA-256 hash is
// stored, so a database leak does not leak usable keys.
import { hash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { randomBase62, toBase62 } from '../ids.ts';

const KEY_PREFIX = 'errand_';
const BODY_LENGTH = 32;
const CHECK_LENGTH = 6;
const KEY_PATTERN = /^errand_[0-9A-Za-z]{38}$/;

function checksum(body: string): string {
  return toBase62(crc32(body), CHECK_LENGTH);
}

export function mintKey(): string {
  const body = randomBase62(BODY_LENGTH);
  return `${KEY_PREFIX}${body}${checksum(body)}`;
}

/** True when `key` has the shape and checksum of a key Errand could have minted. */
export function isWellFormedKey(key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return key.slice(KEY_PREFIX.length + BODY_LENGTH) === checksum(body);
}

export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** The part of a key shown in listings so a person can tell keys apart. */
export function keyStart(key: string): string {
  return key.slice(0, KEY_PREFIX.length + 4);
}

// Personal API tokens (src/users/tokens.ts): `errand_pat_` + 32 random base62 characters + the
// same checksum. The prefix tells a token from a key without a lookup (a key's body has no `_`),
// so the API routes each to its own query, and lets secret scanners name what leaked.
const TOKEN_PREFIX = 'errand_pat_';
const TOKEN_PATTERN = /^errand_pat_[0-9A-Za-z]{38}$/;

export function mintToken(): string {
  const body = randomBase62(BODY_LENGTH);
  return `${TOKEN_PREFIX}${body}${checksum(body)}`;
}

/** True when the credential claims to be a personal token: it is checked as one, never as a key. */
export function isTokenLike(credential: string): boolean {
  return credential.startsWith(TOKEN_PREFIX);
}

/** True when `token` has the shape and checksum of a token Errand could have minted. */
export function isWellFormedToken(token: string): boolean {
  if (!TOKEN_PATTERN.test(token)) return false;
  const body = token.slice(TOKEN_PREFIX.length, TOKEN_PREFIX.length + BODY_LENGTH);
  return token.slice(TOKEN_PREFIX.length + BODY_LENGTH) === checksum(body);
}

/** The part of a token shown in listings so a person can tell their tokens apart. */
export function tokenStart(token: string): string {
  return token.slice(0, TOKEN_PREFIX.length + 4);
}
