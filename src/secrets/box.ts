// Encryption at rest for credentials Errand stores (forge tokens, GitHub App keys):
// AES-256-GCM with a key derived from ERRAND_SECRET_KEY. Without that setting nothing can be
// stored, so a credential never lands in the database in the clear.
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';

const VERSION = 'v1';
const keys = new Map<string, Buffer>();

function derive(secret: string): Buffer {
  let key = keys.get(secret);
  if (!key) {
    key = scryptSync(secret, 'errand secret box v1', 32);
    keys.set(secret, key);
  }
  return key;
}

export function seal(secret: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', derive(secret), iv);
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [VERSION, iv, cipher.getAuthTag(), data]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.');
}

class SecretBoxError extends Error {
  override name = 'SecretBoxError';
}

export function open(secret: string, sealed: string): string {
  const [version, iv, tag, data] = sealed.split('.');
  if (version !== VERSION || !iv || !tag || data === undefined) {
    throw new SecretBoxError('stored credentials are in an unknown format');
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', derive(secret), Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([
      decipher.update(Buffer.from(data, 'base64url')),
      decipher.final(),
    ]).toString('utf8');
  } catch {
    throw new SecretBoxError(
      'stored credentials cannot be decrypted: ERRAND_SECRET_KEY is not the key they were stored with',
    );
  }
}
