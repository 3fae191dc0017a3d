// The scrubber's forms of a project secret: each encoding a program commonly prints a value in is
// found and masked with the secret's name, inside longer text and longer encoded data, and the
// deep scrub reaches every string of a JSON value without touching anything else.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import {
  MIN_SECRET_CHARS,
  namedSecretForms,
  scrubDeep,
  secretForms,
  secretScrubber,
} from './scrub.ts';

const VALUE = 'npm_tok/en+with spaces&"quotes"\\and-ünïcode';

test('the value, its JSON string, URL and form encodings and hex are each masked with its name', () => {
  const scrub = secretScrubber(namedSecretForms('NPM_TOKEN', VALUE));
  const hex = Buffer.from(VALUE).toString('hex');
  for (const form of [
    VALUE,
    JSON.stringify(VALUE).slice(1, -1),
    encodeURIComponent(VALUE),
    new URLSearchParams({ t: VALUE }).toString().slice(2),
    hex,
    hex.toUpperCase(),
  ]) {
    assert.equal(scrub(`before ${form} after`), 'before [secret NPM_TOKEN] after', form);
  }
});

test('base64 and base64url of the value are found at every offset inside longer encoded data', () => {
  const scrub = secretScrubber(namedSecretForms('LICENSE', VALUE));
  for (let before = 0; before < 6; before++) {
    for (const encoding of ['base64', 'base64url'] as const) {
      const data = Buffer.concat([randomBytes(before), Buffer.from(VALUE), randomBytes(5)]);
      const text = data.toString(encoding);
      const scrubbed = scrub(`header ${text} footer`);
      assert.match(scrubbed, /\[secret LICENSE\]/, `${encoding}, ${before} bytes before`);
      // What is left of the encoded text decodes to no part of the value's middle.
      const rest = scrubbed.replace('[secret LICENSE]', '');
      assert.ok(!Buffer.from(rest, encoding).includes(Buffer.from(VALUE.slice(4, -4))));
    }
  }
});

test('forms shorter than MIN_SECRET_CHARS are never made, and a short value has none', () => {
  assert.deepEqual(secretForms('short'), []);
  for (const form of secretForms('12345678')) assert.ok(form.length >= MIN_SECRET_CHARS, form);
  assert.ok(secretForms('12345678').includes('12345678'));
});

test('longest first: a secret inside a longer one leaves nothing of the longer behind', () => {
  const scrub = secretScrubber([
    ...namedSecretForms('SHORT', 'abcdefgh'),
    ...namedSecretForms('LONG', 'xxabcdefghyy'),
    'plainsecret',
  ]);
  assert.equal(
    scrub('xxabcdefghyy abcdefgh plainsecret'),
    '[secret LONG] [secret SHORT] [redacted]',
  );
});

test('scrubDeep: every string and key of a JSON value, other objects kept as they are', () => {
  const bytes = new Uint8Array([1, 2, 3]);
  const value = JSON.parse(
    `{"a": "x ${VALUE.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}", "list": [1, {"${'k'}": ["${'12345678'}"]}], "__proto__": {"polluted": "12345678"}}`,
  ) as Record<string, unknown>;
  value.file = bytes;
  value['12345678'] = null;
  const scrub = secretScrubber([
    ...namedSecretForms('T', VALUE),
    ...namedSecretForms('N', '12345678'),
  ]);
  const out = scrubDeep(value, scrub);
  assert.equal(out.a, 'x [secret T]');
  assert.deepEqual(out.list, [1, { k: ['[secret N]'] }]);
  assert.equal(out.file, bytes);
  assert.ok(Object.hasOwn(out, '[secret N]'));
  // A `__proto__` key stays a key: the copy's prototype is untouched.
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
  assert.deepEqual(Object.getOwnPropertyDescriptor(out, '__proto__')?.value, {
    polluted: '[secret N]',
  });
  assert.ok(!JSON.stringify(out).includes('12345678'));
});
