// RateLimit headers (IETF draft names and the common -Limit/-Remaining/-Reset trio).
import type { FastifyReply } from 'fastify';
import type { RateLimitState } from '../ratelimit/ratelimit.ts';

export function setRateLimitHeaders(reply: FastifyReply, state: RateLimitState | undefined): void {
  if (!state) return;
  reply.header('RateLimit-Policy', `${state.limit};w=${state.windowSeconds}`);
  reply.header('RateLimit-Limit', String(state.limit));
  reply.header('RateLimit-Remaining', String(state.remaining));
  reply.header('RateLimit-Reset', String(state.resetSeconds));
}
