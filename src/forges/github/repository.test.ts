// Which repository URLs the GitHub provider accepts, and what it reads out of them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ForgeError } from '../types.ts';
import { parseRepository } from './repository.ts';

test('reads host, owner and name from the spellings git uses', () => {
  const cases: [string, string, string, string][] = [
    ['https://github.com/octo/hello.git', 'github.com', 'octo', 'hello'],
    ['https://github.com/octo/hello', 'github.com', 'octo', 'hello'],
    ['https://github.com/octo/hello/', 'github.com', 'octo', 'hello'],
    ['https://GitHub.com/Octo/Hello.World.git', 'github.com', 'Octo', 'Hello.World'],
    ['https://ghe.example.com:8443/octo/hello.git', 'ghe.example.com:8443', 'octo', 'hello'],
    ['ssh://git@github.com/octo/hello.git', 'github.com', 'octo', 'hello'],
    ['ssh://git@ghe.example.com:2222/octo/hello.git', 'ghe.example.com', 'octo', 'hello'],
    ['git@github.com:octo/hello.git', 'github.com', 'octo', 'hello'],
    ['git@ghe.example.com:octo/my_repo-1', 'ghe.example.com', 'octo', 'my_repo-1'],
  ];
  for (const [url, host, owner, repo] of cases) {
    assert.deepEqual(parseRepository(url), { host, owner, repo }, url);
  }
});

test('refuses anything else with a clear, permanent error', () => {
  const refused = [
    'http://github.com/octo/hello.git',
    'https://github.com/octo',
    'https://github.com/octo/hello/tree/main',
    'https://github.com/octo/hello.git?x=1',
    'https://user:secret@github.com/octo/hello.git',
    'ssh://root@github.com/octo/hello.git',
    'file:///srv/git/hello.git',
    'git@github.com:octo/..',
    'https://github.com/-octo/hello',
    'https://github.com/octo/%2e%2e',
    '--upload-pack=touch /tmp/x',
    '',
  ];
  for (const url of refused) {
    assert.throws(
      () => parseRepository(url),
      (err: unknown) =>
        err instanceof ForgeError &&
        !err.transient &&
        /not a GitHub repository URL/.test(err.message) &&
        !err.message.includes('secret'),
      url,
    );
  }
});
