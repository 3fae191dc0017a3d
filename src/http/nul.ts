// Every JSON body is checked once, before any route sees it, for two things a route cannot
// handle: a NUL character (PostgreSQL text and jsonb cannot hold U+0000, so its INSERT would
// fail with a 500) and nesting deeper than any Errand body needs (a recursive walk of 8,000
// nested arrays overflowed the stack). Either is a 400 that says why, and nothing is written.
// The walk keeps its own stack, one entry per level, so no body can exhaust the call stack.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { AppError } from '../errors.ts';

/**
 * The deepest nesting a body may have: the body itself is level 1. Errand's bodies are flat
 * objects with at most one nested level; 32 leaves room for any client without letting a body
 * make later code (validation, logging) walk thousands of levels.
 */
export const MAX_BODY_DEPTH = 32;

export type BodyProblem =
  | { kind: 'nul' /** the field: `prompt`, `a.b[2]`, or `(body)` */; path: string }
  | { kind: 'depth' };

interface Level {
  container: Record<string, unknown> | unknown[];
  /** The keys of an object, in order; undefined for an array. */
  keys: string[] | undefined;
  /** How many entries were visited; the one being visited is `next - 1`. */
  next: number;
}

function level(container: Record<string, unknown> | unknown[]): Level {
  return {
    container,
    keys: Array.isArray(container) ? undefined : Object.keys(container),
    next: 0,
  };
}

/** The path of the entry each level is visiting: the field a problem is reported for. */
function pathOf(stack: Level[]): string {
  let path = '';
  for (const { keys, next } of stack) {
    const key = keys?.[next - 1];
    if (key === undefined) path += `[${next - 1}]`;
    else path = path ? `${path}.${key}` : key;
  }
  return path;
}

/**
 * The first problem of a parsed JSON body, in document order: a string or key containing
 * U+0000, or an object or array nested deeper than MAX_BODY_DEPTH.
 */
export function findBodyProblem(body: unknown): BodyProblem | undefined {
  if (typeof body === 'string')
    return body.includes('\u0000') ? { kind: 'nul', path: '(body)' } : undefined;
  if (typeof body !== 'object' || body === null) return undefined;
  const stack: Level[] = [level(body as Record<string, unknown> | unknown[])];
  while (stack.length > 0) {
    const top = stack[stack.length - 1] as Level;
    const length = top.keys ? top.keys.length : (top.container as unknown[]).length;
    if (top.next >= length) {
      stack.pop();
      continue;
    }
    const index = top.next++;
    let value: unknown;
    if (top.keys) {
      const key = top.keys[index] as string;
      if (key.includes('\u0000')) return { kind: 'nul', path: pathOf(stack) };
      value = (top.container as Record<string, unknown>)[key];
    } else value = (top.container as unknown[])[index];
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return { kind: 'nul', path: pathOf(stack) };
    } else if (typeof value === 'object' && value !== null) {
      if (stack.length >= MAX_BODY_DEPTH) return { kind: 'depth' };
      stack.push(level(value as Record<string, unknown> | unknown[]));
    }
  }
  return undefined;
}

export function checkBody(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  // A body taken raw (the forge webhook's, whose signature is over its bytes) is checked by its
  // route once parsed.
  const problem = Buffer.isBuffer(request.body) ? undefined : findBodyProblem(request.body);
  if (problem === undefined) {
    done();
    return;
  }
  if (problem.kind === 'depth') {
    done(
      new AppError(
        'bad_request',
        `the JSON body is nested deeper than ${MAX_BODY_DEPTH} levels, the most Errand accepts`,
      ),
    );
    return;
  }
  const field = `"${problem.path.replaceAll('\u0000', '\\u0000')}"`;
  done(
    new AppError(
      problem.path === 'prompt' ? 'invalid_prompt' : 'bad_request',
      `${field} contains a NUL character (\\u0000), which cannot be stored`,
    ),
  );
}
