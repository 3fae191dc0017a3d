// What a parsed JSON value is, for the server's readers of answers and documents it did not
// write (engines' output, model requests, the OpenAPI generator's). The typed client keeps its
// own check (src/client/records.ts): it imports nothing of the server.

/** A JSON object: not null, not an array. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
