// The body check on its own: the NUL it finds and the path it names, the depth limit at its
// boundary, and bodies far deeper than the call stack allows (the HTTP cases are in
// hardening.test.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findBodyProblem, MAX_BODY_DEPTH } from './nul.ts';

/** `levels` nested arrays, the innermost holding `inner`: `[[…[inner]…]]`. */
function nestedArrays(levels: number, inner: unknown = 1): unknown {
  let value: unknown = inner;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

function nestedObjects(levels: number, inner: unknown = 1): unknown {
  let value: unknown = inner;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe('findBodyProblem', () => {
  describe('happy path', () => {
    test('flat and shallow bodies have no problem', () => {
      for (const body of [
        undefined,
        null,
        42,
        'text',
        {},
        [],
        { prompt: 'do it', n: 1, ok: true, none: null },
        { forge: { kind: 'github', url: 'https://example.com' }, list: [1, 'two', [3]] },
      ]) {
        assert.equal(findBodyProblem(body), undefined, JSON.stringify(body));
      }
    });

    test(`a body nested exactly ${MAX_BODY_DEPTH} levels is accepted`, () => {
      assert.equal(findBodyProblem(nestedArrays(MAX_BODY_DEPTH)), undefined);
      assert.equal(findBodyProblem(nestedObjects(MAX_BODY_DEPTH)), undefined);
      assert.equal(
        findBodyProblem({ prompt: 'x', meta: nestedArrays(MAX_BODY_DEPTH - 1) }),
        undefined,
      );
      // Strings and numbers are not levels.
      assert.equal(findBodyProblem(nestedArrays(MAX_BODY_DEPTH, 'leaf')), undefined);
    });

    test('a wide body is walked whole', () => {
      const wide = Array.from({ length: 200_000 }, (_, i) => ({ i, s: 'x' }));
      assert.equal(findBodyProblem(wide), undefined);
      wide.push({ i: -1, s: 'late\u0000' });
      assert.deepEqual(findBodyProblem(wide), { kind: 'nul', path: '[200000].s' });
    });
  });

  describe('errors', () => {
    test(`a body nested ${MAX_BODY_DEPTH + 1} levels is too deep`, () => {
      assert.deepEqual(findBodyProblem(nestedArrays(MAX_BODY_DEPTH + 1)), { kind: 'depth' });
      assert.deepEqual(findBodyProblem(nestedObjects(MAX_BODY_DEPTH + 1)), { kind: 'depth' });
      assert.deepEqual(findBodyProblem({ prompt: 'x', meta: nestedArrays(MAX_BODY_DEPTH) }), {
        kind: 'depth',
      });
    });

    test('bodies far deeper than the call stack allows are refused, not a crash', () => {
      // 8,000 levels overflowed the recursive walk; 500,000 is what fits in the body limit.
      for (const levels of [8_000, 100_000, 500_000]) {
        const text = `${'['.repeat(levels)}${']'.repeat(levels)}`;
        assert.deepEqual(findBodyProblem(JSON.parse(text)), { kind: 'depth' }, `${levels}`);
        assert.deepEqual(findBodyProblem(nestedObjects(levels)), { kind: 'depth' }, `${levels}`);
      }
    });

    test('a NUL is found in any string or key, and the path names it', () => {
      const cases: [unknown, string][] = [
        ['a\u0000b', '(body)'],
        [{ prompt: 'x\u0000' }, 'prompt'],
        [{ 'odd\u0000key': 1 }, 'odd\u0000key'],
        [{ a: { b: [0, 'ok', { c: '\u0000' }] } }, 'a.b[2].c'],
        [['fine', ['\u0000']], '[1][0]'],
        [{ a: [[], {}], b: { 'k\u0000': null } }, 'b.k\u0000'],
      ];
      for (const [body, path] of cases) {
        assert.deepEqual(findBodyProblem(body), { kind: 'nul', path }, JSON.stringify(body));
      }
    });

    test('the first problem in document order is the one reported', () => {
      assert.deepEqual(findBodyProblem({ a: 'one\u0000', b: 'two\u0000' }), {
        kind: 'nul',
        path: 'a',
      });
      assert.deepEqual(findBodyProblem({ a: nestedArrays(MAX_BODY_DEPTH + 1), b: '\u0000' }), {
        kind: 'depth',
      });
      assert.deepEqual(
        findBodyProblem({ a: [{ 'k\u0000': 1 }], b: nestedArrays(MAX_BODY_DEPTH + 1) }),
        { kind: 'nul', path: 'a[0].k\u0000' },
      );
    });
  });
});
