// The output schema's checks (docs/structured-output.md): what a request may give, and how a
// value is judged and its problems told (bounded, without the value).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  checkOutput,
  checkOutputText,
  MAX_OUTPUT_SCHEMA_BYTES,
  outputSchemaProblem,
} from './output-schema.ts';

describe('output schema', () => {
  test('a schema of exactly 16 KB is taken, one byte more is not', () => {
    const base = JSON.stringify({ type: 'object', description: '' });
    const fill = 'x'.repeat(MAX_OUTPUT_SCHEMA_BYTES - Buffer.byteLength(base));
    assert.equal(outputSchemaProblem({ type: 'object', description: fill }), undefined);
    assert.match(
      outputSchemaProblem({ type: 'object', description: `${fill}x` }) ?? '',
      /is 16385 bytes as JSON; the maximum is 16384/,
    );
  });

  test('a remote reference is refused wherever it is, a local one is taken; $id twice is no problem', () => {
    const local = {
      $defs: { name: { type: 'string' } },
      type: 'object',
      properties: { a: { $ref: '#/$defs/name' } },
    };
    assert.equal(outputSchemaProblem(local), undefined);
    for (const deep of [
      { anyOf: [{ type: 'string' }, { $ref: 'other.json' }] },
      { $defs: { x: { $dynamicRef: 'https://example.com/s#meta' } } },
    ]) {
      assert.match(outputSchemaProblem(deep) ?? '', /only references inside the schema/);
    }
    const withId = { $id: 'https://example.com/answer', type: 'object' };
    assert.equal(outputSchemaProblem(withId), undefined);
    assert.equal(outputSchemaProblem(withId), undefined);
    assert.deepEqual(checkOutput(withId, {}), { ok: true, value: {} });
  });

  test('a value is checked; its problems are bounded and never quote it', () => {
    const schema = {
      type: 'object',
      properties: Object.fromEntries(
        Array.from({ length: 15 }, (_, i) => [`p${i}`, { type: 'integer' }]),
      ),
    };
    const secretish = 'sk-live-should-never-be-repeated';
    const value = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`p${i}`, secretish]));
    const check = checkOutput(schema, value);
    assert.equal(check.ok, false);
    const problems = check.ok ? '' : check.problems;
    const lines = problems.split('\n');
    assert.equal(lines.length, 11);
    assert.equal(lines[0], '/p0: must be integer');
    assert.equal(lines.at(-1), 'and 5 more');
    assert.ok(!problems.includes(secretish));
  });

  test('a final message is JSON alone or in one fence; anything else is not JSON', () => {
    const schema = { type: 'object', required: ['n'] };
    assert.deepEqual(checkOutputText(schema, ' {"n": 1}\n'), { ok: true, value: { n: 1 } });
    assert.deepEqual(checkOutputText(schema, '```json\n{"n": 2}\n```'), {
      ok: true,
      value: { n: 2 },
    });
    for (const text of ['Here it is: {"n": 1}', '', '```\n{"n": 1}\n``` and more']) {
      assert.deepEqual(checkOutputText(schema, text), {
        ok: false,
        problems: 'the answer is not JSON: it must be only the JSON value',
      });
    }
    assert.deepEqual(checkOutputText(schema, '{}'), {
      ok: false,
      problems: "(the value): must have required property 'n'",
    });
  });
});
