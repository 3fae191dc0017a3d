// The user and the project role records as the admin API returns them, declared once: the
// server's types, the OpenAPI components User and ProjectRole and the typed client's come from
// these schemas.
import { z } from 'zod';

const isoTime = z.iso.datetime();

const roleName = z.enum(['maintainer', 'member', 'viewer']);

export const roleRecord = z
  .object({
    projectId: z.string(),
    granteeKind: z
      .enum(['user', 'group'])
      .describe("A user, or a group of the OpenID provider's groups claim."),
    grantee: z.string().describe("The user's id, or the group's name."),
    role: roleName,
    createdAt: isoTime,
  })
  .meta({ id: 'ProjectRole', description: 'A role on a project, given to a user or a group.' });

export type RoleRecord = z.infer<typeof roleRecord>;

export const userRecord = z
  .object({
    id: z.string(),
    email: z.string().nullable(),
    name: z.string().nullable(),
    groups: z.array(z.string()).describe("The provider's groups claim at the last sign-in."),
    admin: z.boolean().describe('A server admin.'),
    roles: z
      .array(z.object({ projectId: z.string(), role: roleName }))
      .describe("The roles given to the user themself (a group's are listed with the project)."),
    createdAt: isoTime,
    lastSeenAt: isoTime.nullable(),
    deactivatedAt: isoTime.nullable(),
  })
  .meta({ id: 'User', description: 'A person who signed in through the OpenID provider.' });

export type UserRecord = z.infer<typeof userRecord>;

export const roleBody = z.strictObject(
  { role: roleName.describe('The role to give.') },
  {
    error: (issue) =>
      issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
  },
);
