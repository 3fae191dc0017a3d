// The MCP SDK's Transport over a socket the sandbox's relay connected to: newline-delimited
// JSON-RPC, as the stdio transport speaks it. Every byte comes from the sandbox: a line longer
// than the bound ends the connection, and a line that is not a JSON-RPC message is an error the
// client is told of, never a crash.
import type { Socket } from 'node:net';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';

/** The longest message a server may send (a line of JSON). */
const DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024;

export class SocketTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #socket: Socket;
  readonly #maxLineBytes: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;

  constructor(socket: Socket, maxLineBytes = DEFAULT_MAX_LINE_BYTES) {
    this.#socket = socket;
    this.#maxLineBytes = maxLineBytes;
  }

  async start(): Promise<void> {
    this.#socket.on('data', (chunk: Buffer) => this.#read(chunk));
    this.#socket.on('error', (err) => this.onerror?.(err));
    this.#socket.on('close', () => this.onclose?.());
  }

  #read(chunk: Buffer): void {
    let rest = chunk;
    for (let end = rest.indexOf(0x0a); end !== -1; end = rest.indexOf(0x0a)) {
      const line = Buffer.concat([...this.#pending, rest.subarray(0, end)]);
      this.#pending = [];
      this.#pendingBytes = 0;
      rest = rest.subarray(end + 1);
      if (line.length > this.#maxLineBytes) {
        this.#tooLong();
        return;
      }
      this.#message(line.toString('utf8'));
    }
    this.#pending.push(rest);
    this.#pendingBytes += rest.length;
    if (this.#pendingBytes > this.#maxLineBytes) this.#tooLong();
  }

  #message(line: string): void {
    if (line.trim() === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.onerror?.(new Error('the server wrote a line that is not JSON on its stdout'));
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(parsed);
    if (!message.success) {
      this.onerror?.(new Error('the server wrote a line that is not a JSON-RPC message'));
      return;
    }
    this.onmessage?.(message.data);
  }

  #tooLong(): void {
    this.#pending = [];
    this.#pendingBytes = 0;
    this.onerror?.(new Error(`the server wrote a message longer than ${this.#maxLineBytes} bytes`));
    this.#socket.destroy();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#socket.destroyed) throw new Error('the server is gone');
    await new Promise<void>((resolve, reject) =>
      this.#socket.write(`${JSON.stringify(message)}\n`, (err) => (err ? reject(err) : resolve())),
    );
  }

  async close(): Promise<void> {
    this.#socket.destroy();
  }
}
