// The environment record as the admin API returns it, declared once: the server's
// EnvironmentRecord, the OpenAPI component Environment and the typed client's Environment.
import { z } from 'zod';

export const environmentRecord = z
  .object({
    key: z
      .string()
      .describe(
        'What the snapshot was built from: a digest of the setup command, its network, the secrets’ names and the key files’ content.',
      ),
    worker: z
      .string()
      .describe('The worker that keeps it (ERRAND_WORKER_NAME): each worker builds its own.'),
    sizeBytes: z.number().int().describe('What its files take on the worker’s disk, in bytes.'),
    files: z.number().int().describe('How many files and directories it holds.'),
    buildMs: z.number().int().describe('How long the setup command took to build it.'),
    baseCommit: z.string().describe('The commit the setup command ran on.'),
    createdAt: z.iso.datetime(),
    lastUsedAt: z.iso
      .datetime()
      .describe(
        'When a turn last restored it (its build, until then); the least recently used go first when the cache is full.',
      ),
  })
  .meta({
    id: 'Environment',
    description:
      'A snapshot of what a project’s setup command left in the checkout, kept by one worker.',
  });

export type EnvironmentRecord = z.infer<typeof environmentRecord>;
