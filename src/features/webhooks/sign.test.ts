import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { signHeaders } from './sign.ts';

const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;

// The specification's reference library is the judge, not Errand's own code.
test('a signature verifies with the reference library, for every secret that signed', () => {
  const current = newSecret();
  const previous = newSecret();
  const body = JSON.stringify({ type: 'job.completed', data: { jobId: 'job_x', é: '✓' } });
  const now = Math.floor(Date.now() / 1000);
  const headers = signHeaders([current, previous], 'msg_1', now, body);
  assert.equal(headers['webhook-id'], 'msg_1');
  assert.equal(headers['webhook-timestamp'], String(now));
  assert.equal(headers['webhook-signature'].split(' ').length, 2);
  assert.deepEqual(new Webhook(current).verify(body, { ...headers }), JSON.parse(body));
  assert.deepEqual(new Webhook(previous).verify(body, { ...headers }), JSON.parse(body));

  const onlyCurrent = signHeaders([current], 'msg_1', now, body);
  assert.throws(
    () => new Webhook(previous).verify(body, { ...onlyCurrent }),
    WebhookVerificationError,
  );
  // The body, the id and the timestamp are all signed.
  assert.throws(
    () => new Webhook(current).verify(`${body} `, { ...headers }),
    WebhookVerificationError,
  );
  assert.throws(
    () => new Webhook(current).verify(body, { ...headers, 'webhook-id': 'msg_2' }),
    WebhookVerificationError,
  );
  assert.throws(
    () => new Webhook(current).verify(body, { ...headers, 'webhook-timestamp': String(now + 1) }),
    WebhookVerificationError,
  );
});

test('a signature matches the reference library byte for byte', () => {
  const secret = newSecret();
  const at = new Date(1_700_000_000_000);
  const expected = new Webhook(secret).sign('msg_abc', at, '{"a":1}');
  assert.equal(
    signHeaders([secret], 'msg_abc', 1_700_000_000, '{"a":1}')['webhook-signature'],
    expected,
  );
});

test('no secret, no request', () => {
  assert.throws(() => signHeaders([], 'msg_1', 1, '{}'), /at least one secret/);
});
