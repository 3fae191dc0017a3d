// Codex (`codex exec --json`, `codex exec resume <thread>` for a follow-up), the prompt on its
// standard input: its approvals and its own sandbox off (Errand's sandbox replaces them), the
// OpenAI Responses API reached through Errand's model proxy as a provider of its configuration,
// whose key variable holds only a placeholder. Its home (sessions) is the job's engine state;
// its configuration is given on the command line, but for the turn's MCP servers, whose
// settings may hold secrets: they are written to ~/.codex/config.toml for the turn.
import { isRecord } from '../json.ts';
import { oneLine } from '../text.ts';
import {
  type EngineDefinition,
  type EngineEvent,
  type EngineFile,
  imageFiles,
  PLACEHOLDER_KEY,
  type StreamReader,
  str,
  summarizeOutput,
} from './engine.ts';
import type { EngineMcpServer } from './mcp.ts';

const KEY_VARIABLE = 'OPENAI_API_KEY';

/** A TOML basic string: JSON's escapes are TOML's for the characters a URL or id may hold. */
function tomlString(value: string): string {
  return JSON.stringify(value);
}

/**
 * Codex's configuration as `-c key=value` overrides (values in TOML), which `--strict-config`
 * checks as it checks config.toml: a key this version does not know stops it.
 */
function configuration(setup: { model: { id: string }; proxyOrigin: string }): string[][] {
  return [
    ['model', tomlString(setup.model.id)],
    ['model_provider', '"errand"'],
    ['model_providers.errand.name', '"Errand model proxy"'],
    ['model_providers.errand.base_url', tomlString(`${setup.proxyOrigin}/v1`)],
    ['model_providers.errand.env_key', tomlString(KEY_VARIABLE)],
    ['model_providers.errand.wire_api', '"responses"'],
    // Errand retries a failed turn itself.
    ['model_providers.errand.request_max_retries', '0'],
    ['model_providers.errand.stream_max_retries', '0'],
    // Nothing but the model is reachable from the sandbox. Codex sends usage analytics to
    // ab.chatgpt.com and retries them for about 5 s before it exits, and syncs its curated
    // plugins from GitHub (git ls-remote) at start.
    ['analytics.enabled', 'false'],
    ['features.plugins', 'false'],
    // A search the vendor runs for it would reach the internet: the model proxy strips the
    // tool from every request, and so the model is not offered a tool that is never there.
    ['web_search', '"disabled"'],
  ];
}

/** Where the output schema's file is, in the sandbox's own /tmp. */
const OUTPUT_SCHEMA_FILE = '/tmp/errand-output-schema.json';

/**
 * Whether OpenAI's strict structured outputs, which `--output-schema` asks for, take `schema`:
 * an object at the root, and every object closed with all its properties required.
 */
function strictCompatible(schema: unknown, root = true): boolean {
  if (Array.isArray(schema)) return schema.every((item) => strictCompatible(item, false));
  if (!isRecord(schema)) return true;
  if (root && schema.type !== 'object') return false;
  if (schema.type === 'object' || isRecord(schema.properties)) {
    const keys = isRecord(schema.properties) ? Object.keys(schema.properties) : [];
    const required = Array.isArray(schema.required) ? schema.required : [];
    if (schema.additionalProperties !== false) return false;
    if (!keys.every((key) => required.includes(key))) return false;
  }
  return Object.entries(schema).every(
    ([key, value]) =>
      ['enum', 'const', 'default', 'examples'].includes(key) || strictCompatible(value, false),
  );
}

/** Codex reads its MCP servers from its config.toml, in CODEX_HOME (~/.codex). */
const MCP_CONFIG = '.codex/config.toml';

/** Seconds a server may take to start and list its tools (Codex's default is 10). */
const MCP_STARTUP_SECONDS = 30;

/**
 * The turn's MCP servers as Codex's config.toml (`[mcp_servers.<name>]`), the one file Codex
 * reads them from that is not an argument: a stdio server's command, arguments and environment;
 * a remote one's URL at the bridge. Every tool is approved without asking: nobody answers.
 */
function mcpConfig(servers: readonly EngineMcpServer[]): EngineFile {
  const tables = servers.map((server) => {
    const table = `mcp_servers.${tomlString(server.name)}`;
    const common = [
      `startup_timeout_sec = ${MCP_STARTUP_SECONDS}`,
      'default_tools_approval_mode = "approve"',
    ];
    if (server.type === 'http') {
      return [`[${table}]`, `url = ${tomlString(server.url)}`, ...common].join('\n');
    }
    const env = Object.entries(server.env).map(([k, v]) => `${tomlString(k)} = ${tomlString(v)}`);
    return [
      `[${table}]`,
      `command = ${tomlString(server.command)}`,
      `args = [${server.args.map(tomlString).join(', ')}]`,
      ...common,
      `[${table}.env]`,
      ...env,
    ].join('\n');
  });
  return { path: MCP_CONFIG, content: `${tables.join('\n\n')}\n` };
}

export const codex: EngineDefinition = {
  name: 'codex',
  // `--output-schema` asks the Responses API for a strict JSON schema: a schema strict mode
  // refuses is asked for in the prompt instead.
  nativeOutput: (schema) => strictCompatible(schema),
  mcpConfig: MCP_CONFIG,
  invocation(setup) {
    const schema = setup.outputSchema;
    const images = imageFiles(setup.images);
    const files = [...(setup.mcp.length > 0 ? [mcpConfig(setup.mcp)] : []), ...images];
    return {
      argv: [
        setup.bin,
        'exec',
        ...(setup.resume ? ['resume'] : []),
        '--json',
        '--skip-git-repo-check',
        '--strict-config',
        // No approval is ever asked and Codex's own sandbox is off: the run is in Errand's.
        '--dangerously-bypass-approvals-and-sandbox',
        ...configuration(setup).flatMap(([key, value]) => ['-c', `${key}=${value}`]),
        ...(schema ? ['--output-schema', OUTPUT_SCHEMA_FILE] : []),
        // Attached to the prompt (`exec` and `exec resume` alike); one word each, as `--image`
        // takes several values.
        ...images.map((file) => `--image=${setup.home}/${file.path}`),
        '--',
        ...(setup.resume ? [setup.resume] : []),
        // `-`: the prompt is read from standard input.
        '-',
      ],
      stdin: setup.prompt,
      env: { [KEY_VARIABLE]: PLACEHOLDER_KEY },
      ...(schema ? { sandboxFiles: { [OUTPUT_SCHEMA_FILE]: JSON.stringify(schema) } } : {}),
      ...(files.length > 0 ? { files } : {}),
    };
  },
  reader: () => new CodexReader(),
};

class CodexReader implements StreamReader {
  sessionId: string | undefined;
  summary: string | undefined;
  error: string | undefined;
  readonly #started = new Set<string>();

  read(line: Record<string, unknown>): EngineEvent[] {
    switch (line.type) {
      case 'thread.started':
        this.sessionId = str(line.thread_id) ?? this.sessionId;
        return [];
      case 'item.started':
      case 'item.completed':
        return isRecord(line.item) ? this.#item(line.item, line.type === 'item.completed') : [];
      case 'turn.failed':
        this.error = (isRecord(line.error) ? str(line.error.message) : undefined) ?? 'turn failed';
        return [];
      case 'error':
        this.error = str(line.message) ?? this.error;
        return [];
      default:
        return [];
    }
  }

  #item(item: Record<string, unknown>, completed: boolean): EngineEvent[] {
    const id = str(item.id) ?? '';
    const call = this.#call(item);
    if (item.type === 'agent_message') {
      if (completed) this.summary = str(item.text) ?? this.summary;
      return [];
    }
    if (!call) return [];
    const events: EngineEvent[] = [];
    if (!this.#started.has(id)) {
      this.#started.add(id);
      events.push({ type: 'tool.call', id, name: call.name, summary: call.summary });
    }
    if (completed) {
      events.push({ type: 'tool.result', id, name: call.name, ...outcome(item) });
    }
    return events;
  }

  #call(item: Record<string, unknown>): { name: string; summary: string } | undefined {
    switch (item.type) {
      case 'command_execution':
        return {
          name: 'exec_command',
          summary: oneLine(`exec_command ${str(item.command) ?? ''}`),
        };
      case 'file_change': {
        const paths = (Array.isArray(item.changes) ? item.changes : [])
          .filter(isRecord)
          .map((c) => `${str(c.kind) ?? 'change'} ${str(c.path) ?? '?'}`);
        return { name: 'apply_patch', summary: oneLine(`apply_patch ${paths.join(', ')}`) };
      }
      case 'mcp_tool_call':
        return { name: str(item.tool) ?? 'mcp', summary: str(item.tool) ?? 'mcp tool' };
      case 'web_search':
        return { name: 'web_search', summary: oneLine(`web_search ${str(item.query) ?? ''}`) };
      default:
        return undefined;
    }
  }
}

function outcome(item: Record<string, unknown>): { ok: boolean; summary: string } {
  if (item.type === 'command_execution') {
    const exit = typeof item.exit_code === 'number' ? item.exit_code : null;
    const output = summarizeOutput(str(item.aggregated_output) ?? '');
    return {
      ok: exit === 0,
      summary: `exit ${exit ?? '?'}${output ? `: ${output}` : ''}`,
    };
  }
  const ok = item.status === 'completed';
  return { ok, summary: ok ? 'done' : (str(item.status) ?? 'failed') };
}
