// `errand export FILE` and `errand import FILE`: every project, API key (hashes only), webhook
// endpoint, job, turn (with its transcript) and event as one JSON Lines file (transfer/), how
// a user moves from the embedded mode to their own PostgreSQL, and how they back Errand up.
import { loadConfig } from '../config.ts';
import { defineCommand } from './command.ts';
import { EXIT } from './errors.ts';

const DATA_DIR = { 'data-dir': { type: 'string', value: 'DIR' } } as const;

export const exportCommand = defineCommand({
  name: 'export',
  args: ['FILE'],
  options: DATA_DIR,
  summary:
    'write everything (projects, keys, jobs, events, …) to FILE, also while serve runs (- for stdout)',
  details: `Writes every project, API key (hashes only), webhook endpoint, job, turn (with its transcript)
and event of the database (DATABASE_URL, or the embedded one of --data-dir, also while serve
runs on it) to FILE, as one consistent snapshot: JSON Lines, mode 0600, in place only once
complete. FILE - writes to stdout (errand export - | gzip > errand.jsonl.gz). Not in it:
dashboard sessions (browsers sign in again), rate-limit counters and idempotency keys.
The file holds key hashes, sealed secrets and transcripts: keep it as safe as the database.
`,
  async run({ values, args: [file = ''], io }) {
    const dataDir = values['data-dir'];
    const config = loadConfig(io.env, dataDir === undefined ? {} : { dataDir });
    const { runExport } = await import('./transfer/export.ts');
    await runExport(config, file);
    return EXIT.ok;
  },
});

export const importCommand = defineCommand({
  name: 'import',
  args: ['FILE'],
  options: { ...DATA_DIR, 'keep-refused-repos': { type: 'boolean' } },
  summary: 'load an export into an empty database (DATABASE_URL or --data-dir)',
  details: `Loads an export (FILE - reads stdin) into an empty database: DATABASE_URL, or the embedded one
of --data-dir. It applies the migrations, then loads everything in one transaction, or nothing;
it refuses a database that holds any project, key or job, and a file of a newer Errand. Keys
keep working; turns that were queued or running and pending webhook deliveries are queued again.
Forge credentials, webhook secrets and project secrets open only with the secret key of the
exporting side: set ERRAND_SECRET_KEY to it (the secret.key of its data directory) for the
import and for every Errand process afterwards, or copy that file into the new data directory.
For the embedded mode, also copy admin.key, which the CLI reads.

Projects on local repositories (a path or file:// URL) work where local repositories are
allowed: the embedded mode, or ERRAND_ALLOW_LOCAL_REPOS=true. Into a PostgreSQL server without
that setting, import names such projects and refuses, before it writes anything;
--keep-refused-repos imports them anyway (their turns fail until their repository is changed).

  From the embedded mode to PostgreSQL:
    errand export errand.jsonl
    DATABASE_URL=postgres://… ERRAND_SECRET_KEY="$(cat .errand/secret.key)" errand import errand.jsonl
`,
  async run({ values, args: [file = ''], io }) {
    const dataDir = values['data-dir'];
    const config = loadConfig(io.env, dataDir === undefined ? {} : { dataDir });
    const { runImport } = await import('./transfer/import.ts');
    await runImport(config, file, values['keep-refused-repos'] === true);
    return EXIT.ok;
  },
});
