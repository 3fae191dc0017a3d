// `--attempts N --agent ENGINE:MODEL …`: the create's `attempts` field, each part of an agent
// optional; a malformed agent a usage error before anything is sent.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { attemptsOf } from './attempts.ts';

describe('attemptsOf', () => {
  test('a count alone, agents with either part empty, and agents without a count', () => {
    assert.equal(attemptsOf(undefined, undefined), undefined);
    assert.equal(attemptsOf(undefined, []), undefined);
    assert.deepEqual(attemptsOf('3', undefined), { count: 3 });
    assert.deepEqual(attemptsOf('2', ['codex:', ':openai:gpt-5']), {
      count: 2,
      agents: [{ engine: 'codex' }, { model: 'openai:gpt-5' }],
    });
    assert.deepEqual(attemptsOf('4', ['claude-code:anthropic:claude-sonnet-4-5', 'opencode']), {
      count: 4,
      agents: [
        { engine: 'claude-code', model: 'anthropic:claude-sonnet-4-5' },
        { engine: 'opencode' },
      ],
    });
    assert.deepEqual(attemptsOf(undefined, ['errand:', 'codex:openai:gpt-5']), {
      count: 2,
      agents: [{ engine: 'errand' }, { engine: 'codex', model: 'openai:gpt-5' }],
    });
  });

  test('a bad count or agent is refused, naming the option', () => {
    assert.throws(() => attemptsOf('0', undefined), /--attempts must be a whole number, 1 or more/);
    assert.throws(() => attemptsOf('two', undefined), /--attempts must be a whole number/);
    assert.throws(
      () => attemptsOf('2', ['openai:gpt-5']),
      /--agent must be ENGINE:MODEL.*'openai:gpt-5'/,
    );
    assert.throws(() => attemptsOf('2', [':']), /--agent must be ENGINE:MODEL/);
    assert.throws(() => attemptsOf('2', ['']), /--agent must be ENGINE:MODEL/);
  });
});
