import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppError, databaseUnavailable, ExternalError } from '../../errors.ts';
import { BudgetExhaustedError } from '../../jobs/spend.ts';
import { RateLimitedError } from '../../ratelimit/ratelimit.ts';
import { serviceRefusal } from './intake.ts';

describe('serviceRefusal', () => {
  test("the service's answers are said on the forge", () => {
    const answers = [
      new RateLimitedError('create', {
        limit: 1,
        remaining: 0,
        windowSeconds: 60,
        resetSeconds: 5,
      }),
      new BudgetExhaustedError('job job_1 has spent its budget'),
      new AppError('conflict', 'job job_1 is archived and accepts no more messages'),
      new AppError('model_unavailable', 'no key for the model'),
      new AppError('not_found', 'job job_1 not found'),
    ];
    for (const err of answers) assert.equal(serviceRefusal(err), err, err.message);
  });

  test('its failures, and anything else, are tried again instead', () => {
    const failures = [
      databaseUnavailable(),
      new AppError('internal', 'internal error'),
      new ExternalError('forge', 'the forge failed', { transient: true }),
      new Error('connection terminated'),
      'a string',
    ];
    for (const err of failures) assert.equal(serviceRefusal(err), undefined, String(err));
  });
});
