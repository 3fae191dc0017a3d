// The tools of a turn's MCP servers (docs/mcp-servers.md) as the agent loop takes them: each
// named `server__tool` (in the providers' tool-name rules), with the server's description and
// input schema, its result turned into text, scrubbed of the turn's secrets and cut like any
// tool's. Connecting the servers is src/features/mcp-servers/'s (the pipeline is handed an
// opener, OpenAgentMcp); a server that cannot be listed is a failure to report, not a thrown one.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { type JSONSchema7, jsonSchema, type Tool, tool } from 'ai';
import type { McpServers } from '../../db/schema.ts';
import type { Emit } from '../../events/catalog.ts';
import type { SandboxLimits } from '../../projects/limits.ts';
import type { CommandsNetwork } from '../../projects/network.ts';
import type { TurnSecret } from '../../projects/secrets.ts';
import { headAndTail } from '../tool-results.ts';
import type { ToolResult } from './tool-run.ts';

/** What the pipeline gives the opener of a turn's servers. */
export interface AgentMcpInput {
  project: McpServers | null;
  job: McpServers | null;
  secrets: readonly TurnSecret[];
  /** ask and plan turns: only tools that say they change nothing (`readOnlyHint`). */
  readOnly: boolean;
  /** Where a stdio server may run: the turn's sandbox (undefined: commands off or no sandbox). */
  sandbox: { checkout: string; limits: SandboxLimits; network: CommandsNetwork } | undefined;
  signal: AbortSignal;
  emit: Emit;
  /** The turn's scrubber: no secret value reaches an event, a note or the model. */
  scrub: (text: string) => string;
}

/** A turn's servers, open: their tools, a note for the model, and how to close them. */
export interface AgentMcp {
  tools: Record<string, Tool>;
  /** What the model is told of servers that are not there (undefined: all are). */
  note: string | undefined;
  close(): Promise<void>;
}

export type OpenAgentMcp = (input: AgentMcpInput) => Promise<AgentMcp>;

/** The most characters of a result given to the model (the loop may cut it further). */
const MAX_RESULT_CHARS = 100_000;
const MAX_DESCRIPTION_CHARS = 2000;
const MAX_TOOLS_PER_SERVER = 64;

/** A tool's name in the providers' rules: letters, digits, `_` and `-`, at most 64. */
function mcpToolName(server: string, name: string): string {
  return `${server}__${name.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);
}

/** An MCP tool result's content as text for the model. */
function resultText(result: Awaited<ReturnType<Client['callTool']>>): string {
  const parts: string[] = [];
  const content = Array.isArray(result.content) ? result.content : [];
  for (const item of content as { type?: unknown; [key: string]: unknown }[]) {
    if (item.type === 'text' && typeof item.text === 'string') parts.push(item.text);
    else if (item.type === 'image' || item.type === 'audio')
      parts.push(`[${String(item.type)} ${String(item.mimeType ?? '')} left out]`);
    else if (item.type === 'resource' && typeof item.resource === 'object' && item.resource) {
      const resource = item.resource as { uri?: unknown; text?: unknown };
      parts.push(
        typeof resource.text === 'string' ? resource.text : `[resource ${String(resource.uri)}]`,
      );
    } else if (item.type === 'resource_link') parts.push(`[resource link ${String(item.uri)}]`);
  }
  if (parts.length === 0 && result.structuredContent !== undefined)
    parts.push(JSON.stringify(result.structuredContent));
  if (parts.length === 0 && 'toolResult' in result) parts.push(JSON.stringify(result.toolResult));
  return parts.join('\n');
}

/**
 * The agent's tools for one connected server: its tools listed (only read-only ones when
 * `readOnly`), each call forwarded with the turn's signal.
 */
export async function serverTools(
  server: string,
  client: Client,
  opts: {
    readOnly: boolean;
    signal: AbortSignal;
    timeoutMs: number;
    scrub: (text: string) => string;
  },
): Promise<Record<string, Tool>> {
  const listed: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined, {
      signal: opts.signal,
      timeout: opts.timeoutMs,
    });
    listed.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor && listed.length < MAX_TOOLS_PER_SERVER);
  const tools: Record<string, Tool> = {};
  for (const mcp of listed.slice(0, MAX_TOOLS_PER_SERVER)) {
    if (opts.readOnly && mcp.annotations?.readOnlyHint !== true) continue;
    const name = mcpToolName(server, mcp.name);
    if (name in tools) continue;
    const description = opts
      .scrub(`${mcp.description ?? mcp.title ?? mcp.name} (a tool of the MCP server "${server}")`)
      .slice(0, MAX_DESCRIPTION_CHARS);
    tools[name] = tool({
      description,
      inputSchema: jsonSchema(mcp.inputSchema as JSONSchema7),
      execute: async (input, { abortSignal }): Promise<ToolResult> => {
        const signal = abortSignal ? AbortSignal.any([opts.signal, abortSignal]) : opts.signal;
        try {
          const result = await client.callTool(
            { name: mcp.name, arguments: (input ?? {}) as Record<string, unknown> },
            undefined,
            { signal, timeout: opts.timeoutMs * 15 },
          );
          const text = opts.scrub(resultText(result));
          const cut =
            text.length > MAX_RESULT_CHARS ? headAndTail(text, MAX_RESULT_CHARS, name) : text;
          const ok = result.isError !== true;
          return { ok, title: `${name}${ok ? '' : ': failed'}`, text: ok ? cut : `Error: ${cut}` };
        } catch (err) {
          signal.throwIfAborted();
          const reason = opts.scrub(err instanceof Error ? err.message : String(err)).slice(0, 500);
          return { ok: false, title: `${name}: ${reason}`, text: `Error: ${reason}` };
        }
      },
      toModelOutput: ({ output }) => ({
        type: output.ok ? 'text' : 'error-text',
        value: output.text,
      }),
    });
  }
  return tools;
}
