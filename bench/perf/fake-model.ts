// A fake OpenAI-compatible model on loopback for the turn-overhead row: it answers at once, first
// with one write_file tool call, then (once the conversation holds the tool's result) with the
// final text. It times every request from its arrival to the end of its answer, so the bench can
// subtract the model's share from a job's duration.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const FAKE_MODEL_ID = 'perf-model';

export interface FakeModel {
  /** Base URL for ERRAND_OPENAI_COMPATIBLE_BASE_URL (ends in /v1). */
  baseUrl: string;
  /** Requests answered so far and their summed duration (arrival → end of answer), in ms. */
  totals(): { requests: number; ms: number };
  /** Problems seen (a request the fake cannot answer); the bench fails on any. */
  problems: string[];
  close(): Promise<void>;
}

interface ChatMessage {
  role?: unknown;
}

function isChatBody(v: unknown): v is { model?: unknown; stream?: unknown; messages: unknown[] } {
  return (
    typeof v === 'object' && v !== null && Array.isArray((v as { messages?: unknown }).messages)
  );
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

let callCounter = 0;

/** The streamed answer: a write_file call on the first step, the summary after the tool ran. */
function answerChunks(model: string, afterTool: boolean): string[] {
  const base = {
    id: 'chatcmpl-perf',
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model,
  };
  const data = (payload: Record<string, unknown>) =>
    `data: ${JSON.stringify({ ...base, ...payload })}\n\n`;
  const chunks = [data({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] })];
  let finish: string;
  if (afterTool) {
    const text = 'Add a benchmark file\n\nWrote one file for the benchmark.';
    chunks.push(data({ choices: [{ index: 0, delta: { content: text }, finish_reason: null }] }));
    finish = 'stop';
  } else {
    callCounter += 1;
    const args = JSON.stringify({
      path: `perf/file-${Date.now()}-${callCounter}.txt`,
      content: `benchmark file ${callCounter}\n`,
    });
    chunks.push(
      data({
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                {
                  index: 0,
                  id: `call_${callCounter}`,
                  type: 'function',
                  function: { name: 'write_file', arguments: args },
                },
              ],
            },
            finish_reason: null,
          },
        ],
      }),
    );
    finish = 'tool_calls';
  }
  chunks.push(data({ choices: [{ index: 0, delta: {}, finish_reason: finish }] }));
  chunks.push(
    data({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }),
  );
  chunks.push('data: [DONE]\n\n');
  return chunks;
}

export async function startFakeModel(): Promise<FakeModel> {
  let requests = 0;
  let ms = 0;
  const problems: string[] = [];

  const handle = async (req: IncomingMessage, res: ServerResponse, arrived: number) => {
    const raw = await readBody(req);
    if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/chat/completions') {
      problems.push(`unexpected request ${req.method} ${req.url}`);
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    const body: unknown = JSON.parse(raw);
    if (!isChatBody(body) || body.stream !== true || body.model !== FAKE_MODEL_ID) {
      problems.push(`unexpected chat request: ${raw.slice(0, 300)}`);
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"bad request"}');
      return;
    }
    const afterTool = body.messages.some((m) => (m as ChatMessage).role === 'tool');
    res.on('finish', () => {
      requests += 1;
      ms += performance.now() - arrived;
    });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.end(answerChunks(FAKE_MODEL_ID, afterTool).join(''));
  };

  const server = createServer((req, res) => {
    const arrived = performance.now();
    handle(req, res, arrived).catch((err: unknown) => {
      problems.push(`fake model failed: ${String(err)}`);
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    totals: () => ({ requests, ms }),
    problems,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
