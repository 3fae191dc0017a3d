// OpenCode (`opencode run --format json`, `--session <id>` for a follow-up), the prompt on its
// standard input: a provider whose base URL is Errand's model proxy and whose key is a
// placeholder, every permission allowed (Errand's sandbox confines it), a repository's own
// OpenCode configuration ignored, and its data (sessions) in its HOME, the job's engine state.
// Its configuration is given in the environment, but for the turn's MCP servers, whose settings
// may hold secrets: a file in its HOME for the turn, named by OPENCODE_CONFIG.
import { isRecord } from '../json.ts';
import {
  type EngineDefinition,
  type EngineEvent,
  type EngineFile,
  imageFiles,
  PLACEHOLDER_KEY,
  type StreamReader,
  str,
  summarizeCall,
  summarizeOutput,
} from './engine.ts';
import type { EngineMcpServer } from './mcp.ts';

/**
 * OpenCode's permissions, each named as its pinned version names them (its configuration
 * schema's keys, and those its agents have rules for: test/engines/permissions.test.ts reads
 * both from the installed executable). `*` comes first and allows whatever a later version adds;
 * the configuration's rules come after OpenCode's own defaults, so they decide. Nothing is
 * left to `ask`, which a headless run answers by rejecting the call and ending the session.
 */
export const OPENCODE_PERMISSIONS: Readonly<Record<string, 'allow' | 'deny'>> = {
  '*': 'allow',
  read: 'allow',
  edit: 'allow',
  glob: 'allow',
  grep: 'allow',
  list: 'allow',
  bash: 'allow',
  task: 'allow',
  // Paths outside the checkout: its HOME, /tmp, the system (read-only in the sandbox).
  external_directory: 'allow',
  todowrite: 'allow',
  // No network in the sandbox: a fetch or search fails, as a tool error the model sees.
  webfetch: 'allow',
  websearch: 'allow',
  lsp: 'allow',
  // The same call three times in a row: a stuck model is bounded by ERRAND_MAX_STEPS instead.
  doom_loop: 'allow',
  skill: 'allow',
  // These only ask the user something (a question, switching to or from the plan agent), and
  // nobody answers a headless run: denied, as `opencode run` denies them itself, so the model
  // is not offered them and a call of one is a tool error.
  question: 'deny',
  plan_enter: 'deny',
  plan_exit: 'deny',
};

/**
 * An ask or a plan turn's permissions (docs/modes.md): OpenCode's `edit` covers every tool that
 * writes a file (write, edit, patch), and `bash` is denied since a command could write; the
 * model is not offered them.
 */
export const OPENCODE_READ_ONLY: Readonly<Record<string, 'allow' | 'deny'>> = {
  ...OPENCODE_PERMISSIONS,
  edit: 'deny',
  bash: 'deny',
};

/** The AI SDK provider package OpenCode loads for each of Errand's providers. */
const PROVIDER_PACKAGES: Readonly<Record<string, string>> = {
  anthropic: '@ai-sdk/anthropic',
  openai: '@ai-sdk/openai-compatible',
  'openai-compatible': '@ai-sdk/openai-compatible',
};

/**
 * OpenCode is a Bun executable, and the sandbox bounds memory with RLIMIT_DATA, which counts
 * address space reserved for writing even where nothing is touched. At start Bun reserves a
 * 1 GiB arena (mimalloc) and a 1 GiB pool for JIT code: under the default 2 GiB bound the pool's
 * reservation fails, JavaScriptCore runs without its JIT, and OpenCode takes three times as long
 * to start (9 s instead of 3). A 64 MiB arena (more are added as needed) and a 64 MiB pool (the
 * size Claude Code's own Bun build uses; OpenCode's code fills about 9 MiB of it) let the JIT
 * run within the bound, with room left for the heap.
 */
const BUN_RESERVATIONS = {
  MIMALLOC_ARENA_RESERVE: '64MiB',
  BUN_JSC_jitMemoryReservationSize: String(64 * 1024 * 1024),
};

/** Where its MCP servers are written, in HOME: OPENCODE_CONFIG names the file. */
const MCP_CONFIG = '.errand/opencode-mcp.json';

/** A server's requests may take this long (OpenCode's default is 5 s: a remote tool is slower). */
const MCP_TIMEOUT_MS = 60_000;

/**
 * The turn's MCP servers as OpenCode's `mcp` configuration: a stdio server is `local` (its
 * command and arguments one array, its environment in the file), a remote one is the bridge's
 * URL with OAuth detection off (the bridge never asks for it). Its tools are named
 * `<server>_<tool>`, allowed by the `*` permission.
 */
function mcpConfig(servers: readonly EngineMcpServer[]): EngineFile {
  const entries = servers.map((server) => [
    server.name,
    server.type === 'stdio'
      ? {
          type: 'local',
          command: [server.command, ...server.args],
          environment: server.env,
          enabled: true,
          timeout: MCP_TIMEOUT_MS,
        }
      : { type: 'remote', url: server.url, enabled: true, oauth: false, timeout: MCP_TIMEOUT_MS },
  ]);
  return {
    path: MCP_CONFIG,
    content: `${JSON.stringify({ mcp: Object.fromEntries(entries) }, null, 2)}\n`,
  };
}

export const opencode: EngineDefinition = {
  // No flag of its own: the prompt asks for the JSON, and Errand checks the final message.
  nativeOutput: () => false,
  name: 'opencode',
  mcpConfig: MCP_CONFIG,
  // Below it JavaScriptCore stops with MemoryExhaustion at start, even with the small reservations.
  minimumMemoryMb: 2048,
  invocation(setup) {
    const config = {
      $schema: 'https://opencode.ai/config.json',
      autoupdate: false,
      share: 'disabled',
      model: `errand/${setup.model.id}`,
      small_model: `errand/${setup.model.id}`,
      permission: setup.readOnly ? OPENCODE_READ_ONLY : OPENCODE_PERMISSIONS,
      provider: {
        errand: {
          npm: PROVIDER_PACKAGES[setup.model.provider],
          name: 'Errand model proxy',
          options: { baseURL: `${setup.proxyOrigin}/v1`, apiKey: PLACEHOLDER_KEY },
          models: {
            [setup.model.id]: {
              name: setup.model.id,
              // What it may be sent; without `image`, an image part becomes an error note.
              ...(setup.takesImages || setup.images.length > 0
                ? { modalities: { input: ['text', 'image'], output: ['text'] } }
                : {}),
            },
          },
        },
      },
    };
    const mcp = setup.mcp.length > 0 ? mcpConfig(setup.mcp) : undefined;
    const images = imageFiles(setup.images);
    const files = [...(mcp ? [mcp] : []), ...images];
    return {
      argv: [
        setup.bin,
        'run',
        '--format',
        'json',
        // A permission that would still be asked is granted once instead of rejected.
        '--auto',
        // One word, so that a title starting with `-` is not read as an option.
        `--title=${setup.title}`,
        ...(setup.resume ? ['--session', setup.resume] : []),
        // Attached to the message; one word each, as `--file` takes several values.
        ...images.map((file) => `--file=${setup.home}/${file.path}`),
      ],
      // With no message argument, the message is standard input, unchanged.
      stdin: setup.prompt,
      ...(files.length > 0 ? { files } : {}),
      env: {
        // Read before OPENCODE_CONFIG_CONTENT, which adds no `mcp` of its own.
        ...(mcp ? { OPENCODE_CONFIG: `${setup.home}/${mcp.path}` } : {}),
        // Read after every configuration file, so it decides over what the sandbox may leave
        // in ~/.config/opencode.
        OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
        OPENCODE_DISABLE_PROJECT_CONFIG: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_SHARE: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_DISABLE_CLAUDE_CODE: '1',
        ...BUN_RESERVATIONS,
      },
    };
  },
  reader: () => new OpenCodeReader(),
};

class OpenCodeReader implements StreamReader {
  sessionId: string | undefined;
  summary: string | undefined;
  error: string | undefined;
  /** The text parts of the last step: the final answer is the last step's text. */
  #text: string[] = [];

  read(line: Record<string, unknown>): EngineEvent[] {
    this.sessionId = str(line.sessionID) ?? this.sessionId;
    const part = isRecord(line.part) ? line.part : {};
    switch (line.type) {
      case 'step_start':
        this.#text = [];
        return [];
      case 'text': {
        const text = str(part.text);
        if (text) {
          this.#text.push(text);
          this.summary = this.#text.join('\n');
        }
        return [];
      }
      case 'tool_use': {
        const state = isRecord(part.state) ? part.state : {};
        const id = str(part.callID) ?? str(part.id) ?? '';
        const name = str(part.tool) ?? 'tool';
        const failed = state.status === 'error';
        const output = failed ? (str(state.error) ?? 'failed') : (str(state.output) ?? '');
        return [
          { type: 'tool.call', id, name, summary: summarizeCall(name, state.input) },
          { type: 'tool.result', id, name, ok: !failed, summary: summarizeOutput(output) },
        ];
      }
      case 'error': {
        const error = isRecord(line.error) ? line.error : {};
        const data = isRecord(error.data) ? error.data : {};
        this.error = str(data.message) ?? str(error.name) ?? 'OpenCode reported an error';
        return [];
      }
      default:
        return [];
    }
  }
}
