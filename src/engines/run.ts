// Runs one turn of a coding CLI in the sandbox: a directory of the job's engine state as its
// HOME (so a follow-up resumes its session), its install directory read-only, and Errand's
// model proxy, which holds the key, as its only way out. Its JSON stream becomes the turn's
// events as it arrives. The proxy admits each model call while the turn's limit
// (ERRAND_MAX_STEPS) and the budgets leave room, and reads its usage from the vendor's answer
// (a step); a limit reached stops the engine.
import { lstat, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelSettings } from '../config.ts';
import { ExternalError } from '../errors.ts';
import type { Emit, EventData, ProgressType } from '../events/catalog.ts';
import { outputNote } from '../jobs/output-schema.ts';
import type { EarlierTurn } from '../jobs/runner.ts';
import { TurnFailedError } from '../jobs/runner.ts';
import type { TokenUsage, Usage } from '../jobs/usage.ts';
import { isRecord } from '../json.ts';
import type { SandboxLimits } from '../projects/limits.ts';
import type { CommandsNetwork } from '../projects/network.ts';
import { SANDBOX_HOME } from '../sandbox/args.ts';
import { ENDPOINTS, type ProxyEndpoint, startModelProxy } from '../sandbox/model-proxy.ts';
import {
  makeDirectory,
  readRegularFile,
  replaceFile,
  UnsafeFileError,
} from '../sandbox/safe-files.ts';
import { runNetwork, runSandboxed } from '../sandbox/sandbox.ts';
import type { SandboxResult } from '../sandbox/types.ts';
import { oneLine } from '../text.ts';
import type { InstallableEngine, InstalledEngine } from './catalog.ts';
import { claudeCode } from './claude-code.ts';
import { codex } from './codex.ts';
import {
  type EngineDefinition,
  type EngineFile,
  type EngineImage,
  IMAGES_DIR,
  type StreamReader,
} from './engine.ts';
import { type EngineMcp, engineServers } from './mcp.ts';
import { type TurnBudget, TurnMeter } from './meter.ts';
import { opencode } from './opencode.ts';

const DEFINITIONS: Readonly<Record<InstallableEngine, EngineDefinition>> = {
  'claude-code': claudeCode,
  codex,
  opencode,
};

/** Where the proxy's forwarder listens inside the sandbox (its own network namespace). */
const PROXY_PORT = 8787;
/** Where the MCP bridge's forwarder listens inside the sandbox, when the turn has remote servers. */
const MCP_BRIDGE_PORT = 8788;
/**
 * In the job's engine state: the engine's HOME, the one part the sandbox sees (writable), and
 * beside it Errand's record of which engine's session a follow-up resumes, out of its reach.
 */
const HOME_DIR = 'home';
const SESSION_FILE = 'session.json';
/** A session record is an engine's name and a session id: far less than this. */
const SESSION_MAX_BYTES = 4096;

/** Each provider's API as the proxy forwards it: its endpoints and how the key is sent. */
const PROVIDER_APIS: Readonly<
  Record<
    string,
    {
      settings: keyof ModelSettings;
      endpoints: readonly ProxyEndpoint[];
      header: (key: string) => Record<string, string>;
    }
  >
> = {
  anthropic: {
    settings: 'anthropic',
    endpoints: ENDPOINTS.anthropic,
    header: (key) => ({ 'x-api-key': key }),
  },
  openai: {
    settings: 'openai',
    endpoints: ENDPOINTS.openai,
    header: (key) => ({ authorization: `Bearer ${key}` }),
  },
  'openai-compatible': {
    settings: 'openaiCompatible',
    endpoints: ENDPOINTS.chat,
    header: (key): Record<string, string> => (key ? { authorization: `Bearer ${key}` } : {}),
  },
};

const DEFAULT_BASE_URLS: Readonly<Record<string, string>> = {
  anthropic: 'https://api.anthropic.com/v1',
  openai: 'https://api.openai.com/v1',
};

export interface EngineTurnInput {
  engine: InstalledEngine;
  /** The job's checkout. */
  checkout: string;
  /**
   * The job's engine state, kept across the job's turns and never mounted into the sandbox:
   * the engine's HOME is a directory in it.
   */
  stateDir: string;
  /** `provider:model`. */
  model: string;
  /** The server's model settings: the proxy's upstream and key. */
  models: ModelSettings;
  prompt: string;
  /** The user's own prompt, for the session's title; else the prompt. */
  title?: string | undefined;
  /**
   * An ask or a plan turn (docs/modes.md): the engine gets its own read-only settings. Codex,
   * which has none that hold in Errand's sandbox, is refused such a turn before it starts.
   */
  readOnly?: boolean | undefined;
  /** The job's earlier turns: the context of a turn that cannot resume the engine's session. */
  earlier: readonly EarlierTurn[];
  /** The project's sandbox limits; the wall time is the turn's. */
  limits: SandboxLimits;
  signal: AbortSignal;
  emit: Emit;
  /** Tokens with their cost on the job's model (the model registry's prices). */
  priced: (tokens: TokenUsage) => Usage;
  /** The job's budget and what its earlier turns spent; undefined without one. */
  budget: TurnBudget | undefined;
  /** The project's monthly budget and what it spent this month; undefined without one. */
  monthBudget: TurnBudget | undefined;
  /** The model calls the turn may make (ERRAND_MAX_STEPS), counted by the model proxy. */
  maxSteps: number;
  /** The project's secrets for the engine's process, which its shell inherits. */
  secretEnv: Readonly<Record<string, string>>;
  /** Removes secret values from a text: every request the engine sends the model, at the proxy. */
  scrub: (text: string) => string;
  /**
   * What the sandbox may reach besides the model proxy (default: nothing): with an allowlist,
   * the engine and every command it runs reach those hosts through the egress proxy.
   */
  network?: CommandsNetwork | undefined;
  /**
   * The JSON Schema the final answer must satisfy (docs/structured-output.md): given to an
   * engine that takes it, else asked for in the prompt.
   */
  outputSchema?: Record<string, unknown> | undefined;
  /** The turn's MCP servers, opened (features/mcp-servers): written into the engine's configuration. */
  mcp?: EngineMcp | undefined;
  /** The turn's images (docs/images.md), given with the prompt the way the engine takes them. */
  images?: readonly EngineImage[] | undefined;
  /** Whether the job's model takes images (the model registry's rule): for an engine that asks. */
  takesImages?: boolean | undefined;
}

export interface EngineTurnResult {
  summary: string;
  usage: TokenUsage;
  /** The value the engine produced natively against the output schema (Claude Code's). */
  output?: { value: unknown } | undefined;
}

export async function runEngineTurn(input: EngineTurnInput): Promise<EngineTurnResult> {
  const { engine, signal } = input;
  const definition = DEFINITIONS[engine.name];
  const colon = input.model.indexOf(':');
  const provider = input.model.slice(0, colon);
  const modelId = input.model.slice(colon + 1);
  const api = PROVIDER_APIS[provider];
  if (!api) throw new TurnFailedError(`engine ${engine.name} cannot run model '${input.model}'`);
  const { home, resume, invocation } = await prepare(input, definition, { provider, id: modelId });

  // The turn's limits stop the engine: its own controller, so that they can be told apart from
  // the caller's cancel.
  const stop = new AbortController();
  const events = new OrderedEvents(input.emit, stop);
  const meter = new TurnMeter({
    maxSteps: input.maxSteps,
    job: input.budget,
    month: input.monthBudget,
    priced: input.priced,
    onStep: (step) => events.deliver('model.step', { ...step }),
    onStop: () => stop.abort(),
  });
  const proxy = await startModelProxy({
    upstream: upstreamOf(provider, input.models, api.settings),
    headers: api.header(keyOf(input.models, api.settings)),
    endpoints: api.endpoints,
    model: modelId,
    admit: (call) => meter.admit(call),
    observe: (answer) => meter.observe(answer),
    scrub: input.scrub,
  });
  await input.emit('engine.started', {
    engine: engine.name,
    version: engine.version,
    model: input.model,
    ...(resume ? { resumed: resume } : {}),
  });

  const reader = definition.reader();
  // Refusals go in order with the engine's own events.
  const egress = runNetwork(
    input.network?.mode ?? 'none',
    input.network?.allow ?? [],
    async (type, data) => events.deliver(type, data),
  );
  const files = invocation.files ?? [];
  const bridge = input.mcp?.bridgeSocket;
  let result: SandboxResult;
  try {
    // A configuration a crashed run left is not read: only this turn's servers are there; nor
    // are its images.
    await removeEngineFiles(home, [definition.mcpConfig, IMAGES_DIR]);
    await writeEngineFiles(home, files);
    result = await runSandboxed({
      checkout: input.checkout,
      cwd: input.checkout,
      command: withFiles(invocation.sandboxFiles, shellCommand(invocation.argv)),
      limits: {
        ...input.limits,
        memoryMb: Math.max(input.limits.memoryMb, definition.minimumMemoryMb ?? 0),
      },
      network: egress.network,
      signal: AbortSignal.any([signal, stop.signal]),
      env: invocation.env,
      stdin: invocation.stdin,
      secretEnv: input.secretEnv,
      readOnlyBinds: [engine.dir],
      home,
      modelProxy: { socketPath: proxy.socketPath, port: PROXY_PORT },
      ...(bridge ? { mcpBridge: { socketPath: bridge, port: MCP_BRIDGE_PORT } } : {}),
      onStdoutLine: (text) => readLine(reader, text, events),
    });
  } finally {
    await proxy.close();
    // Its MCP configuration may hold secrets, and its images are a turn's: neither is left in
    // the state between turns.
    await removeEngineFiles(home, [...files.map((f) => f.path), IMAGES_DIR]);
  }
  await egress.settled();
  await events.drained();
  if (reader.sessionId) await writeSession(input.stateDir, engine.name, reader.sessionId);
  signal.throwIfAborted();
  events.throwIfFailed();
  return outcome(engine.name, input.limits, result, reader, meter);
}

/**
 * The job's engine state made ready (its HOME a directory of its own) and the engine's command:
 * resuming the session the state holds, or else told of the job's earlier turns.
 */
async function prepare(
  input: EngineTurnInput,
  definition: EngineDefinition,
  model: { provider: string; id: string },
) {
  await mkdir(input.stateDir, { recursive: true, mode: 0o700 });
  const home = join(input.stateDir, HOME_DIR);
  // Where a state directory of the old layout (all of it the engine's HOME) has something else
  // in its place, that goes: what the sandbox sees must be a directory of its own.
  await makeDirectory(home);
  const previous = await readSession(input.stateDir, input.engine.name);
  const resume = previous?.session;
  const schema = input.outputSchema;
  // An engine that is not held to the schema itself is asked for the JSON in its prompt.
  const native = schema !== undefined && definition.nativeOutput(schema);
  const asked = schema && !native ? `${input.prompt}\n\n${outputNote(schema)}` : input.prompt;
  const prompt = resume ? asked : withHistory(asked, input.earlier);
  const invocation = definition.invocation({
    bin: input.engine.bin,
    workspace: input.checkout,
    model,
    proxyOrigin: `http://127.0.0.1:${PROXY_PORT}`,
    prompt,
    readOnly: input.readOnly === true,
    resume,
    title: oneLine(input.title ?? input.prompt, 60),
    ...(native ? { outputSchema: schema } : {}),
    home: SANDBOX_HOME,
    mcp: engineServers(input.mcp, `http://127.0.0.1:${MCP_BRIDGE_PORT}`),
    images: input.images ?? [],
    takesImages: input.takesImages === true,
  });
  return { home, resume, invocation };
}

/**
 * The engine's configuration files written in its HOME, which an earlier run of the sandbox may
 * have filled with links: each directory on the way is made a real one (whatever was there
 * removed, never followed), and each file replaced, never written through.
 */
async function writeEngineFiles(home: string, files: readonly EngineFile[]): Promise<void> {
  for (const file of files) {
    let dir = home;
    for (const part of file.path.split('/').slice(0, -1)) {
      dir = join(dir, part);
      await makeDirectory(dir);
    }
    await replaceFile(join(home, file.path), file.content);
  }
}

/**
 * Configuration files removed while no sandbox runs (before the engine starts, once it has
 * ended). A directory on the way that a run replaced (by a link, say) is not entered: nothing
 * is removed through it.
 */
async function removeEngineFiles(home: string, paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    let dir = home;
    let real = true;
    for (const part of path.split('/').slice(0, -1)) {
      dir = join(dir, part);
      const info = await lstat(dir).catch(() => undefined);
      if (!info?.isDirectory() || info.isSymbolicLink()) {
        real = false;
        break;
      }
    }
    if (real) await rm(join(home, path), { force: true, recursive: true });
  }
}

/** The turn's events, emitted in arrival order; a failed emit stops the engine and fails the turn. */
class OrderedEvents {
  readonly #emit: EngineTurnInput['emit'];
  readonly #stop: AbortController;
  #chain: Promise<void> = Promise.resolve();
  #sinkError: { error: unknown } | undefined;

  constructor(emit: EngineTurnInput['emit'], stop: AbortController) {
    this.#emit = emit;
    this.#stop = stop;
  }

  deliver<T extends ProgressType>(type: T, data: EventData<T>): void {
    this.#chain = this.#chain
      .then(() => this.#emit(type, data))
      .catch((error: unknown) => {
        this.#sinkError ??= { error };
        this.#stop.abort();
      });
  }

  /** Once every event delivered so far has been emitted (or failed). */
  async drained(): Promise<void> {
    await this.#chain;
  }

  throwIfFailed(): void {
    if (this.#sinkError) throw this.#sinkError.error;
  }
}

/** One line of the engine's stdout: its events, if it is a line of the engine's JSON stream. */
function readLine(reader: StreamReader, text: string, events: OrderedEvents): void {
  let line: unknown;
  try {
    line = JSON.parse(text);
  } catch {
    // Engines print the odd line of plain text (warnings) on stdout too.
    return;
  }
  if (!isRecord(line)) return;
  for (const { type, ...data } of reader.read(line)) events.deliver(type, data);
}

/** The turn's summary and usage, or why it failed: a limit reached, or the engine's error. */
function outcome(
  name: InstallableEngine,
  limits: SandboxLimits,
  result: SandboxResult,
  reader: StreamReader,
  meter: TurnMeter,
): EngineTurnResult {
  if (meter.stopped) throw new TurnFailedError(`${meter.stopped}; ${name} was stopped`);
  if (result.timedOut) {
    throw new TurnFailedError(
      `the turn ran out of its ${limits.timeoutSeconds} s time budget; raise ERRAND_TURN_TIMEOUT_SECONDS or split the task; ${name} was stopped`,
    );
  }
  if (result.diskExceeded) {
    throw new TurnFailedError(
      `${name} wrote more than the checkout's limit of ${result.diskExceeded.limitMb} MB; it was stopped`,
    );
  }
  if (result.memoryExceeded) {
    throw new TurnFailedError(
      `${name} ran out of its ${result.memoryExceeded.limitMb} MB of memory (the project's commandMemoryMb); it was stopped`,
    );
  }
  if (result.exitCode !== 0 || reader.error !== undefined || reader.summary === undefined) {
    const why =
      reader.error ??
      (lastLines(result.stderr ?? '') ||
        `it exited with ${result.exitCode ?? result.signal} without a final message`);
    // A refused key or an unknown model will not change on a retry; anything else may.
    const final = /\b(401|403|404|authentication|unauthorized|permission|not found)\b/i.test(why);
    const message = `${name} failed: ${oneLine(why, 500)}`;
    if (final) throw new TurnFailedError(message);
    throw new ExternalError('model', message, { transient: true });
  }
  return {
    summary: reader.summary.trim(),
    usage: meter.usage,
    ...(reader.output ? { output: reader.output } : {}),
  };
}

/**
 * The session id a follow-up resumes, if the job's engine state holds one of this engine's. The
 * record is out of the sandbox's reach; anything else in its place (a link, a FIFO, a second
 * name or a directory left by a sandbox when the whole state directory was its HOME) is not
 * read but removed (never followed), and the engine starts afresh.
 */
async function readSession(
  stateDir: string,
  engine: InstallableEngine,
): Promise<{ session: string } | undefined> {
  const path = join(stateDir, SESSION_FILE);
  let bytes: Buffer | undefined;
  try {
    bytes = await readRegularFile(path, { maxBytes: SESSION_MAX_BYTES });
  } catch (err) {
    if (!(err instanceof UnsafeFileError)) throw err;
    await rm(path, { recursive: true, force: true });
    return undefined;
  }
  if (bytes === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    // Unreadable: started afresh, and rewritten after the run.
    return undefined;
  }
  return isRecord(value) && value.engine === engine && typeof value.session === 'string'
    ? { session: value.session }
    : undefined;
}

async function writeSession(stateDir: string, engine: InstallableEngine, session: string) {
  await replaceFile(join(stateDir, SESSION_FILE), `${JSON.stringify({ engine, session })}\n`);
}

/**
 * The prompt of a turn that starts a new session while the job has earlier turns (the state
 * is on another worker, or was deleted with the clone): what was asked and done before.
 */
function withHistory(prompt: string, earlier: readonly EarlierTurn[]): string {
  if (earlier.length === 0) return prompt;
  const turns = earlier.map(
    (t) =>
      `## Turn ${t.seq}\n\nRequest:\n${t.prompt.trim()}\n\nWhat was done:\n${t.summary?.trim() || '(no summary)'}`,
  );
  return [
    'This continues earlier work on this branch of the repository: its changes are already committed. The earlier requests and what was done:',
    ...turns,
    '## Now',
    prompt,
  ].join('\n\n');
}

/** The upstream the proxy forwards to: the provider's base URL without its `/v1`. */
function upstreamOf(
  provider: string,
  models: ModelSettings,
  settings: keyof ModelSettings,
): string {
  const entry = models[settings];
  const configured = isRecord(entry) && typeof entry.baseURL === 'string' ? entry.baseURL : '';
  const base = (configured.trim() || DEFAULT_BASE_URLS[provider] || '').replace(/\/+$/, '');
  if (!base.endsWith('/v1')) {
    throw new TurnFailedError(
      `engines need the ${provider} base URL to end in /v1 (it is ${base || 'not set'})`,
    );
  }
  return base.slice(0, -'/v1'.length);
}

function keyOf(models: ModelSettings, settings: keyof ModelSettings): string {
  const entry = models[settings];
  return isRecord(entry) && typeof entry.apiKey === 'string' ? entry.apiKey : '';
}

/**
 * The command with the files it needs written first by its own shell, in the sandbox (umask
 * 077: for the engine alone), then the engine exec'd in its place.
 */
function withFiles(files: Readonly<Record<string, string>> | undefined, command: string): string {
  const entries = Object.entries(files ?? {});
  if (entries.length === 0) return command;
  const writes = entries.map(
    ([path, text]) => `printf '%s' ${shellCommand([text])} > ${shellCommand([path])}`,
  );
  return ['umask 077', ...writes, `exec ${command}`].join(' && ');
}

/** argv as one `sh -c` line: every word single-quoted. */
function shellCommand(argv: readonly string[]): string {
  return argv.map((word) => `'${word.replaceAll("'", "'\\''")}'`).join(' ');
}

/** The end of an engine's stderr, without its terminal colours. */
function lastLines(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: escape sequences are what is removed
  const plain = text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
  return plain.trim().split('\n').slice(-5).join(' ').trim();
}
