// The model proxy's scrub of a turn's secrets (ModelProxyOptions.scrub), against a fake vendor on
// loopback: every string of a body (keys too, in any JSON escaping) is scrubbed before it is
// forwarded, and a body nested too deeply to walk is refused with a 400, never forwarded.
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ENDPOINTS, type ModelProxy, startModelProxy } from '../../src/sandbox/model-proxy.ts';
import { namedSecretForms, secretScrubber } from '../../src/secrets/scrub.ts';

const VALUE = 'proxy-secret-"quoted"\nvalue-0c4f';

describe('model proxy: secrets scrubbed', () => {
  let vendor: Server;
  const seen: string[] = [];
  let proxy: ModelProxy;

  before(async () => {
    vendor = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        seen.push(body);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}');
      });
    });
    await new Promise<void>((resolve) => vendor.listen(0, '127.0.0.1', resolve));
    proxy = await startModelProxy({
      upstream: `http://127.0.0.1:${(vendor.address() as AddressInfo).port}`,
      headers: { 'x-api-key': 'sk-ant-proxy-scrub-key-0000' },
      endpoints: ENDPOINTS.anthropic,
      model: 'claude-sonnet-4-5',
      admit: () => undefined,
      observe: () => ({ data: () => {}, end: () => {} }),
      scrub: secretScrubber(namedSecretForms('LICENSE_KEY', VALUE)),
    });
  });
  after(async () => {
    await proxy?.close();
    await new Promise<void>((resolve) => vendor?.close(() => resolve()));
  });

  const post = (body: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        {
          socketPath: proxy.socketPath,
          path: '/v1/messages',
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  test('every string of the body, and its keys, reach the vendor scrubbed', async () => {
    const body = JSON.stringify({
      model: 'whatever',
      max_tokens: 10,
      messages: [
        { role: 'user', content: `the licence is ${VALUE}` },
        {
          role: 'user',
          content: [{ type: 'text', text: `base64: ${Buffer.from(VALUE).toString('base64')}` }],
        },
      ],
      metadata: { [VALUE]: 'as a key' },
    });
    const res = await post(body);
    assert.equal(res.status, 200, res.text);
    const forwarded = seen.at(-1) ?? '';
    const parsed = JSON.parse(forwarded) as {
      messages: { content: unknown }[];
      metadata: Record<string, string>;
    };
    assert.equal(parsed.messages[0]?.content, 'the licence is [secret LICENSE_KEY]');
    assert.match(JSON.stringify(parsed.messages[1]?.content), /base64: \[secret LICENSE_KEY\]/);
    assert.deepEqual(parsed.metadata, { '[secret LICENSE_KEY]': 'as a key' });
    assert.ok(!forwarded.includes('proxy-secret'), forwarded);
  });

  test('a body nested too deeply to walk is a 400, and nothing is forwarded', async () => {
    const before = seen.length;
    const depth = 200_000;
    const res = await post(`{"messages":${'['.repeat(depth)}${']'.repeat(depth)}}`);
    assert.equal(res.status, 400, res.text);
    assert.match(res.text, /"code":"bad_body"/);
    assert.equal(seen.length, before);
  });
});
