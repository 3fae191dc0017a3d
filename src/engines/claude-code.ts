// Claude Code in print mode (`claude -p --output-format stream-json --verbose`), the prompt on
// its standard input: every permission granted (`bypassPermissions`: Errand's sandbox confines
// what it does, and Claude Code's own sandbox is off by default and stays off), the Anthropic
// API reached through Errand's model proxy with a placeholder key, its configuration and
// sessions in its HOME, the job's engine state.
import { isRecord } from '../json.ts';
import {
  type EngineDefinition,
  type EngineEvent,
  type EngineFile,
  type EngineImage,
  PLACEHOLDER_KEY,
  type StreamReader,
  str,
  summarizeCall,
  summarizeOutput,
} from './engine.ts';
import type { EngineMcpServer } from './mcp.ts';

/**
 * Tools taken away (not refused: the model is never offered them): they would reach past the
 * proxy (WebFetch has no network in the sandbox; WebSearch runs at the vendor's) or start
 * Claude Code's own background machinery, which a headless run never comes back to.
 */
export const CLAUDE_CODE_REMOVED_TOOLS = ['WebFetch', 'WebSearch', 'CronCreate', 'ScheduleWakeup'];

/**
 * Taken away too in an ask or a plan turn (docs/modes.md): every tool that writes a file, and
 * Bash, which could. Read, Glob and Grep remain.
 */
export const CLAUDE_CODE_WRITING_TOOLS = ['Edit', 'MultiEdit', 'Write', 'NotebookEdit', 'Bash'];

/** Where the turn's MCP servers are written for `--mcp-config`, in HOME. */
const MCP_CONFIG = '.errand/mcp.json';

/**
 * The turn's MCP servers in Claude Code's `--mcp-config` format: a stdio server with its
 * environment (the file, never an argument, holds its values), a remote one at the bridge.
 */
function mcpConfig(servers: readonly EngineMcpServer[]): EngineFile {
  const entries = servers.map((server) => [
    server.name,
    server.type === 'stdio'
      ? { type: 'stdio', command: server.command, args: server.args, env: server.env }
      : { type: 'http', url: server.url },
  ]);
  return {
    path: MCP_CONFIG,
    content: `${JSON.stringify({ mcpServers: Object.fromEntries(entries) }, null, 2)}\n`,
  };
}

/**
 * The prompt with its images as one user message of `--input-format stream-json`: the text,
 * then each image as an Anthropic base64 `image` block, which Claude Code sends the API as is.
 */
function userMessage(prompt: string, images: readonly EngineImage[]): string {
  const content = [
    { type: 'text', text: prompt },
    ...images.map((image) => ({
      type: 'image',
      source: {
        type: 'base64',
        media_type: image.mediaType,
        data: Buffer.from(image.data).toString('base64'),
      },
    })),
  ];
  const line = {
    type: 'user',
    message: { role: 'user', content },
    parent_tool_use_id: null,
    session_id: '',
  };
  return `${JSON.stringify(line)}\n`;
}

export const claudeCode: EngineDefinition = {
  name: 'claude-code',
  // `--json-schema`: a StructuredOutput tool the model must call, checked by Claude Code, its
  // value in the result line's `structured_output`.
  nativeOutput: () => true,
  mcpConfig: MCP_CONFIG,
  invocation(setup) {
    const mcp = setup.mcp.length > 0 ? mcpConfig(setup.mcp) : undefined;
    // Images go with the prompt as a message of the JSON stream on standard input, never in an
    // argument; a turn without any keeps the plain prompt.
    const streamed = setup.images.length > 0;
    return {
      argv: [
        setup.bin,
        '-p',
        '--output-format',
        'stream-json',
        ...(streamed ? ['--input-format', 'stream-json'] : []),
        '--verbose',
        '--model',
        setup.model.id,
        // Every tool call allowed without asking, wherever it reaches: a print-mode run has
        // nobody to ask, and refuses what would be asked (the model sees the refusal).
        '--permission-mode',
        'bypassPermissions',
        '--disallowedTools',
        [...CLAUDE_CODE_REMOVED_TOOLS, ...(setup.readOnly ? CLAUDE_CODE_WRITING_TOOLS : [])].join(
          ',',
        ),
        ...(setup.resume ? ['--resume', setup.resume] : []),
        ...(setup.outputSchema ? ['--json-schema', JSON.stringify(setup.outputSchema)] : []),
        // Its tools are named mcp__<server>__<tool>, allowed like the rest (bypassPermissions);
        // no other MCP configuration (a repository's .mcp.json) is read.
        ...(mcp ? ['--mcp-config', `${setup.home}/${mcp.path}`, '--strict-mcp-config'] : []),
      ],
      // With no prompt argument, print mode reads it from standard input.
      stdin: streamed ? userMessage(setup.prompt, setup.images) : setup.prompt,
      ...(mcp ? { files: [mcp] } : {}),
      env: {
        ANTHROPIC_BASE_URL: setup.proxyOrigin,
        ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
        DISABLE_AUTOUPDATER: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        // Said truthfully: it runs in bubblewrap. Without it Claude Code refuses to bypass
        // permissions as root (a service run as root is root in the sandbox's user namespace).
        CLAUDE_CODE_BUBBLEWRAP: '1',
        // MCP tools offered with their schemas, like the built-in ones, rather than deferred
        // behind its ToolSearch tool.
        ...(mcp ? { ENABLE_TOOL_SEARCH: 'false' } : {}),
      },
    };
  },
  reader: () => new ClaudeReader(),
};

class ClaudeReader implements StreamReader {
  sessionId: string | undefined;
  summary: string | undefined;
  error: string | undefined;
  output: { value: unknown } | undefined;
  /** Tool names by call id, for their results. */
  readonly #calls = new Map<string, string>();

  read(line: Record<string, unknown>): EngineEvent[] {
    const sessionId = str(line.session_id);
    if (sessionId) this.sessionId = sessionId;
    const message = isRecord(line.message) ? line.message : {};
    const blocks = Array.isArray(message.content) ? message.content.filter(isRecord) : [];
    const events: EngineEvent[] = [];
    switch (line.type) {
      case 'assistant': {
        for (const block of blocks) {
          if (block.type !== 'tool_use') continue;
          const callId = str(block.id) ?? '';
          const name = str(block.name) ?? 'tool';
          this.#calls.set(callId, name);
          events.push({
            type: 'tool.call',
            id: callId,
            name,
            summary: summarizeCall(name, block.input),
          });
        }
        break;
      }
      case 'user':
        for (const block of blocks) {
          if (block.type !== 'tool_result') continue;
          const callId = str(block.tool_use_id) ?? '';
          const name = this.#calls.get(callId) ?? 'tool';
          events.push({
            type: 'tool.result',
            id: callId,
            name,
            ok: block.is_error !== true,
            summary: summarizeOutput(resultText(block.content)),
          });
        }
        break;
      case 'result': {
        const text = str(line.result);
        // No valid structured output after Claude Code's own tries: not the engine's failure but
        // an invalid answer, which Errand's check tells it once more (src/engines/output.ts).
        if (line.subtype === 'error_max_structured_output_retries') {
          this.summary = text ?? '';
          break;
        }
        if (line.is_error === true || line.subtype !== 'success') {
          this.error = text || `Claude Code ended with ${str(line.subtype) ?? 'an error'}`;
        } else if (text !== undefined) {
          this.summary = text;
        }
        if ('structured_output' in line) this.output = { value: line.structured_output };
        break;
      }
      default:
        break;
    }
    return events;
  }
}

/** A tool result's content: a string, or text blocks. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(isRecord)
    .map((b) => str(b.text) ?? '')
    .join('\n');
}
