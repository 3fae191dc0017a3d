// The review link and its token: what a link may show where others read it, the token's check,
// and the jobs of a database from before the tokens (migration 0019), whose review links are
// given their token and whose pull requests' links are left alone.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { randomJobId } from '../../test/support/route-cases.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { loadMigrations, migrate } from '../db/migrate.ts';
import {
  bareReviewLink,
  reviewLink,
  reviewTokenMatches,
  withoutReviewToken,
} from './review-link.ts';

const TOKEN = 'a3'.repeat(32);

describe('review links', () => {
  test('the link carries the token; the bare one does not', () => {
    assert.equal(
      reviewLink('https://errand.example', 'job_x', TOKEN),
      `https://errand.example/review/job_x?token=${TOKEN}`,
    );
    assert.equal(
      bareReviewLink('https://errand.example', 'job_x'),
      'https://errand.example/review/job_x',
    );
  });

  test('a link shown to others loses its token, and any other link is kept as it is', () => {
    assert.equal(
      withoutReviewToken(`https://errand.example/review/job_x?token=${TOKEN}`),
      'https://errand.example/review/job_x',
    );
    assert.equal(
      withoutReviewToken(`https://errand.example/review/job_x?a=1&token=${TOKEN}&b=2`),
      'https://errand.example/review/job_x?a=1&b=2',
    );
    for (const kept of [
      'https://github.com/acme/app/pull/7',
      'https://gitlab.example/acme/app/-/merge_requests/3',
      'https://errand.example/review/job_x',
    ])
      assert.equal(withoutReviewToken(kept), kept);
    assert.equal(withoutReviewToken(`not a url?token=${TOKEN}`), 'not a url');
  });

  test('only the token itself matches', () => {
    assert.equal(reviewTokenMatches(TOKEN, TOKEN), true);
    for (const given of [
      undefined,
      '',
      TOKEN.slice(0, -1),
      `${TOKEN}a`,
      TOKEN.toUpperCase(),
      `${TOKEN.slice(0, -1)}4`,
    ])
      assert.equal(reviewTokenMatches(given, TOKEN), false, String(given));
    // A job without a token (there is none: the column is NOT NULL) would match nothing.
    assert.equal(reviewTokenMatches('', ''), false);
    assert.equal(reviewTokenMatches(undefined, ''), false);
  });
});

describe('migration 0019 on jobs made before it', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;

  before(async () => {
    database = await createTestDatabase();
    handle = await openDatabase({ dataDir: database.dataDir, databaseUrl: database.databaseUrl });
  });
  after(async () => {
    await handle?.close();
    await database?.drop();
  });

  test('review links get their job’s token, pull requests’ links stay, every job has a token', async () => {
    // The database as the Errand before 0019 left it.
    const before = (await loadMigrations()).filter((m) => m.id < 19);
    await handle.transaction(async (run) => {
      await run.exec(
        'CREATE TABLE errand_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      for (const m of before) {
        await run.exec(m.sql);
        await run.query('INSERT INTO errand_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
      }
    });
    const { db } = handle;
    await db
      .insertInto('projects')
      .values({
        id: 'prj_00000000000000000001',
        name: 'p',
        repository: '/srv/app',
        ref: 'main',
        model: null,
      })
      .execute();
    const [local, pulled, none, lookalike] = [
      randomJobId(),
      randomJobId(),
      randomJobId(),
      randomJobId(),
    ];
    const links: Record<string, [string | null, number | null]> = {
      [local]: [`http://127.0.0.1:8080/review/${local}`, null],
      [pulled]: ['https://github.com/acme/app/pull/7', 7],
      [none]: [null, null],
      // Another job's review link (never made so, but the upgrade must not touch it).
      [lookalike]: [`http://127.0.0.1:8080/review/${local}`, null],
    };
    for (const [id, [link, number]] of Object.entries(links)) {
      await sql`
        INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, pr_link, pr_number, turn_count, usage)
        VALUES (${id}, 'prj_00000000000000000001', 'completed', '/srv/app', 'main', ${`errand/${id}`},
          'openai:m', ${link}, ${number}, 1, '{}')`.execute(db);
    }
    // 0019 first; later migrations run after it.
    assert.equal((await migrate(handle))[0], '0019_review_links');
    const rows = await db.selectFrom('jobs').select(['id', 'pr_link', 'review_token']).execute();
    const byId = new Map(rows.map((r) => [r.id, r]));
    const tokens = rows.map((r) => r.review_token);
    for (const token of tokens) assert.match(token, /^[0-9a-f]{64}$/);
    assert.equal(new Set(tokens).size, tokens.length, 'two jobs got one token');
    assert.equal(
      byId.get(local)?.pr_link,
      `http://127.0.0.1:8080/review/${local}?token=${byId.get(local)?.review_token}`,
    );
    assert.equal(byId.get(pulled)?.pr_link, 'https://github.com/acme/app/pull/7');
    assert.equal(byId.get(none)?.pr_link, null);
    assert.equal(byId.get(lookalike)?.pr_link, `http://127.0.0.1:8080/review/${local}`);
    // A job made afterwards gets a token of its own from the database.
    const later = randomJobId();
    await sql`
      INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, turn_count, usage)
      VALUES (${later}, 'prj_00000000000000000001', 'active', '/srv/app', 'main', ${`errand/${later}`},
        'openai:m', 1, '{}')`.execute(db);
    const made = await db
      .selectFrom('jobs')
      .select('review_token')
      .where('id', '=', later)
      .executeTakeFirstOrThrow();
    assert.match(made.review_token, /^[0-9a-f]{64}$/);
    assert.ok(!tokens.includes(made.review_token));
  });
});
