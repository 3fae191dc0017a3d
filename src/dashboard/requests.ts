// What the dashboard's route files share: the form body, pages for a browser and JSON for a
// script, the session's principal and what it may see, and a schema check that refuses with
// the API's words.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { AppContext } from '../context.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { Principal } from '../keys/service.ts';
import { getProject } from '../projects/service.ts';
import { refusal } from '../validation.ts';

/** A form post's fields (@fastify/formbody, one value per name). */
export type Form = Record<string, string>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in principal, set for the pages that need a session. */
    session: Principal | null;
  }
}

/** A browser navigation gets pages; a script (fetch, curl) gets the API's JSON errors. */
export function wantsHtml(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html');
}

export function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** An optional text field: an empty input means "not given". */
export function given(form: Form, name: string): string | undefined {
  const value = form[name]?.trim();
  return value ? value : undefined;
}

/** A form's fields checked by the API's schema for them, refused in the API's words. */
export function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const result = schema.safeParse(body);
  if (!result.success) throw refusal(schema, 'body', result.error);
  return result.data;
}

/** The principal of the session; the signed-in scope has checked there is one. */
export function session(request: FastifyRequest): Principal {
  if (!request.session) throw new AppError('unauthorized', 'sign in first');
  return request.session;
}

/**
 * The session's principal and the page's project. Who may see the page was checked by the
 * page's access rule (keys/route-access.ts) before the handler ran.
 */
export async function visibleProject(
  ctx: AppContext,
  request: FastifyRequest,
  id: string,
): Promise<{ principal: Principal; row: ProjectRow }> {
  return { principal: session(request), row: await getProject(ctx, id) };
}

/** Where users reach this server: ERRAND_PUBLIC_URL, else the address this request came to. */
export function baseUrl(ctx: AppContext, request: FastifyRequest): string {
  return ctx.config.publicUrl ?? `${request.protocol}://${request.host}`;
}
