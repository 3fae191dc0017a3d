// Who did something, declared once: a job's creator (createdBy), a turn's sender (sentBy) and an
// audit row's actor. A user signed in through the OpenID provider, an API key, or a forge's user
// whose comment or label made the job through the forge webhook, or a schedule whose firing made
// it (src/features/schedules/).
import { z } from 'zod';
import type { Actor } from '../db/schema.ts';

const FORGES = ['github', 'gitlab', 'gitea'] as const;

export const actorRecord = z
  .union([
    z.object({
      kind: z.literal('user'),
      id: z.string().describe("The user's id (usr_…)."),
      name: z.string().nullable().optional().describe("The user's name when it was recorded."),
    }),
    z.object({
      kind: z.literal('key'),
      id: z.string().describe("The API key's id (key_…), never the key."),
      name: z.string().nullable().optional().describe("The key's name when it was recorded."),
    }),
    z.object({
      kind: z.literal('forge'),
      forge: z.enum(FORGES),
      login: z.string().describe("The forge user's login, through the forge webhook."),
    }),
    z.object({
      kind: z.literal('schedule'),
      id: z.string().describe("The schedule's id (sch_…) whose firing made the job."),
      name: z.string().nullable().optional().describe("The schedule's name when it fired."),
    }),
  ])
  .describe('Who: a user, an API key, a forge user, or a schedule.');

// The column's type (src/db/schema.ts) is this schema's shape: a row's actor is sent as is.

/**
 * The one text a filter by actor compares (the database's actor_ref(), migration 0027): a user's
 * or a key's id, or `<forge>:<login>` for a forge user.
 */
export function actorRef(actor: Actor): string {
  return actor.kind === 'forge' ? `${actor.forge}:${actor.login}` : actor.id;
}
