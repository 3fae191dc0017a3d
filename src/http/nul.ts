// PostgreSQL text and jsonb cannot hold U+0000, so a string with one would fail its INSERT
// with a 500. Every JSON body is checked once, before any route sees it: a NUL anywhere is
// a 400 that names the field, and nothing is written.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { AppError } from '../errors.ts';

/** The path of the first string or key in `value` that contains U+0000, if any. */
export function findNul(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path || '(body)' : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNul(value[i], `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const here = path ? `${path}.${key}` : key;
    if (key.includes('\u0000')) return here;
    const found = findNul(item, here);
    if (found !== undefined) return found;
  }
  return undefined;
}

export function refuseNul(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const path = findNul(request.body);
  if (path === undefined) {
    done();
    return;
  }
  const field = `"${path.replaceAll('\u0000', '\\u0000')}"`;
  done(
    new AppError(
      path === 'prompt' ? 'invalid_prompt' : 'bad_request',
      `${field} contains a NUL character (\\u0000), which cannot be stored`,
    ),
  );
}
