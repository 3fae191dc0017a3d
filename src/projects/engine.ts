// The agent a project's turns run: Errand's own loop or one of the coding CLIs that
// `errand engine install` puts on the worker (src/engines/catalog.ts says which version and
// where). What a project may choose and which model providers each one can talk to are said
// here, below the engines, so that the project service can refuse a choice that cannot work.
import type { TurnMode } from '../db/schema.ts';
import type { ENGINE_NAMES } from '../records/project.ts';

/** An engine a project may choose (the list is the project record's, src/records/project.ts). */
export type EngineName = (typeof ENGINE_NAMES)[number];

/** An engine that is not Errand's own loop: a CLI installed from npm. */
export type InstallableEngine = Exclude<EngineName, 'errand'>;

/**
 * The model providers (the part of `provider:model` before the colon) each engine can talk to,
 * through Errand's model proxy: Claude Code speaks Anthropic's Messages API only, Codex
 * OpenAI's Responses API only, OpenCode either, or a chat-completions endpoint. Errand's own
 * loop takes every provider of the model registry.
 */
const ENGINE_PROVIDERS: Readonly<Record<InstallableEngine, readonly string[]>> = {
  'claude-code': ['anthropic'],
  codex: ['openai'],
  opencode: ['anthropic', 'openai', 'openai-compatible'],
};

/**
 * Why `engine` cannot run `model` (a `provider:model` id; `whose` says where it comes from,
 * e.g. " (the server's default)"), or undefined when it can.
 */
export function engineModelRefusal(
  engine: EngineName,
  model: string,
  whose = '',
): string | undefined {
  if (engine === 'errand') return undefined;
  const provider = model.slice(0, Math.max(0, model.indexOf(':')));
  const allowed = ENGINE_PROVIDERS[engine];
  if (allowed.includes(provider)) return undefined;
  return `engine ${engine} cannot run model '${model}'${whose}: it talks to ${allowed.map((p) => `${p}:`).join(', ')} models only`;
}

/**
 * Why `engine` cannot run a turn in `mode` (docs/modes.md), or undefined when it can. Codex
 * reads and edits through shell commands, and its own sandbox, which alone could make them
 * read-only, is off inside Errand's: it cannot be held to an ask or a plan turn.
 */
export function engineModeRefusal(engine: EngineName, mode: TurnMode): string | undefined {
  if (mode === 'code' || engine !== 'codex') return undefined;
  return `mode "${mode}" is not available with the codex engine: Codex cannot be held read-only in Errand's sandbox`;
}

/** What projects ask of the engines' installs, which live above them (src/engines/catalog.ts). */
export interface EngineInstalls {
  /** Whether the engine's pinned version is installed on this machine. */
  installed(name: InstallableEngine): Promise<boolean>;
}
