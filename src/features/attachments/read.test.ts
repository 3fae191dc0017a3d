// The images of a request, read as the routes read them: base64 and data URLs decoded, the
// type taken from the bytes, and URLs fetched from a loopback server under the webhooks'
// address rules. Addresses that are refused are refused through an injected resolver or as
// literals, before any packet leaves: no test reaches a non-loopback address.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { AppError } from '../../errors.ts';
import { MAX_ATTACHMENT_BYTES } from '../../jobs/attachments.ts';
import { attachmentReader } from './read.ts';
import { sniffImage } from './sniff.ts';

/** The smallest images of each type, as their real files start. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG = Buffer.concat([Buffer.from('ffd8ffe000104a46494600', 'hex'), Buffer.alloc(32, 1)]);
const GIF = Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(16, 0)]);
const WEBP = Buffer.concat([
  Buffer.from('RIFF'),
  Buffer.from([24, 0, 0, 0]),
  Buffer.from('WEBPVP8 '),
  Buffer.alloc(12),
]);

const refusedWith = (pattern: RegExp) => (err: unknown) => {
  assert.ok(err instanceof AppError, String(err));
  assert.equal(err.status, 400);
  assert.match(err.message, pattern);
  return true;
};

describe('reading images', () => {
  const reader = attachmentReader({ allowPrivate: false });

  test('the type comes from the bytes: PNG, JPEG, WebP and GIF; anything else is none', () => {
    assert.equal(sniffImage(PNG), 'image/png');
    assert.equal(sniffImage(JPEG), 'image/jpeg');
    assert.equal(sniffImage(GIF), 'image/gif');
    assert.equal(sniffImage(WEBP), 'image/webp');
    for (const other of [
      Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'),
      Buffer.from('%PDF-1.7'),
      Buffer.from('RIFF\0\0\0\0WAVE'),
      Buffer.from('GIF90a'),
      PNG.subarray(0, 7),
      Buffer.alloc(0),
    ])
      assert.equal(sniffImage(other), undefined, other.toString('latin1'));
  });

  test('base64, URL-safe base64 and data URLs decode; the type claimed is not asked', async () => {
    const read = await reader.read([
      { data: PNG.toString('base64') },
      { data: JPEG.toString('base64url') },
      // A data URL that says PNG holding a GIF: the GIF is what it is.
      { data: `data:image/png;base64,${GIF.toString('base64')}` },
      { data: `data:image/webp;base64,${WEBP.toString('base64')}` },
    ]);
    assert.deepEqual(
      read?.map((a) => [a.mediaType, a.source]),
      [
        ['image/png', null],
        ['image/jpeg', null],
        ['image/gif', null],
        ['image/webp', null],
      ],
    );
    assert.ok(read?.[0]?.data.equals(PNG));
    assert.ok(read?.[1]?.data.equals(JPEG));
    assert.equal(await reader.read(undefined), undefined);
  });

  test('what is not an image of at most 5 MB is refused, naming the image and why', async () => {
    const cases: [string, RegExp][] = [
      ['not base64!', /"attachments\[1\]\.data": is not valid base64/],
      ['QUJD\nREVG', /"attachments\[1\]\.data": is not valid base64/],
      ['QUJDR', /"attachments\[1\]\.data": is not valid base64/],
      ['data:image/png,rawbytes', /only base64 data URLs/],
      [
        Buffer.from('just text, not an image').toString('base64'),
        /is not a PNG, JPEG, WebP or GIF image \(its first bytes are 6a75737420746578\)/,
      ],
      [
        Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>').toString('base64'),
        /is not a PNG, JPEG, WebP or GIF/,
      ],
      [
        Buffer.concat([PNG, Buffer.alloc(MAX_ATTACHMENT_BYTES)]).toString('base64'),
        /"attachments\[1\]\.data": is \d+ bytes; the most one image may have is 5242880 \(5 MB\)/,
      ],
    ];
    for (const [data, message] of cases)
      await assert.rejects(
        reader.read([{ data: PNG.toString('base64') }, { data }]),
        refusedWith(message),
        data.slice(0, 40),
      );
  });

  test('a URL to a refused address is refused before any packet: literals and names alike', async () => {
    let asked = 0;
    const toPrivate = attachmentReader({
      allowPrivate: false,
      resolve: async () => {
        asked++;
        return [{ address: '10.0.0.7', family: 4 }];
      },
    });
    const cases: [string, RegExp][] = [
      ['https://169.254.169.254/latest/meta-data', /address 169\.254\.169\.254 is cloud metadata/],
      ['https://127.0.0.1/x.png', /address 127\.0\.0\.1 is loopback/],
      ['https://[::ffff:10.1.2.3]/x.png', /is private/],
      [
        'https://images.internal.example/x.png',
        /host images\.internal\.example resolves to address 10\.0\.0\.7 is private/,
      ],
      ['http://images.example/x.png', /"attachments\[0\]\.url": must use https:\/\//],
      ['https://user:pw@images.example/x.png', /must not contain credentials/],
      ['ftp://images.example/x.png', /must use https/],
      ['not a url', /is not a valid URL/],
    ];
    for (const [url, message] of cases)
      await assert.rejects(toPrivate.read([{ url }]), refusedWith(message), url);
    assert.equal(asked, 1, 'only the name was resolved, through the injected resolver');
  });

  describe('from a loopback server (private addresses allowed, as ERRAND_WEBHOOK_ALLOW_PRIVATE=true)', () => {
    let server: Server;
    let base: string;
    const requests: string[] = [];
    before(async () => {
      server = createServer((req, res) => {
        requests.push(req.url ?? '');
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        if (path === '/shot.png')
          return res.writeHead(200, { 'content-type': 'text/html' }).end(PNG);
        if (path === '/moved.png') return res.writeHead(302, { location: '/shot.png' }).end();
        if (path === '/gone.png') return res.writeHead(404).end('no');
        if (path === '/page.html') return res.writeHead(200).end('<html></html>');
        if (path === '/huge.png') {
          // No length: the cap holds while the bytes stream in.
          res.writeHead(200, { 'content-type': 'image/png' });
          res.write(PNG);
          const chunk = Buffer.alloc(1024 * 1024);
          for (let i = 0; i < 6; i++) res.write(chunk);
          return res.end();
        }
        if (path === '/slow.png') return; // never answers
        res.writeHead(500).end();
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async () => {
      server.closeAllConnections();
      server.close();
    });
    const local = attachmentReader({ allowPrivate: true, timeoutMs: 1_000 });

    test("fetches the image; its type is its bytes, not the server's Content-Type; the query is not kept", async () => {
      const [image] = (await local.read([{ url: `${base}/shot.png?token=abc` }])) ?? [];
      assert.equal(image?.mediaType, 'image/png');
      assert.ok(image?.data.equals(PNG));
      assert.equal(image?.source, `${base}/shot.png`);
      assert.deepEqual(requests.at(-1), '/shot.png?token=abc');
    });

    test('a redirect, an error, a page, a body past 5 MB and a silent server are refused', async () => {
      const cases: [string, RegExp][] = [
        ['/moved.png', /answered 302: redirects are not followed/],
        ['/gone.png', /answered 404/],
        ['/page.html', /is not a PNG, JPEG, WebP or GIF/],
        ['/huge.png', /is larger than 5242880 bytes/],
        ['/slow.png', /gave no image within 1 s/],
      ];
      for (const [path, message] of cases)
        await assert.rejects(local.read([{ url: `${base}${path}` }]), refusedWith(message), path);
      // The redirect's target was not asked for.
      assert.ok(
        !requests.includes('/shot.png') || requests.filter((r) => r === '/shot.png').length === 0,
      );
    });
  });
});
