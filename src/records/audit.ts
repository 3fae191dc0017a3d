// The audit log's row as the admin API returns it (GET /v2/admin/audit) and the JSON-lines
// stream writes it (ERRAND_AUDIT_LOG), declared once: the server's type, the OpenAPI component
// AuditEntry and the typed client's type come from this schema.
import { z } from 'zod';
import { actorRecord } from './actor.ts';

/**
 * The actions the log records, by what they change. Others are written by the features that
 * own them (roles, users, tokens) through the same function (src/audit/audit.ts).
 */
export const AUDIT_ACTIONS = Object.freeze([
  'job.create',
  'job.message',
  'job.archive',
  'job.merge',
  'project.create',
  'project.update',
  'project.delete',
  'project.forge_secret',
  'key.create',
  'key.revoke',
  'secret.set',
  'secret.delete',
  'webhook.create',
  'webhook.update',
  'webhook.delete',
  'webhook.rotate_secret',
  'webhook.redeliver',
  'environment.rebuild',
  'environment.delete',
  'import',
  'session.sign_in',
  'session.sign_out',
  'role.grant',
  'role.revoke',
  'user.deactivate',
  'user.reactivate',
  'token.create',
  'token.revoke',
  'schedule.create',
  'schedule.update',
  'schedule.delete',
  'eval.create',
  'eval.cancel',
] as const);

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export const auditRecord = z
  .object({
    id: z.string().describe("The row's number in the log: later rows have larger ones."),
    at: z.iso.datetime().describe('When (the time of the change’s transaction).'),
    actor: actorRecord
      .nullable()
      .describe('Who; null for a refused request that named no one (no or an unknown key).'),
    address: z
      .string()
      .nullable()
      .describe("The request's address as the server saw it; null for what no request made."),
    action: z.enum(AUDIT_ACTIONS).describe('What was done.'),
    target: z
      .object({ kind: z.string(), id: z.string() })
      .nullable()
      .describe(
        'On what: a job, project, key, secret, webhook, environment, user, token, schedule or eval run.',
      ),
    outcome: z.enum(['success', 'refused']),
    errorCode: z.string().nullable().describe("The API's error code of a refusal."),
    requestId: z.string().nullable().describe("The request's id (its X-Request-Id)."),
    details: z
      .record(z.string(), z.unknown())
      .describe('What else the change was (names, ids, which fields); never a secret.'),
  })
  .meta({ id: 'AuditEntry', description: 'One change of state, or a refused attempt at one.' });

export type AuditRecord = z.infer<typeof auditRecord>;
