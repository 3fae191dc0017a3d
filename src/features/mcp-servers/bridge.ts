// The MCP bridge of an engine's turn: how an engine in the sandbox reaches a remote MCP server
// without its URL's headers (tokens) ever entering the sandbox. An MCP server of the service's
// (Streamable HTTP, answering plain JSON) on a Unix socket in a directory only this user may
// enter, forwarded into the sandbox on a loopback port as the model proxy is; at
// `/mcp/<name>` it answers `initialize`, `ping`, `tools/list` (the remote's tools) and
// `tools/call` (forwarded to the remote by the service's own connection, which holds the
// headers), and refuses everything else. Nothing from the sandbox is trusted: bodies are
// bounded, each message checked before it is read, one message per request (no batches).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  McpError,
  SUPPORTED_PROTOCOL_VERSIONS,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { errorMessage } from '../../errors.ts';
import { isRecord } from '../../json.ts';
import { listenPrivately, type PrivateSocket } from '../../sandbox/private-socket.ts';
import { oneLine } from '../../text.ts';
import { errandVersion } from '../../version.ts';

/** The most bytes of one request from the sandbox: a tool call's arguments, not a file. */
const MAX_REQUEST_BYTES = 1024 * 1024;

/** The most tools of one server offered (pages of `tools/list` read until then). */
const MAX_TOOLS = 512;

/** How long a tool call may take at the remote server. */
const CALL_TIMEOUT_MS = 120_000;

export interface McpBridgeOptions {
  /** The remote servers by name, each connected by the service (remote.ts). */
  servers: ReadonlyMap<string, Client>;
  /** An ask or a plan turn: only the tools whose annotations say `readOnlyHint` are offered. */
  readOnly: boolean;
  /** Where the socket's private directory is made (default: the system's temporary directory). */
  parentDir?: string;
}

/** The socket to forward into the sandbox (SandboxRun.mcpBridge), and how to stop answering. */
export type McpBridge = PrivateSocket;

type JsonRpcId = string | number;

/** A JSON-RPC error for the client, in the protocol's own codes. */
class RpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

export async function startMcpBridge(options: McpBridgeOptions): Promise<McpBridge> {
  const tools = new ToolLists(options);
  const server = createServer((req, res) => {
    answer(req, res, options.servers, tools).catch(() => {
      // The client went away, or its answer could not be written: nothing more to tell it.
      res.destroy();
    });
  });
  server.headersTimeout = 30_000;
  // A tool call's own timeout bounds the wait; the turn's time limit bounds the rest.
  server.requestTimeout = CALL_TIMEOUT_MS + 30_000;
  return listenPrivately(server, {
    prefix: 'errand-mcp-',
    name: 'mcp.sock',
    parentDir: options.parentDir,
  });
}

/** Each server's tools, read once a turn (every page, MAX_TOOLS at most), as offered. */
class ToolLists {
  readonly #options: McpBridgeOptions;
  readonly #lists = new Map<string, Promise<Tool[]>>();

  constructor(options: McpBridgeOptions) {
    this.#options = options;
  }

  of(name: string, client: Client): Promise<Tool[]> {
    let list = this.#lists.get(name);
    if (!list) {
      list = this.#read(client);
      // A failed read is tried again on the next request.
      list.catch(() => this.#lists.delete(name));
      this.#lists.set(name, list);
    }
    return list;
  }

  async #read(client: Client): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined && tools.length < MAX_TOOLS);
    const offered = this.#options.readOnly
      ? tools.filter((tool) => tool.annotations?.readOnlyHint === true)
      : tools;
    return offered.slice(0, MAX_TOOLS);
  }
}

async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  servers: ReadonlyMap<string, Client>,
  tools: ToolLists,
): Promise<void> {
  const path = (req.url ?? '').split('?')[0] ?? '';
  const match = /^\/mcp\/([^/]+)$/.exec(path);
  const name = match ? safeDecode(match[1] ?? '') : undefined;
  const client = name === undefined ? undefined : servers.get(name);
  if (name === undefined || client === undefined) {
    req.resume();
    return send(res, 404, { error: 'no such MCP server' });
  }
  if (req.method !== 'POST') {
    // No stream of server messages (GET) and no session to end (DELETE): Streamable HTTP lets a
    // server answer 405 to both.
    req.resume();
    return send(res, 405, { error: 'only POST is answered' }, { allow: 'POST' });
  }
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) {
    req.resume();
    return send(res, 415, { error: 'the body must be application/json' });
  }
  const body = await readBounded(req);
  if (body === undefined) {
    return send(res, 413, { error: `the body is larger than ${MAX_REQUEST_BYTES} bytes` });
  }
  let message: unknown;
  try {
    message = JSON.parse(body.toString('utf8'));
  } catch {
    return send(res, 400, rpcError(null, ErrorCode.ParseError, 'the body is not JSON'));
  }
  if (!isRecord(message) || message.jsonrpc !== '2.0' || typeof message.method !== 'string') {
    return send(
      res,
      400,
      rpcError(null, ErrorCode.InvalidRequest, 'one JSON-RPC 2.0 request or notification'),
    );
  }
  // A notification (initialized, cancelled): accepted, nothing to answer.
  if (!('id' in message)) return send(res, 202, undefined);
  const id = message.id;
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)))) {
    return send(
      res,
      400,
      rpcError(null, ErrorCode.InvalidRequest, 'the id must be a string or a number'),
    );
  }
  const params = message.params === undefined ? {} : message.params;
  if (!isRecord(params)) {
    return send(res, 200, rpcError(id, ErrorCode.InvalidParams, 'params must be an object'));
  }
  try {
    const result = await handle(message.method, params, name, client, tools);
    return send(res, 200, { jsonrpc: '2.0', id, result });
  } catch (err) {
    if (err instanceof RpcError) return send(res, 200, rpcError(id, err.code, err.message));
    if (err instanceof McpError)
      return send(res, 200, rpcError(id, err.code, oneLine(err.message, 500)));
    return send(
      res,
      200,
      rpcError(
        id,
        ErrorCode.InternalError,
        `server "${name}" failed: ${oneLine(errorMessage(err), 500)}`,
      ),
    );
  }
}

async function handle(
  method: string,
  params: Record<string, unknown>,
  name: string,
  client: Client,
  tools: ToolLists,
): Promise<unknown> {
  switch (method) {
    case 'initialize': {
      const asked = params.protocolVersion;
      const version =
        typeof asked === 'string' && SUPPORTED_PROTOCOL_VERSIONS.includes(asked)
          ? asked
          : LATEST_PROTOCOL_VERSION;
      return {
        protocolVersion: version,
        capabilities: { tools: {} },
        serverInfo: { name: `errand-bridge/${name}`, version: errandVersion() },
      };
    }
    case 'ping':
      return {};
    case 'tools/list':
      return { tools: await tools.of(name, client) };
    case 'tools/call': {
      const tool = params.name;
      const args = params.arguments ?? {};
      if (typeof tool !== 'string' || !isRecord(args)) {
        throw new RpcError(
          ErrorCode.InvalidParams,
          'a tool call needs a name and an object of arguments',
        );
      }
      // Only a tool offered is called: in a read-only turn, one marked readOnlyHint.
      if (!(await tools.of(name, client)).some((t) => t.name === tool)) {
        throw new RpcError(
          ErrorCode.InvalidParams,
          `server "${name}" offers no tool "${oneLine(tool, 64)}"`,
        );
      }
      return client.callTool({ name: tool, arguments: args }, undefined, {
        timeout: CALL_TIMEOUT_MS,
      });
    }
    default:
      throw new RpcError(
        ErrorCode.MethodNotFound,
        `the bridge does not answer ${oneLine(method, 64)}`,
      );
  }
}

function rpcError(id: JsonRpcId | null, code: number, message: string) {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

function safeDecode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/** The request's body, or undefined once it passes MAX_REQUEST_BYTES (the rest is not read). */
async function readBounded(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req) {
    const bytes = chunk as Buffer;
    length += bytes.length;
    if (length > MAX_REQUEST_BYTES) {
      req.destroy();
      return undefined;
    }
    chunks.push(bytes);
  }
  return Buffer.concat(chunks);
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (body === undefined) {
    res.writeHead(status, headers).end();
    return;
  }
  const text = JSON.stringify(body);
  res
    .writeHead(status, {
      ...headers,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(text)),
    })
    .end(text);
}
