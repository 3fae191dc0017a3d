// What every engine runner has in common: how it is invoked (its command line, environment and
// standard input, none of which holds a key; the files written for it are its MCP
// configuration, when the turn has MCP servers, and its images, when it has some) and how its machine-readable stream becomes
// Errand's events. One definition per engine (claude-code.ts,
// codex.ts, opencode.ts); run.ts runs a definition in the sandbox.
import type { AttachmentMediaType } from '../db/schema.ts';
import type { Emitted } from '../events/catalog.ts';
import { isRecord } from '../json.ts';
import { oneLine } from '../text.ts';
import type { InstallableEngine } from './catalog.ts';
import type { EngineMcpServer } from './mcp.ts';

/** What an engine is started with, every path as the sandbox sees it; HOME is the job's state. */
interface EngineSetup {
  /** The engine's executable. */
  bin: string;
  /** The job's checkout, where the engine works. */
  workspace: string;
  /** The model, as `provider:model` names it: the provider says which API the proxy speaks. */
  model: { provider: string; id: string };
  /** The model proxy's origin inside the sandbox (`http://127.0.0.1:<port>`), no path. */
  proxyOrigin: string;
  prompt: string;
  /** An ask or a plan turn: the engine is offered no tool that writes or runs commands. */
  readOnly?: boolean | undefined;
  /** The engine's session to continue, when the state directory still holds it. */
  resume: string | undefined;
  /** A short title for the session (engines that would ask the model for one). */
  title: string;
  /**
   * The JSON Schema the turn's final answer must satisfy (docs/structured-output.md), for an
   * engine that takes it natively (nativeOutput).
   */
  outputSchema?: Record<string, unknown> | undefined;
  /** The engine's HOME (the job's engine state), where its MCP configuration is written. */
  home: string;
  /** The turn's MCP servers (mcp.ts): none, unless the project or the job names some. */
  mcp: readonly EngineMcpServer[];
  /** The turn's images, in order (docs/images.md): none, unless the turn was given some. */
  images: readonly EngineImage[];
  /**
   * Whether the model takes images (docs/images.md), for an engine that must be told (OpenCode,
   * which otherwise replaces an image, the turn's or an earlier one's, by a note).
   */
  takesImages?: boolean | undefined;
}

/** An image given with the turn's prompt. */
export interface EngineImage {
  mediaType: AttachmentMediaType;
  data: Uint8Array;
}

/** Where an engine that reads its images from files finds them, in HOME. */
export const IMAGES_DIR = '.errand/images';

const EXTENSIONS: Readonly<Record<AttachmentMediaType, string>> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
};

/**
 * The turn's images as files in HOME (written by the service, never through a link, removed
 * after the run), named by their place and type: a CLI that attaches a file by its path reads
 * its type from the name.
 */
export function imageFiles(images: readonly EngineImage[]): EngineFile[] {
  return images.map((image, i) => ({
    path: `${IMAGES_DIR}/${i + 1}.${EXTENSIONS[image.mediaType]}`,
    content: image.data,
  }));
}

/** A file of the engine's configuration, written in its HOME for the turn and removed after. */
export interface EngineFile {
  /** Relative to HOME, e.g. `.codex/config.toml`. */
  path: string;
  content: string | Uint8Array;
}

/**
 * The engine's command line, environment and standard input. Its configuration is in the first
 * two (flags, variables), but for its MCP servers: their settings may hold secrets (a stdio
 * server's environment), which go in a file and never in an argument.
 */
interface EngineInvocation {
  argv: string[];
  env: Record<string, string>;
  /**
   * The prompt, byte for byte: the engine reads it from its standard input, where no CLI
   * rewords it (OpenCode quotes a message argument that has spaces and escapes its quotes).
   */
  stdin: string;
  /**
   * Files the engine's own shell writes in the sandbox's /tmp before it starts (path → text):
   * what a flag must name as a file, written where only the sandbox sees it.
   */
  sandboxFiles?: Readonly<Record<string, string>> | undefined;
  /** Files written in HOME before the run (never through a link) and removed after it. */
  files?: readonly EngineFile[];
}

/**
 * Errand's events for what the engine did, as Errand's own loop reports them. Its model steps
 * are not among them: the model proxy reads each call's usage from the vendor's answer.
 */
export type EngineEvent = Emitted<'tool.call'> | Emitted<'tool.result'>;

/** Reads one run's stream, line by line. */
export interface StreamReader {
  /** Errand's events for one parsed line of the stream. */
  read(line: Record<string, unknown>): EngineEvent[];
  /** The session or thread id, once the stream named it. */
  readonly sessionId: string | undefined;
  /** The engine's final message: the turn's summary. */
  readonly summary: string | undefined;
  /** The error the engine ended with, in its own words, if it reported one. */
  readonly error: string | undefined;
  /** The structured output the engine produced natively (Claude Code's), if it did. */
  readonly output?: { value: unknown } | undefined;
}

export interface EngineDefinition {
  name: InstallableEngine;
  /**
   * The sandbox's data bound (RLIMIT_DATA, which counts address space reserved, touched or not)
   * below which the engine cannot start: a project's lower `memoryMb` is raised to it.
   */
  minimumMemoryMb?: number;
  /**
   * Whether the engine itself is held to `schema` (docs/structured-output.md): its invocation
   * then carries it; else the prompt asks for the JSON and Errand checks the final message.
   */
  nativeOutput(schema: Record<string, unknown>): boolean;
  /**
   * Where, relative to HOME, its MCP configuration is written (EngineInvocation.files): removed
   * before every run too, so that a file a crashed run left behind is never read again.
   */
  mcpConfig: string;
  invocation(setup: EngineSetup): EngineInvocation;
  reader(): StreamReader;
}

/** What the engine runs with in place of a key: the proxy swaps it for the real one. */
export const PLACEHOLDER_KEY = 'errand-proxy';

export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * A tool call as one line: the tool and its main argument (a command, a path, a pattern), the
 * way Errand's own tools are summarised.
 */
export function summarizeCall(name: string, input: unknown): string {
  const args = isRecord(input) ? input : {};
  for (const key of ['command', 'cmd', 'file_path', 'filePath', 'path', 'pattern', 'url']) {
    const value = args[key];
    if (typeof value === 'string' && value !== '') return oneLine(`${name} ${value}`);
    if (Array.isArray(value) && value.every((v) => typeof v === 'string')) {
      return oneLine(`${name} ${value.join(' ')}`);
    }
  }
  return name;
}

/** A tool's output as an event summary: its size when it has several lines, else the line. */
export function summarizeOutput(output: string): string {
  const lines = output.trimEnd().split('\n');
  return lines.length > 1 ? `${lines.length} lines` : oneLine(output);
}
