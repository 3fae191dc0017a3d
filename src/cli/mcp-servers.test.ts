// `--mcp-servers`: inline JSON, a file of it, `none` to clear; anything else a usage error.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { readMcpServers } from './mcp-servers.ts';

describe('readMcpServers', () => {
  test('inline JSON, a file, and none', async () => {
    const servers = { docs: { command: 'node', args: ['docs.js'] } };
    assert.deepEqual(await readMcpServers(JSON.stringify(servers)), servers);
    const dir = await mkdtemp(path.join(tmpdir(), 'errand-cli-mcp-'));
    try {
      const file = path.join(dir, 'servers.json');
      await writeFile(file, JSON.stringify(servers));
      assert.deepEqual(await readMcpServers(file), servers);
      await assert.rejects(readMcpServers(path.join(dir, 'missing.json')), /cannot read/);
      await writeFile(file, '[1]');
      await assert.rejects(readMcpServers(file), /must be a JSON object of servers by name/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    assert.equal(await readMcpServers('none'), null);
    assert.equal(await readMcpServers(''), null);
    await assert.rejects(readMcpServers('{nope'), /must be a JSON object/);
  });
});
