import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ERRAND_MARKER, mentions, sameRepository, turnEnded, writtenByErrand } from './text.ts';

describe('mentions', () => {
  test('a whole word in any case', () => {
    assert.ok(mentions('@errand please fix', 'errand'));
    assert.ok(mentions('Could you look, @Errand?', 'errand'));
    assert.ok(mentions('cc @errand.', 'errand'));
    assert.ok(mentions('(@errand) rename it', 'errand'));
  });

  test('not a longer name, an address, a path or a quoted line', () => {
    assert.ok(!mentions('@errands please', 'errand'));
    assert.ok(!mentions('@errand-bot please', 'errand'));
    assert.ok(!mentions('write to me@errand.dev', 'errand'));
    assert.ok(!mentions('see https://example.com/@errand', 'errand'));
    assert.ok(!mentions('> @errand do it\n\nthanks, done', 'errand'));
    assert.ok(!mentions('errand without the at', 'errand'));
  });

  test('a handle with a dot matches itself only', () => {
    assert.ok(mentions('@my.bot go', 'my.bot'));
    assert.ok(!mentions('@myxbot go', 'my.bot'));
  });
});

describe('sameRepository', () => {
  test('the web and git forms of one repository', () => {
    assert.ok(sameRepository('https://github.com/Acme/App', 'https://github.com/acme/app.git'));
    assert.ok(
      sameRepository('https://gitlab.example.com/g/s/p', 'git@gitlab.example.com:g/s/p.git'),
    );
    assert.ok(
      sameRepository('https://git.example.com/o/r', 'ssh://git@git.example.com:2222/o/r.git'),
    );
  });

  test('another repository, owner or host', () => {
    assert.ok(!sameRepository('https://github.com/acme/other', 'https://github.com/acme/app.git'));
    assert.ok(!sameRepository('https://github.com/evil/app', 'https://github.com/acme/app.git'));
    assert.ok(!sameRepository('https://github.evil.com/acme/app', 'https://github.com/acme/app'));
    assert.ok(!sameRepository('not a url', 'not a url'));
  });
});

describe('answers', () => {
  test("carry the marker that keeps Errand's own comments from triggering it", () => {
    const body = turnEnded({
      state: 'done',
      summary: 'Renamed it\n\nDetails.',
      commitSha: '0123456789abcdef0123',
      error: null,
      jobId: 'job_x',
      jobUrl: 'https://errand.example.com/projects/p/jobs/job_x',
      prLink: null,
    });
    assert.ok(writtenByErrand(body));
    assert.ok(body.startsWith(ERRAND_MARKER));
    assert.match(body, /Renamed it/);
    assert.match(body, /0123456789ab/);
  });

  test('a failed turn says why', () => {
    const body = turnEnded({
      state: 'failed',
      summary: null,
      commitSha: null,
      error: 'the model is unavailable',
      jobId: 'job_x',
      jobUrl: 'https://errand.example.com/projects/p/jobs/job_x',
      prLink: null,
    });
    assert.match(body, /did not work out: the model is unavailable/);
  });
});
