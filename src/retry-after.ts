// `Retry-After` as the services Errand calls (model vendors, forges) send it: delay-seconds or
// an HTTP date (RFC 9110 §10.2.3). The one reader of the header on the server side; each caller
// bounds the wait as its own policy says. The typed client (src/client/errors.ts) keeps a copy
// of its own: it is built and published alone and imports nothing of the server.

/** The header's wait in whole seconds (0 for a date past); undefined when absent or unreadable. */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  // Whole seconds as the RFC says; some vendors send a fraction, which waits a little longer.
  if (/^\d+(?:\.\d+)?$/.test(text)) return Math.ceil(Number(text));
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}
