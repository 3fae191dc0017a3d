// The engines' command lines and their streams read as Errand's events, from lines as each CLI
// prints them (taken from runs of the pinned versions; test/engines/ runs the real CLIs).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claudeCode } from './claude-code.ts';
import { codex } from './codex.ts';
import type { EngineDefinition, EngineEvent } from './engine.ts';
import { opencode } from './opencode.ts';

const setup = {
  bin: '/engines/x/bin',
  workspace: '/workspace',
  model: { provider: 'openai', id: 'gpt-test' },
  proxyOrigin: 'http://127.0.0.1:8787',
  prompt: '--help me; rm -rf /',
  resume: undefined,
  title: 'help me',
};

function readAll(definition: EngineDefinition, lines: unknown[]) {
  const reader = definition.reader();
  const events: EngineEvent[] = [];
  for (const line of lines) events.push(...reader.read(line as Record<string, unknown>));
  return { reader, events };
}

describe('engine command lines', () => {
  for (const definition of [claudeCode, codex, opencode]) {
    it(`${definition.name}: the prompt is one argument after --, the key only a placeholder`, () => {
      const fresh = definition.invocation(setup);
      assert.equal(fresh.argv[0], setup.bin);
      assert.equal(fresh.argv.at(-1), setup.prompt);
      assert.equal(fresh.argv.at(-2), '--');
      const all = JSON.stringify(fresh);
      assert.match(all, /errand-proxy/);
      assert.match(all, /127\.0\.0\.1:8787/);
      const resumed = definition.invocation({ ...setup, resume: 'session-1' });
      assert.ok(resumed.argv.includes('session-1'));
      assert.ok(!fresh.argv.includes('session-1'));
    });
  }

  it('codex: its configuration names the proxy as the Responses provider, no sandbox, no approvals', () => {
    const config = codex.invocation(setup).files[0];
    assert.equal(config?.path, '.codex/config.toml');
    assert.match(config?.content ?? '', /^base_url = "http:\/\/127\.0\.0\.1:8787\/v1"$/m);
    assert.match(config?.content ?? '', /^wire_api = "responses"$/m);
    assert.match(config?.content ?? '', /^sandbox_mode = "danger-full-access"$/m);
    assert.match(config?.content ?? '', /^approval_policy = "never"$/m);
    const resumed = codex.invocation({ ...setup, resume: 'thread-1' }).argv;
    assert.deepEqual(resumed.slice(1, 3), ['exec', 'resume']);
  });

  it('codex: analytics and the curated plugins, which only wait on the network, are off', () => {
    const content = codex.invocation(setup).files[0]?.content ?? '';
    assert.match(content, /^\[analytics\]\nenabled = false$/m);
    assert.match(content, /^\[features\]\nplugins = false$/m);
  });

  it("opencode: Bun's JIT pool and allocator arena are reserved small enough for the sandbox's data limit", () => {
    const { env } = opencode.invocation(setup);
    const mib = 1024 * 1024;
    assert.equal(Number(env.BUN_JSC_jitMemoryReservationSize), 64 * mib);
    assert.equal(env.MIMALLOC_ARENA_RESERVE, '64MiB');
  });

  it('opencode: an anthropic model gets the Anthropic provider package', () => {
    const file = opencode.invocation({ ...setup, model: { provider: 'anthropic', id: 'c' } })
      .files[0];
    const config = JSON.parse(file?.content ?? '{}');
    assert.equal(config.provider.errand.npm, '@ai-sdk/anthropic');
    assert.equal(config.provider.errand.options.baseURL, 'http://127.0.0.1:8787/v1');
    assert.equal(config.model, 'errand/c');
  });
});

describe('claude code stream', () => {
  const usage = {
    input_tokens: 3,
    cache_creation_input_tokens: 100,
    cache_read_input_tokens: 50,
    output_tokens: 7,
  };
  const lines = [
    { type: 'system', subtype: 'init', session_id: 'sess-1', model: 'claude-sonnet-4-5' },
    {
      type: 'assistant',
      session_id: 'sess-1',
      message: {
        id: 'msg_1',
        usage,
        content: [{ type: 'text', text: 'Writing' }],
      },
    },
    {
      type: 'assistant',
      session_id: 'sess-1',
      message: {
        id: 'msg_1',
        usage,
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'npm test' } },
        ],
      },
    },
    {
      type: 'user',
      session_id: 'sess-1',
      message: {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok\n3 passed', is_error: false },
        ],
      },
    },
    {
      type: 'result',
      subtype: 'success',
      is_error: false,
      result: 'Ran the tests',
      session_id: 'sess-1',
      total_cost_usd: 0.01,
    },
  ];

  it('tool calls and results, the result as summary; usage is no event (the proxy reads it)', () => {
    const { reader, events } = readAll(claudeCode, lines);
    assert.equal(reader.sessionId, 'sess-1');
    assert.equal(reader.summary, 'Ran the tests');
    assert.equal(reader.error, undefined);
    assert.deepEqual(events, [
      { type: 'tool.call', id: 'toolu_1', name: 'Bash', summary: 'Bash npm test' },
      { type: 'tool.result', id: 'toolu_1', name: 'Bash', ok: true, summary: '2 lines' },
    ]);
  });

  it('an error result is the error, not a summary', () => {
    const { reader } = readAll(claudeCode, [
      { type: 'result', subtype: 'success', is_error: true, result: 'API Error: 401' },
    ]);
    assert.equal(reader.summary, undefined);
    assert.equal(reader.error, 'API Error: 401');
  });
});

describe('codex stream', () => {
  it('commands and patches as tool calls, the last agent message as summary', () => {
    const { reader, events } = readAll(codex, [
      { type: 'thread.started', thread_id: 'thread-1' },
      { type: 'turn.started' },
      {
        type: 'item.completed',
        item: {
          id: 'item_0',
          type: 'file_change',
          changes: [{ path: '/workspace/a.txt', kind: 'add' }],
          status: 'completed',
        },
      },
      {
        type: 'item.started',
        item: { id: 'item_1', type: 'command_execution', command: 'ls', status: 'in_progress' },
      },
      {
        type: 'item.completed',
        item: {
          id: 'item_1',
          type: 'command_execution',
          command: 'ls',
          aggregated_output: 'a.txt\n',
          exit_code: 0,
          status: 'completed',
        },
      },
      { type: 'item.completed', item: { id: 'item_2', type: 'agent_message', text: 'Done' } },
      {
        type: 'turn.completed',
        usage: { input_tokens: 100, cached_input_tokens: 60, output_tokens: 9 },
      },
    ]);
    assert.equal(reader.sessionId, 'thread-1');
    assert.equal(reader.summary, 'Done');
    assert.deepEqual(events, [
      {
        type: 'tool.call',
        id: 'item_0',
        name: 'apply_patch',
        summary: 'apply_patch add /workspace/a.txt',
      },
      { type: 'tool.result', id: 'item_0', name: 'apply_patch', ok: true, summary: 'done' },
      { type: 'tool.call', id: 'item_1', name: 'exec_command', summary: 'exec_command ls' },
      {
        type: 'tool.result',
        id: 'item_1',
        name: 'exec_command',
        ok: true,
        summary: 'exit 0: a.txt',
      },
    ]);
  });

  it('a failed turn is the error', () => {
    const { reader } = readAll(codex, [
      { type: 'turn.failed', error: { message: 'unexpected status 401' } },
    ]);
    assert.equal(reader.error, 'unexpected status 401');
  });
});

describe('opencode stream', () => {
  it('tool parts, the last step text as summary', () => {
    const { reader, events } = readAll(opencode, [
      { type: 'step_start', sessionID: 'ses_1', part: { type: 'step-start' } },
      {
        type: 'tool_use',
        sessionID: 'ses_1',
        part: {
          type: 'tool',
          tool: 'bash',
          callID: 'call_2',
          state: { status: 'error', input: { command: 'false' }, error: 'exit 1' },
        },
      },
      {
        type: 'step_finish',
        sessionID: 'ses_1',
        part: {
          type: 'step-finish',
          tokens: { input: 10, output: 2, reasoning: 1, cache: { read: 90, write: 0 } },
          cost: 0.002,
        },
      },
      { type: 'step_start', sessionID: 'ses_1', part: { type: 'step-start' } },
      { type: 'text', sessionID: 'ses_1', part: { type: 'text', text: 'All done' } },
    ]);
    assert.equal(reader.sessionId, 'ses_1');
    assert.equal(reader.summary, 'All done');
    assert.deepEqual(events, [
      { type: 'tool.call', id: 'call_2', name: 'bash', summary: 'bash false' },
      { type: 'tool.result', id: 'call_2', name: 'bash', ok: false, summary: 'exit 1' },
    ]);
  });
});
