// Tells a database that is down, restarting or too slow apart from every other failure, so the
// API can answer 503 with Retry-After (try again, nothing is wrong with the request) instead of
// 500 (a fault of Errand's).

/** SQLSTATE classes and codes that mean "the server cannot serve this now". */
const UNAVAILABLE_SQLSTATES = [
  /^08/, // connection exception
  /^57P0[1-4]$/, // admin_shutdown, crash_shutdown, cannot_connect_now, database_dropped
  /^57014$/, // query_canceled: the statement timeout
  /^53/, // insufficient resources: disk_full, out_of_memory, too_many_connections, ...
];

/** SQLSTATE disk_full: the server's disk has no room for the write. */
const DISK_FULL = '53100';

/** Node's socket errors on a connection to the database. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** The messages of node-postgres and pg-pool for a connection lost, refused or timed out. */
const CLIENT_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|timeout expired|Client has encountered a connection error and is not queryable|Cannot use a pool after calling end on the pool)/;

/** The SQLSTATE or socket error code of `err` or of its causes, first found. */
function codes(err: unknown): string[] {
  const found: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; depth++) {
    if ('code' in e && typeof e.code === 'string') found.push(e.code);
    if (e instanceof AggregateError) for (const inner of e.errors) found.push(...codes(inner));
    e = e.cause;
  }
  return found;
}

/** Whether the database refused a write for want of disk space (a 503 that says so). */
export function isDiskFull(err: unknown): boolean {
  return codes(err).includes(DISK_FULL);
}

export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; depth++) {
    const code = 'code' in e && typeof e.code === 'string' ? e.code : undefined;
    if (code && SOCKET_CODES.has(code)) return true;
    // The embedded server's socket is gone while the server restarts.
    if (code === 'ENOENT' && 'syscall' in e && e.syscall === 'connect') return true;
    if (code && /^[0-9A-Z]{5}$/.test(code) && UNAVAILABLE_SQLSTATES.some((re) => re.test(code)))
      return true;
    if (CLIENT_MESSAGES.test(e.message)) return true;
    if (e instanceof AggregateError && e.errors.some(isDatabaseUnavailable)) return true;
    e = e.cause;
  }
  return false;
}
