// An image given as a URL, fetched once when its request arrives, under the webhooks' address
// rules (src/features/webhooks/address.ts): https only (http too where private addresses are
// allowed), no credentials, every address of the host checked by the lookup that connects,
// redirects refused rather than followed (their target would escape the check), the size cap
// enforced while the bytes stream in, and the whole fetch under one timeout.
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { errorMessage } from '../../errors.ts';
import {
  bareHost,
  checkedLookup,
  type Resolve,
  resolveAll,
  resolveSafe,
  UnsafeTargetError,
} from '../webhooks/index.ts';

export interface FetchOptions {
  allowPrivate: boolean;
  maxBytes: number;
  timeoutMs: number;
  userAgent: string;
  resolve?: Resolve | undefined;
}

/** Why a URL gave no image, in words for the client (never the URL's query, which may hold a token). */
export class ImageFetchError extends Error {
  override name = 'ImageFetchError';
}

/** The URL checked before any packet is sent; throws ImageFetchError saying why not. */
async function target(url: string, opts: FetchOptions): Promise<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ImageFetchError('is not a valid URL');
  }
  if (parsed.protocol !== 'https:' && !(opts.allowPrivate && parsed.protocol === 'http:'))
    throw new ImageFetchError(
      opts.allowPrivate ? 'must use https:// or http://' : 'must use https://',
    );
  if (parsed.username !== '' || parsed.password !== '')
    throw new ImageFetchError('must not contain credentials');
  // Node connects to an IP literal without a lookup: it is checked here instead.
  const host = bareHost(parsed);
  if (isIP(host) !== 0) await checked(resolveSafe(host, opts.allowPrivate, opts.resolve));
  return parsed;
}

async function checked<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof UnsafeTargetError)
      throw new ImageFetchError(
        `is not allowed: ${err.message}; only public addresses are fetched (ERRAND_WEBHOOK_ALLOW_PRIVATE=true allows private ones)`,
      );
    throw err;
  }
}

/** Fetches the bytes at `url`: at most `maxBytes`, within `timeoutMs`. */
export async function fetchImage(url: string, opts: FetchOptions): Promise<Buffer> {
  const parsed = await target(url, opts);
  const resolve = opts.resolve ?? resolveAll;
  const get = parsed.protocol === 'https:' ? https.get : http.get;
  return new Promise<Buffer>((settle, reject) => {
    let done = false;
    const finish = (err: Error | undefined, bytes?: Buffer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      request.destroy();
      if (err) reject(err);
      else settle(bytes as Buffer);
    };
    const request = get(parsed, {
      // A fresh connection, so that it goes to an address the lookup checked.
      agent: false,
      lookup: checkedLookup(opts.allowPrivate, resolve),
      headers: { 'user-agent': opts.userAgent, accept: 'image/*', connection: 'close' },
    });
    const timer = setTimeout(
      () => finish(new ImageFetchError(`gave no image within ${opts.timeoutMs / 1000} s`)),
      opts.timeoutMs,
    );
    request.on('error', (err) => {
      if (err instanceof UnsafeTargetError)
        finish(
          new ImageFetchError(
            `is not allowed: ${err.message}; only public addresses are fetched (ERRAND_WEBHOOK_ALLOW_PRIVATE=true allows private ones)`,
          ),
        );
      else finish(new ImageFetchError(`could not be fetched: ${describe(err)}`));
    });
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400)
        return finish(
          new ImageFetchError(
            `answered ${status}: redirects are not followed; give the image's own URL`,
          ),
        );
      if (status < 200 || status >= 300) return finish(new ImageFetchError(`answered ${status}`));
      const tooLarge = () =>
        new ImageFetchError(`is larger than ${opts.maxBytes} bytes, the most one image may have`);
      if (Number(response.headers['content-length'] ?? 0) > opts.maxBytes)
        return finish(tooLarge());
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > opts.maxBytes) return finish(tooLarge());
        chunks.push(chunk);
      });
      response.on('end', () => finish(undefined, Buffer.concat(chunks, size)));
      response.on('error', (err) => finish(new ImageFetchError(`broke off: ${describe(err)}`)));
      response.on('aborted', () => finish(new ImageFetchError('broke off before its end')));
    });
  });
}

// The code of a network error, else its message: no stack, no URL.
function describe(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : errorMessage(err);
}
