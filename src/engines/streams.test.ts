// The engines' command lines and their streams read as Errand's events, from lines as each CLI
// prints them (taken from runs of the pinned versions; test/engines/ runs the real CLIs).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CLAUDE_CODE_REMOVED_TOOLS, CLAUDE_CODE_WRITING_TOOLS, claudeCode } from './claude-code.ts';
import { codex } from './codex.ts';
import type { EngineDefinition, EngineEvent, EngineFile } from './engine.ts';
import { OPENCODE_PERMISSIONS, OPENCODE_READ_ONLY, opencode } from './opencode.ts';

const setup = {
  bin: '/engines/x/bin',
  workspace: '/workspace',
  model: { provider: 'openai', id: 'gpt-test' },
  proxyOrigin: 'http://127.0.0.1:8787',
  prompt: '--help me; rm -rf /',
  resume: undefined,
  title: 'help me',
  home: '/tmp/home',
  mcp: [],
  images: [],
};

/** A configuration file's text (a binary file, an image, fails the test). */
function text(file: EngineFile | undefined): string {
  const content = file?.content;
  if (typeof content !== 'string') assert.fail(`${file?.path} is not a text file`);
  return content;
}

function readAll(definition: EngineDefinition, lines: unknown[]) {
  const reader = definition.reader();
  const events: EngineEvent[] = [];
  for (const line of lines) events.push(...reader.read(line as Record<string, unknown>));
  return { reader, events };
}

describe('engine command lines', () => {
  for (const definition of [claudeCode, codex, opencode]) {
    it(`${definition.name}: the prompt is its standard input, not an argument; the key only a placeholder`, () => {
      const fresh = definition.invocation(setup);
      assert.equal(fresh.argv[0], setup.bin);
      assert.equal(fresh.stdin, setup.prompt);
      assert.ok(!fresh.argv.some((word) => word.includes(setup.prompt)));
      const all = JSON.stringify(fresh.env) + JSON.stringify(fresh.argv);
      assert.match(all, /errand-proxy/);
      assert.match(all, /127\.0\.0\.1:8787/);
      const resumed = definition.invocation({ ...setup, resume: 'session-1' });
      assert.ok(resumed.argv.includes('session-1'));
      assert.ok(!fresh.argv.includes('session-1'));
    });
  }

  /** A stdio server whose environment holds a secret, and a remote one at the bridge. */
  const mcp = [
    {
      type: 'stdio' as const,
      name: 'probe',
      command: '/usr/bin/node',
      args: ['server.js', '--quote="x"'],
      env: { PROBE_TOKEN: 'probe-secret-value' },
    },
    { type: 'http' as const, name: 'docs', url: 'http://127.0.0.1:8788/mcp/docs' },
  ];

  for (const definition of [claudeCode, codex, opencode]) {
    it(`${definition.name}: MCP servers in a file of its HOME, their environment in no argument`, () => {
      assert.equal(definition.invocation(setup).files, undefined, 'no servers, no file');
      const { argv, env, files = [] } = definition.invocation({ ...setup, mcp });
      assert.equal(files.length, 1);
      const [file] = files;
      assert.equal(file?.path, definition.mcpConfig);
      assert.ok(file && !file.path.startsWith('/') && !file.path.includes('..'));
      assert.match(text(file), /probe-secret-value/);
      assert.match(text(file), /http:\/\/127\.0\.0\.1:8788\/mcp\/docs/);
      assert.ok(!JSON.stringify(argv).includes('probe-secret-value'));
      assert.ok(!JSON.stringify(env).includes('probe-secret-value'));
    });
  }

  /** Two images: their bytes must be in no argument and no variable. */
  const images = [
    { mediaType: 'image/png' as const, data: Buffer.from('89504e470d0a1a0a0001', 'hex') },
    { mediaType: 'image/jpeg' as const, data: Buffer.from('ffd8ffe0000102', 'hex') },
  ];
  const inNoArgument = (argv: string[], env: Record<string, string>) => {
    const all = JSON.stringify(argv) + JSON.stringify(env);
    for (const image of images) assert.ok(!all.includes(image.data.toString('base64')));
  };

  it('claude code: images in a stream-json user message on standard input, after the prompt', () => {
    const { argv, env, stdin, files } = claudeCode.invocation({ ...setup, images });
    inNoArgument(argv, env);
    assert.equal(files, undefined);
    assert.deepEqual(
      argv.slice(argv.indexOf('--input-format'), argv.indexOf('--input-format') + 2),
      ['--input-format', 'stream-json'],
    );
    assert.ok(stdin.endsWith('\n'));
    assert.deepEqual(JSON.parse(stdin), {
      type: 'user',
      message: {
        role: 'user',
        content: [
          { type: 'text', text: setup.prompt },
          ...images.map((image) => ({
            type: 'image',
            source: {
              type: 'base64',
              media_type: image.mediaType,
              data: image.data.toString('base64'),
            },
          })),
        ],
      },
      parent_tool_use_id: null,
      session_id: '',
    });
    // Without images, the plain prompt as before.
    assert.ok(!claudeCode.invocation(setup).argv.includes('--input-format'));
  });

  for (const [definition, option] of [
    [codex, '--image'],
    [opencode, '--file'],
  ] as const) {
    it(`${definition.name}: images as files in its HOME, each named by ${option}, never in an argument`, () => {
      const { argv, env, stdin, files = [] } = definition.invocation({ ...setup, images });
      inNoArgument(argv, env);
      assert.equal(stdin, setup.prompt);
      assert.deepEqual(
        files.map((file) => [file.path, file.content]),
        [
          ['.errand/images/1.png', images[0]?.data],
          ['.errand/images/2.jpg', images[1]?.data],
        ],
      );
      assert.deepEqual(
        argv.filter((word) => word.startsWith(`${option}=`)),
        [`${option}=/tmp/home/.errand/images/1.png`, `${option}=/tmp/home/.errand/images/2.jpg`],
      );
      // On a follow-up too, and as options: before a `--` that ends them (Codex's).
      const resumed = definition.invocation({ ...setup, images, resume: 'session-1' }).argv;
      const at = resumed.indexOf(`${option}=/tmp/home/.errand/images/1.png`);
      const end = resumed.indexOf('--');
      assert.ok(at > 0 && (end < 0 || at < end), resumed.join(' '));
      assert.ok(!definition.invocation(setup).argv.some((word) => word.startsWith(option)));
    });
  }

  it('opencode: the model declared to take images when it does, so that none becomes a note', () => {
    const modalities = (takesImages: boolean, withImages: boolean) => {
      const { env } = opencode.invocation({
        ...setup,
        takesImages,
        images: withImages ? images : [],
      });
      const config = JSON.parse(env.OPENCODE_CONFIG_CONTENT ?? '{}');
      return config.provider.errand.models[setup.model.id].modalities;
    };
    const both = { input: ['text', 'image'], output: ['text'] };
    assert.deepEqual(modalities(true, false), both);
    assert.deepEqual(modalities(false, true), both);
    assert.equal(modalities(false, false), undefined);
  });

  it('claude code: its MCP configuration named, and no other read', () => {
    const { argv, env, files = [] } = claudeCode.invocation({ ...setup, mcp });
    const at = argv.indexOf('--mcp-config');
    assert.equal(argv[at + 1], '/tmp/home/.errand/mcp.json');
    assert.ok(argv.includes('--strict-mcp-config'));
    assert.equal(env.ENABLE_TOOL_SEARCH, 'false');
    assert.deepEqual(JSON.parse(text(files[0])), {
      mcpServers: {
        probe: {
          type: 'stdio',
          command: '/usr/bin/node',
          args: ['server.js', '--quote="x"'],
          env: { PROBE_TOKEN: 'probe-secret-value' },
        },
        docs: { type: 'http', url: 'http://127.0.0.1:8788/mcp/docs' },
      },
    });
    assert.ok(!claudeCode.invocation(setup).argv.includes('--mcp-config'));
  });

  it('codex: its MCP servers in ~/.codex/config.toml, each tool approved without asking', () => {
    const { files = [] } = codex.invocation({ ...setup, mcp });
    assert.equal(files[0]?.path, '.codex/config.toml');
    assert.equal(
      text(files[0]),
      [
        '[mcp_servers."probe"]',
        'command = "/usr/bin/node"',
        'args = ["server.js", "--quote=\\"x\\""]',
        'startup_timeout_sec = 30',
        'default_tools_approval_mode = "approve"',
        '[mcp_servers."probe".env]',
        '"PROBE_TOKEN" = "probe-secret-value"',
        '',
        '[mcp_servers."docs"]',
        'url = "http://127.0.0.1:8788/mcp/docs"',
        'startup_timeout_sec = 30',
        'default_tools_approval_mode = "approve"',
        '',
      ].join('\n'),
    );
  });

  it('opencode: its MCP servers in a file OPENCODE_CONFIG names, OAuth detection off', () => {
    const { env, files = [] } = opencode.invocation({ ...setup, mcp });
    assert.equal(env.OPENCODE_CONFIG, `/tmp/home/${files[0]?.path}`);
    assert.deepEqual(JSON.parse(text(files[0])).mcp, {
      probe: {
        type: 'local',
        command: ['/usr/bin/node', 'server.js', '--quote="x"'],
        environment: { PROBE_TOKEN: 'probe-secret-value' },
        enabled: true,
        timeout: 60_000,
      },
      docs: {
        type: 'remote',
        url: 'http://127.0.0.1:8788/mcp/docs',
        enabled: true,
        oauth: false,
        timeout: 60_000,
      },
    });
    assert.equal(opencode.invocation(setup).env.OPENCODE_CONFIG, undefined);
  });

  it('claude code: every permission granted, as the sandbox (not the root user) it runs in', () => {
    const { argv, env } = claudeCode.invocation(setup);
    const mode = argv.indexOf('--permission-mode');
    assert.equal(argv[mode + 1], 'bypassPermissions');
    assert.ok(!argv.includes('--allowedTools'));
    assert.equal(env.CLAUDE_CODE_BUBBLEWRAP, '1');
  });

  /** Codex's `-c key=value` overrides, as a map. */
  const codexConfig = (argv: string[]) =>
    new Map(
      argv.flatMap((word, i) => {
        if (argv[i - 1] !== '-c') return [];
        const equals = word.indexOf('=');
        return [[word.slice(0, equals), word.slice(equals + 1)] as const];
      }),
    );

  it('codex: its configuration names the proxy as the Responses provider, no sandbox, no approvals', () => {
    const { argv } = codex.invocation(setup);
    const config = codexConfig(argv);
    assert.equal(config.get('model_providers.errand.base_url'), '"http://127.0.0.1:8787/v1"');
    assert.equal(config.get('model_providers.errand.wire_api'), '"responses"');
    assert.equal(config.get('model_provider'), '"errand"');
    assert.ok(argv.includes('--dangerously-bypass-approvals-and-sandbox'));
    assert.ok(argv.includes('--strict-config'));
    assert.deepEqual(argv.slice(-2), ['--', '-']);
    const resumed = codex.invocation({ ...setup, resume: 'thread-1' }).argv;
    assert.deepEqual(resumed.slice(1, 3), ['exec', 'resume']);
    assert.deepEqual(resumed.slice(-3), ['--', 'thread-1', '-']);
  });

  it('codex: analytics and the curated plugins, which only wait on the network, are off', () => {
    const config = codexConfig(codex.invocation(setup).argv);
    assert.equal(config.get('analytics.enabled'), 'false');
    assert.equal(config.get('features.plugins'), 'false');
  });

  it("opencode: Bun's JIT pool and allocator arena are reserved small enough for the sandbox's data limit", () => {
    const { env } = opencode.invocation(setup);
    const mib = 1024 * 1024;
    assert.equal(Number(env.BUN_JSC_jitMemoryReservationSize), 64 * mib);
    assert.equal(env.MIMALLOC_ARENA_RESERVE, '64MiB');
  });

  it('opencode: an anthropic model gets the Anthropic provider package; the configuration is in its environment', () => {
    const { env } = opencode.invocation({ ...setup, model: { provider: 'anthropic', id: 'c' } });
    const config = JSON.parse(env.OPENCODE_CONFIG_CONTENT ?? '{}');
    assert.equal(config.provider.errand.npm, '@ai-sdk/anthropic');
    assert.equal(config.provider.errand.options.baseURL, 'http://127.0.0.1:8787/v1');
    assert.equal(config.model, 'errand/c');
  });

  it('claude code: an ask or plan turn is offered no tool that writes or runs a command', () => {
    const removed = (readOnly: boolean) => {
      const { argv } = claudeCode.invocation({ ...setup, readOnly });
      return argv[argv.indexOf('--disallowedTools') + 1]?.split(',') ?? [];
    };
    assert.deepEqual(removed(false), CLAUDE_CODE_REMOVED_TOOLS);
    assert.deepEqual(removed(true), [...CLAUDE_CODE_REMOVED_TOOLS, ...CLAUDE_CODE_WRITING_TOOLS]);
    for (const tool of ['Edit', 'Write', 'Bash']) assert.ok(removed(true).includes(tool));
  });

  it('opencode: an ask or plan turn denies edit and bash, and allows the rest as a code turn', () => {
    const permission = (readOnly: boolean) =>
      JSON.parse(opencode.invocation({ ...setup, readOnly }).env.OPENCODE_CONFIG_CONTENT ?? '{}')
        .permission;
    assert.deepEqual(permission(false), OPENCODE_PERMISSIONS);
    assert.deepEqual(permission(true), OPENCODE_READ_ONLY);
    assert.equal(permission(true).edit, 'deny');
    assert.equal(permission(true).bash, 'deny');
    assert.equal(permission(true).read, 'allow');
  });

  it('opencode: a title that starts with a dash stays the title', () => {
    const { argv } = opencode.invocation({ ...setup, title: '--help me' });
    assert.ok(argv.includes('--title=--help me'));
  });
});

describe('engine command lines: output schema (docs/structured-output.md)', () => {
  const closed = {
    type: 'object',
    properties: { a: { type: 'string' } },
    required: ['a'],
    additionalProperties: false,
  };
  it('claude code takes any schema as --json-schema', () => {
    assert.equal(claudeCode.nativeOutput({ type: 'array' }), true);
    const { argv } = claudeCode.invocation({ ...setup, outputSchema: closed });
    assert.equal(argv[argv.indexOf('--json-schema') + 1], JSON.stringify(closed));
    assert.ok(!claudeCode.invocation(setup).argv.includes('--json-schema'));
  });
  it("codex takes a schema OpenAI's strict mode takes, as a file its shell writes in /tmp", () => {
    assert.equal(codex.nativeOutput(closed), true);
    for (const refused of [
      { type: 'array' },
      { ...closed, additionalProperties: true },
      { ...closed, required: [] },
      { ...closed, properties: { a: { type: 'object', properties: {} } } },
    ])
      assert.equal(codex.nativeOutput(refused), false, JSON.stringify(refused));
    const { argv, sandboxFiles } = codex.invocation({ ...setup, outputSchema: closed });
    const file = argv[argv.indexOf('--output-schema') + 1] ?? '';
    assert.match(file, /^\/tmp\//);
    assert.deepEqual(sandboxFiles, { [file]: JSON.stringify(closed) });
    assert.equal(codex.invocation(setup).sandboxFiles, undefined);
  });
  it('opencode has no flag: the prompt asks for the JSON', () => {
    assert.equal(opencode.nativeOutput(closed), false);
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

  it('structured output (docs/structured-output.md): the result line holds it; none valid after its own tries is an answer to check, not an error', () => {
    const value = { verdict: 'no' };
    const given = readAll(claudeCode, [
      { type: 'result', subtype: 'success', is_error: false, result: '', structured_output: value },
    ]).reader;
    assert.deepEqual(given.output, { value });
    assert.equal(given.error, undefined);
    const none = readAll(claudeCode, [
      {
        type: 'result',
        subtype: 'error_max_structured_output_retries',
        is_error: true,
        result: 'I could not',
      },
    ]).reader;
    assert.equal(none.output, undefined);
    assert.equal(none.error, undefined);
    assert.equal(none.summary, 'I could not');
    assert.equal(readAll(claudeCode, lines).reader.output, undefined);
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
