// The API key record as the admin API returns it, declared once: the server's KeyRecord, the
// OpenAPI component Key and the typed client's ApiKey come from this schema. Never the key.
import { z } from 'zod';

const isoTime = z.iso.datetime();

const keyFields = z.object({
  id: z.string(),
  name: z.string().nullable(),
  start: z.string().describe('The first characters of the key, to recognise it.'),
  projectId: z.string().nullable(),
  admin: z.boolean(),
  createdAt: isoTime,
  lastUsedAt: isoTime.nullable(),
  revokedAt: isoTime.nullable(),
});

/** A component of the OpenAPI document, which the answers with a key refer to. */
export const keyRecord = keyFields.meta({
  id: 'Key',
  description: 'An API key, without its secret.',
});

export type KeyRecord = z.infer<typeof keyRecord>;

/** A new key: the record with the key itself, in the answer of its creation only. */
export const createdKeyRecord = keyFields.extend({
  key: z.string().describe('The key: shown this once, never stored.'),
});
