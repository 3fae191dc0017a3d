import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { asSchema } from 'ai';
import { createRepoTools, summarizeToolArgs, type ToolResult } from './index.ts';
import { makeRepo } from './testing.ts';

const options = { toolCallId: 'call-1', messages: [], context: {} };

describe('createRepoTools', () => {
  test('defines the seven tools with a description and an object input schema', async (t) => {
    const repo = await makeRepo(t);
    const tools = createRepoTools(repo.run);
    assert.deepEqual(Object.keys(tools).sort(), [
      'delete_file',
      'edit_file',
      'list_files',
      'move_file',
      'read_file',
      'search',
      'write_file',
    ]);
    for (const [name, def] of Object.entries(tools)) {
      assert.ok(typeof def.description === 'string' && def.description.length > 20, name);
      const schema = await asSchema(def.inputSchema).jsonSchema;
      assert.equal((schema as { type?: unknown }).type, 'object', name);
    }
    const editSchema = (await asSchema(tools.edit_file?.inputSchema).jsonSchema) as {
      required?: string[];
    };
    assert.deepEqual(editSchema.required?.sort(), ['new', 'old', 'path']);
  });

  // Since issue 9 a tool returns a structured result (ok, title, text) instead of a string; the
  // model reads the same text as before, through toModelOutput.
  test('execute runs the tool and reports changes', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'hello\n' });
    const tools = createRepoTools(repo.run);
    assert.deepEqual(await tools.read_file?.execute?.({ path: 'a.txt' }, options), {
      ok: true,
      title: "'a.txt' lines 1-1 of 1",
      text: '1\thello',
    });
    const edited = (await tools.edit_file?.execute?.(
      { path: 'a.txt', old: 'hello', new: 'bye' },
      options,
    )) as ToolResult;
    assert.equal(edited.ok, true);
    assert.equal(edited.title, "Edited 'a.txt'");
    assert.match(edited.text, /^Edited 'a.txt'/);
    assert.equal(await fs.readFile(path.join(repo.root, 'a.txt'), 'utf8'), 'bye\n');
    assert.deepEqual(repo.changed, ['a.txt']);
  });

  test('a bad call comes back as an error result instead of throwing', async (t) => {
    const repo = await makeRepo(t);
    const tools = createRepoTools(repo.run);
    assert.deepEqual(await tools.read_file?.execute?.({ path: 'missing.ts' }, options), {
      ok: false,
      title: "'missing.ts' does not exist",
      text: "Error: 'missing.ts' does not exist",
    });
    const search = (await tools.search?.execute?.({ pattern: '[' }, options)) as ToolResult;
    assert.equal(search.ok, false);
    assert.match(search.text, /^Error: invalid regular expression/);
    const write = (await tools.write_file?.execute?.(
      { path: '../x', content: '' },
      options,
    )) as ToolResult;
    assert.equal(write.ok, false);
    assert.match(write.text, /^Error: path '\.\.\/x' is outside the repository/);
  });

  test('the model reads the text of a result, an error flagged as one', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'hello\n' });
    const tools = createRepoTools(repo.run);
    const toModel = tools.read_file?.toModelOutput;
    assert.ok(toModel);
    const input = { path: 'a.txt' };
    const ok = { ok: true, title: 't', text: '1\thello' };
    assert.deepEqual(await toModel({ toolCallId: 'c', input, output: ok }), {
      type: 'text',
      value: '1\thello',
    });
    const failed = { ok: false, title: 'x', text: "Error: 'x' does not exist" };
    assert.deepEqual(await toModel({ toolCallId: 'c', input, output: failed }), {
      type: 'error-text',
      value: "Error: 'x' does not exist",
    });
  });

  test("the loop's abort signal cancels a call, and so does the job's", async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'a' });
    const loop = new AbortController();
    loop.abort();
    const tools = createRepoTools(repo.run);
    await assert.rejects(
      Promise.resolve(
        tools.read_file?.execute?.({ path: 'a.txt' }, { ...options, abortSignal: loop.signal }),
      ),
      { name: 'AbortError' },
    );
    const job = new AbortController();
    const jobTools = createRepoTools({ ...repo.run, signal: job.signal });
    const fresh = new AbortController();
    const read = (await jobTools.read_file?.execute?.(
      { path: 'a.txt' },
      { ...options, abortSignal: fresh.signal },
    )) as ToolResult;
    assert.equal(read.text, '1\ta');
    job.abort();
    await assert.rejects(
      Promise.resolve(
        jobTools.read_file?.execute?.({ path: 'a.txt' }, { ...options, abortSignal: fresh.signal }),
      ),
      { name: 'AbortError' },
    );
  });
});

describe('summarizeToolArgs', () => {
  test('names the tool and its target', () => {
    assert.equal(
      summarizeToolArgs('read_file', { path: 'src/a.ts', startLine: 1, endLine: 40 }),
      'read_file src/a.ts:1-40',
    );
    assert.equal(
      summarizeToolArgs('read_file', { path: 'src/a.ts', startLine: 10 }),
      'read_file src/a.ts:10-',
    );
    assert.equal(summarizeToolArgs('read_file', { path: 'src/a.ts' }), 'read_file src/a.ts');
    assert.equal(summarizeToolArgs('list_files', {}), 'list_files **/*');
    assert.equal(
      summarizeToolArgs('search', { pattern: 'TODO', flags: 'i', glob: '*.ts' }),
      'search /TODO/i in *.ts',
    );
    assert.equal(
      summarizeToolArgs('edit_file', { path: 'a.ts', old: 'x', new: 'y' }),
      'edit_file a.ts',
    );
    assert.equal(summarizeToolArgs('delete_file', { path: 'a.ts' }), 'delete_file a.ts');
    assert.equal(
      summarizeToolArgs('move_file', { from: 'a.ts', to: 'b.ts', overwrite: true }),
      'move_file a.ts -> b.ts (overwrite)',
    );
  });

  test('never includes written content, only its size', () => {
    const summary = summarizeToolArgs('write_file', {
      path: 'a.ts',
      content: 'SECRET_TOKEN=abc\n',
    });
    assert.equal(summary, 'write_file a.ts (17 bytes)');
  });

  test('is one line of at most 120 characters, whatever the model sent', () => {
    const long = summarizeToolArgs('read_file', { path: `${'x/'.repeat(200)}a.ts` });
    assert.equal(long.length, 120);
    assert.ok(long.endsWith('…'));
    assert.equal(summarizeToolArgs('read_file', { path: 'a\nb\r\tc' }), 'read_file a b c');
    assert.equal(summarizeToolArgs('read_file', null), 'read_file ?');
    assert.equal(summarizeToolArgs('read_file', { path: 42 }), 'read_file ?');
    assert.equal(summarizeToolArgs('other_tool', { a: 1 }), 'other_tool {"a":1}');
  });
});
