import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkAuth } from './auth.ts';

test('checkAuth accepts a header scoped to an https prefix and refuses injections', () => {
  const ok = { urlPrefix: 'https://github.com/acme/', header: 'Authorization: Bearer abc' };
  assert.equal(checkAuth(ok, false), null);
  assert.match(
    checkAuth({ ...ok, header: 'Authorization: Bearer abc\r\nX-Evil: 1' }, false) ?? '',
    /one "Name: value" line/,
  );
  assert.match(checkAuth({ ...ok, header: 'no colon here' }, false) ?? '', /Name: value/);
  assert.match(checkAuth({ ...ok, header: 'Authorization:' }, false) ?? '', /Name: value/);
  assert.match(checkAuth({ ...ok, urlPrefix: 'http://github.com/' }, false) ?? '', /https/);
  assert.match(checkAuth({ ...ok, urlPrefix: 'git@github.com:acme/' }, false) ?? '', /https/);
  assert.match(checkAuth({ ...ok, urlPrefix: 'https://u:p@github.com/' }, false) ?? '', /https/);
  assert.equal(checkAuth({ ...ok, urlPrefix: 'http://127.0.0.1:9/' }, true), null);
});
