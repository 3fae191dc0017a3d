// The MCP servers' setting: what it accepts and refuses.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { mcpServersField } from './mcp-servers.ts';

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
