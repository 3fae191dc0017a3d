// How a turn opens the MCP servers' setting.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { secretNames } from '../../projects/mcp-servers.ts';
import { jobServers, openForTurn, openServer } from './config.ts';

const secret = (name: string, value: string) => ({ name, value, exposure: 'commands' as const });

describe('openServer', () => {
  test('puts the secrets named in, in every value', () => {
    const config = {
      url: 'https://h/mcp?k=${secret:A}',
      headers: { Authorization: 'Bearer ${secret:B}', X: '${secret:A}-${secret:A}' },
    };
    assert.deepEqual(secretNames(config), ['A', 'B']);
    assert.deepEqual(openServer('s', config, [secret('A', 'aa'), secret('B', 'bb')]), {
      name: 's',
      ok: true,
      config: {
        url: 'https://h/mcp?k=aa',
        headers: { Authorization: 'Bearer bb', X: 'aa-aa' },
      },
    });
  });

  test('leaves a server that names a secret the project lacks unopened, naming it', () => {
    const opened = openServer('s', { command: 'x', env: { T: '${secret:GONE}' } }, []);
    assert.deepEqual(opened, {
      name: 's',
      ok: false,
      reason: 'it names secret GONE, which the project does not have',
    });
  });

  test("a job's server wins the name it shares with the project's", () => {
    assert.deepEqual(
      jobServers({ a: { command: 'p' }, b: { command: 'p' } }, { a: { command: 'j' } }),
      [
        ['a', { command: 'j' }],
        ['b', { command: 'p' }],
      ],
    );
  });
});

describe('openForTurn', () => {
  const setupOnly = {
    name: 'NPM_TOKEN',
    value: 'npm-setup-only-value',
    exposure: 'setup' as const,
  };
  test("a stdio server gets only the secrets exposed to commands: it shares the sandbox with the agent's commands", () => {
    const opened = openForTurn('s', { command: 'x', env: { T: '${secret:NPM_TOKEN}' } }, [
      setupOnly,
    ]);
    assert.equal(opened.ok, false);
    assert.match(opened.ok ? '' : opened.reason, /not exposed to commands/);
    assert.ok(!JSON.stringify(opened).includes(setupOnly.value));
    assert.deepEqual(
      openForTurn('s', { command: 'x', env: { T: '${secret:A}' } }, [secret('A', 'aa')]),
      { name: 's', ok: true, config: { command: 'x', env: { T: 'aa' } } },
    );
  });

  test('a remote server, called by the service, may name any of the secrets', () => {
    assert.deepEqual(
      openForTurn('r', { url: 'https://h/mcp', headers: { A: '${secret:NPM_TOKEN}' } }, [
        setupOnly,
      ]),
      { name: 'r', ok: true, config: { url: 'https://h/mcp', headers: { A: setupOnly.value } } },
    );
  });
});
