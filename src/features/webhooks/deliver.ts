// One attempt of a webhook delivery: a signed POST of the stored payload to the endpoint, on a
// fresh connection to an address checked at this attempt (the lookup that connects is the one
// that checks, so a name cannot resolve to a public address for the check and a private one
// for the connection). Redirects are not followed; a few KB of the answer are read at most.
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
} from './address.ts';
import type { SignatureHeaders } from './sign.ts';

/** The most of a receiver's answer that is read before the connection is closed. */
const MAX_ANSWER_BYTES = 4096;

export interface AttemptResult {
  /** 2xx: the receiver has the event. */
  ok: boolean;
  /** The receiver's HTTP status; null when no answer came. */
  status: number | null;
  /** Why the attempt failed, readable and without secrets; null when it succeeded. */
  error: string | null;
  latencyMs: number;
}

export interface AttemptOptions {
  /** Bound on the attempt from connect to the answer's head. */
  timeoutMs: number;
  allowPrivate: boolean;
  userAgent: string;
  resolve?: Resolve;
}

class AttemptTimeout extends Error {
  override name = 'AttemptTimeout';
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

const NETWORK_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the receiver',
  EPIPE: 'connection closed by the receiver',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
  EAI_AGAIN: 'name lookup failed temporarily',
  ENOTFOUND: 'host does not resolve',
  HPE_INVALID_CONSTANT: 'the answer is not valid HTTP',
};

/** A readable reason for a failed request: no stack, no URL (it may carry a token). */
function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof AttemptTimeout) return `timed out after ${seconds(timeoutMs)}`;
  if (err instanceof UnsafeTargetError) return err.message;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    const known = NETWORK_ERRORS[code];
    if (known) return known;
    if (code.startsWith('HPE_')) return 'the answer is not valid HTTP';
    if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO|ERR_TLS/.test(code))
      return `TLS failed: ${errorMessage(err)}`;
    return `request failed: ${code}`;
  }
  return `request failed: ${errorMessage(err)}`;
}

/** POSTs `body` with `signature` to `url`, once. Never throws: a failure is a result. */
export async function postWebhook(
  url: string,
  body: string,
  signature: SignatureHeaders,
  opts: AttemptOptions,
): Promise<AttemptResult> {
  const started = performance.now();
  const fail = (error: string, status: number | null = null): AttemptResult => ({
    ok: false,
    status,
    error,
    latencyMs: Math.round(performance.now() - started),
  });
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return fail('the webhook url is not a valid URL');
  }
  if (target.protocol !== 'https:' && !(opts.allowPrivate && target.protocol === 'http:'))
    return fail(`the webhook url must use https:// (not ${target.protocol}//)`);
  if (target.username !== '' || target.password !== '')
    return fail('the webhook url must not contain credentials');
  const resolve = opts.resolve ?? resolveAll;
  const host = bareHost(target);
  // Node connects to an IP literal without a lookup: it is checked here instead.
  if (isIP(host) !== 0) {
    try {
      await resolveSafe(host, opts.allowPrivate, resolve);
    } catch (err) {
      return fail(describe(err, opts.timeoutMs));
    }
  }
  const send = target.protocol === 'https:' ? https.request : http.request;
  return new Promise<AttemptResult>((settle) => {
    let done = false;
    const finish = (result: AttemptResult) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      // Nothing more is read: the connection goes, with whatever the receiver still sends.
      request.destroy();
      settle(result);
    };
    const request = send(target, {
      method: 'POST',
      // A fresh connection per attempt, so every attempt connects to an address it checked.
      agent: false,
      lookup: checkedLookup(opts.allowPrivate, resolve),
      headers: {
        ...signature,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'user-agent': opts.userAgent,
        connection: 'close',
      },
    });
    const timer = setTimeout(() => request.destroy(new AttemptTimeout()), opts.timeoutMs);
    request.on('error', (err) => finish(fail(describe(err, opts.timeoutMs))));
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      const result: AttemptResult =
        status >= 200 && status < 300
          ? { ok: true, status, error: null, latencyMs: Math.round(performance.now() - started) }
          : fail(
              status >= 300 && status < 400
                ? `answered ${status} (redirects are not followed)`
                : `answered ${status}`,
              status,
            );
      // The answer's status decides; its body is read only so far, and only until the bound.
      let read = 0;
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= MAX_ANSWER_BYTES) finish(result);
      });
      response.on('end', () => finish(result));
      response.on('error', () => finish(result));
      response.on('aborted', () => finish(result));
      request.removeAllListeners('error');
      request.on('error', () => finish(result));
    });
    request.end(body);
  });
}
