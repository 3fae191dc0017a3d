// Statements of the hot paths that a transaction runs as named prepared statements: PostgreSQL
// parses and plans them once per connection instead of at every run (a create's statements
// spent about a third of their server time being parsed and planned). A statement asks for it
// with a leading comment, `/* prepared:<name> */`, which Kysely and pg-boss pass on as
// written; the pool's client (database.ts) sees the comment and names the statement. A read
// outside a transaction that skips Kysely names its own (DatabaseHandle.prepared).
import { createHash } from 'node:crypto';

const MARKER = /^\/\* prepared:([a-z0-9_]+) \*\//;

/**
 * Most distinct texts named. Each is kept by every connection that ran it, for the connection's
 * life (node-postgres has no public way to drop one), so a text that varied with its input
 * could otherwise fill them without bound; past this, statements run unnamed.
 */
const MOST_TEXTS = 256;

const names = new Map<string, string | undefined>();

/** The comment that asks for `name`: put first in the statement's text. */
export function preparedMarker(name: string): string {
  if (!/^[a-z0-9_]+$/.test(name)) throw new RangeError(`a prepared statement name is [a-z0-9_]+`);
  return `/* prepared:${name} */`;
}

/**
 * The statement name of `text`, or undefined to run it unnamed. One marker may stand before
 * texts that differ (a part present only when a setting is), and node-postgres refuses a name
 * used again with another text, so the name ends with a digest of the text.
 */
export function preparedName(text: string): string | undefined {
  if (!text.startsWith('/* prepared:')) return undefined;
  if (names.has(text)) return names.get(text);
  const name = MARKER.exec(text)?.[1];
  const named =
    name && names.size < MOST_TEXTS
      ? `errand_${name}_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`
      : undefined;
  if (names.size < MOST_TEXTS) names.set(text, named);
  return named;
}
