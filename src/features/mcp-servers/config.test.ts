// The MCP servers' setting: what it accepts and refuses, and how a turn opens it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { jobServers, mcpServersField, openServer, secretNames } from './config.ts';

const secret = (name: string, value: string) => ({ name, value, exposure: 'commands' as const });

describe('mcpServersField', () => {
  test('takes a stdio server and a remote one', () => {
    const servers = {
      docs: { command: 'npx', args: ['-y', 'docs-mcp'], env: { TOKEN: '${secret:DOCS_TOKEN}' } },
      tracker: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' } },
    };
    assert.deepEqual(mcpServersField.parse(servers), servers);
  });

  const refused: [string, unknown, RegExp][] = [
    ['a name with __', { a__b: { command: 'x' } }, /server name/],
    ['a name too long', { ['a'.repeat(33)]: { command: 'x' } }, /server name/],
    ['neither command nor url', { a: { args: [] } }, /stdio|remote/],
    ['both command and url', { a: { command: 'x', url: 'https://h' } }, /stdio|remote/],
    ['an empty command', { a: { command: ' ' } }, /stdio|remote|empty/],
    ['a URL that is not http', { a: { url: 'file:///etc/passwd' } }, /stdio|remote|URL/],
    ['a URL with credentials', { a: { url: 'https://u:p@h/' } }, /stdio|remote|URL/],
    ['a header over two lines', { a: { url: 'https://h', headers: { X: 'a\r\nB: c' } } }, /./],
    ['a bad secret name', { a: { command: 'x', env: { T: '${secret:lower}' } } }, /secret/],
    [
      'too many servers',
      Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`s${i}`, { command: 'x' }])),
      /more than 16/,
    ],
  ];
  for (const [what, input, message] of refused)
    test(`refuses ${what}`, () => {
      const result = mcpServersField.safeParse(input);
      assert.equal(result.success, false);
      assert.match(result.error?.issues.map((i) => i.message).join('; ') ?? '', message);
    });
});

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
