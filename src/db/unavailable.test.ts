// Which failures mean "the database cannot serve this now" (a 503) and which do not (a 500 or
// the caller's 4xx). The real failures are produced in test/lifecycle/outage.test.ts; these
// are the shapes node-postgres and pg-pool give them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDatabaseUnavailable, isDiskFull } from './unavailable.ts';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

test('a database that is down, restarting, full or slow is unavailable', () => {
  for (const err of [
    withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
    withCode('read ECONNRESET', 'ECONNRESET'),
    withCode('getaddrinfo EAI_AGAIN db.internal', 'EAI_AGAIN'),
    new Error('Connection terminated unexpectedly'),
    new Error('Connection terminated due to connection timeout'),
    new Error('timeout exceeded when trying to connect'),
    new Error('Query read timeout'),
    withCode('terminating connection due to administrator command', '57P01'),
    withCode('the database system is starting up', '57P03'),
    withCode('canceling statement due to statement timeout', '57014'),
    withCode('sorry, too many clients already', '53300'),
    withCode('could not extend file "base/16385/16431": No space left on device', '53100'),
    Object.assign(withCode('connect ENOENT /data/postgres/run/.s.PGSQL.5432', 'ENOENT'), {
      syscall: 'connect',
    }),
    withCode('connection failure', '08006'),
    new Error('the query failed', { cause: withCode('read ECONNRESET', 'ECONNRESET') }),
    new AggregateError([withCode('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], 'all failed'),
  ]) {
    assert.equal(isDatabaseUnavailable(err), true, err.message);
  }
});

test('a write refused for want of disk space is told apart', () => {
  assert.equal(isDiskFull(withCode('could not extend file', '53100')), true);
  assert.equal(isDiskFull(new Error('failed', { cause: withCode('no space', '53100') })), true);
  assert.equal(isDiskFull(withCode('sorry, too many clients already', '53300')), false);
});

test('a fault of the query, the data or Errand is not', () => {
  for (const err of [
    withCode('duplicate key value violates unique constraint "jobs_pkey"', '23505'),
    withCode('syntax error at or near "SELEC"', '42601'),
    withCode('invalid byte sequence for encoding "UTF8": 0x00', '22021'),
    withCode('deadlock detected', '40P01'),
    withCode("ENOENT: no such file or directory, open '/data/workspaces/x'", 'ENOENT'),
    new TypeError("Cannot read properties of undefined (reading 'id')"),
    new Error('internal error'),
    'a string',
    undefined,
  ]) {
    assert.equal(isDatabaseUnavailable(err), false, String(err));
  }
});
