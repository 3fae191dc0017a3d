// Codex (`codex exec --json`, `codex exec resume <thread>` for a follow-up): its own sandbox
// off (`danger-full-access`: Errand's sandbox replaces it) and approvals never asked, the OpenAI
// Responses API reached through Errand's model proxy as a provider of its configuration, whose
// key variable holds only a placeholder. Its home (configuration, sessions) is the job's state.
import { isRecord } from '../client/records.ts';
import { oneLine } from '../text.ts';
import {
  type EngineDefinition,
  type EngineEvent,
  PLACEHOLDER_KEY,
  type StreamReader,
  str,
  summarizeOutput,
} from './engine.ts';

const KEY_VARIABLE = 'OPENAI_API_KEY';

/** A TOML basic string: JSON's escapes are TOML's for the characters a URL or id may hold. */
function tomlString(value: string): string {
  return JSON.stringify(value);
}

export const codex: EngineDefinition = {
  name: 'codex',
  invocation(setup) {
    const config = [
      '# Written by Errand for each turn; it holds no key (the model proxy adds it).',
      `model = ${tomlString(setup.model.id)}`,
      'model_provider = "errand"',
      'approval_policy = "never"',
      'sandbox_mode = "danger-full-access"',
      '',
      '[model_providers.errand]',
      'name = "Errand model proxy"',
      `base_url = ${tomlString(`${setup.proxyOrigin}/v1`)}`,
      `env_key = ${tomlString(KEY_VARIABLE)}`,
      'wire_api = "responses"',
      // Errand retries a failed turn itself.
      'request_max_retries = 0',
      'stream_max_retries = 0',
      '',
      // Nothing but the model is reachable from the sandbox. Codex sends usage analytics to
      // ab.chatgpt.com and retries them for about 5 s before it exits, and syncs its curated
      // plugins from GitHub (git ls-remote) at start.
      '[analytics]',
      'enabled = false',
      '',
      '[features]',
      'plugins = false',
      '',
    ].join('\n');
    return {
      argv: [
        setup.bin,
        'exec',
        ...(setup.resume ? ['resume'] : []),
        '--json',
        '--skip-git-repo-check',
        '--strict-config',
        '--',
        ...(setup.resume ? [setup.resume] : []),
        setup.prompt,
      ],
      env: { [KEY_VARIABLE]: PLACEHOLDER_KEY },
      files: [{ path: '.codex/config.toml', content: config }],
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
