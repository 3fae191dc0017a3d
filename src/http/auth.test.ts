// The key and project read of the project routes (requireProject): requests that arrive
// together share one statement, and each gets exactly the answer it would get alone.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyRequest } from 'fastify';
import {
  createRouteFixture,
  type RouteFixture,
  randomProjectId,
} from '../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../test/support/service.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { mintKey } from '../keys/format.ts';
import { KeyChecker } from '../keys/service.ts';
import { TokenChecker } from '../users/tokens.ts';
import { requireProject } from './auth.ts';

describe('the key and project read of the project routes', () => {
  let svc: TestService;
  let fx: RouteFixture;

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await svc?.close();
  });

  test('reads that arrive together share one statement, and each gets its own answer', async () => {
    const { ctx } = svc.service;
    let statements = 0;
    const counted: AppContext = {
      ...ctx,
      prepared: <R>(name: string, text: string, values: unknown[]) => {
        statements++;
        return ctx.prepared<R>(name, text, values);
      },
    };
    const keyErrors: unknown[] = [];
    const check = requireProject(
      counted,
      new KeyChecker(ctx.db, (err) => keyErrors.push(err)),
      new TokenChecker(counted, (err) => keyErrors.push(err)),
    );
    const revoked = await svc.createProjectKey(fx.project.id);
    const revoke = await svc.request('POST', `/v2/admin/keys/${revoked.id}/revoke`);
    assert.equal(revoke.status, 200, revoke.text);
    const A = fx.project.id;
    const B = fx.otherProject.id;
    const cases: [key: string, projectId: string, expected: string][] = [
      [fx.projectKey, A, `project ${A}`],
      [svc.adminKey, B, `project ${B}`],
      [fx.otherProjectKey, B, `project ${B}`],
      [fx.otherProjectKey, A, 'forbidden'],
      [revoked.key, A, 'unauthorized: this API key has been revoked'],
      [mintKey(), A, 'unauthorized: unknown API key'],
      [svc.adminKey, randomProjectId(), 'not_found: project'],
      [svc.adminKey, 'prj_\u0000', 'not_found: project'],
      [fx.projectKey, A, `project ${A}`],
    ];
    const requests = cases.map(
      ([key, projectId]) =>
        ({
          headers: { authorization: `Bearer ${key}` },
          params: { projectId },
          // The route's access rule, which the hook reads (keys/route-access.ts).
          routeOptions: { url: '/v2/agent/:projectId/jobs', config: { access: 'viewer' } },
        }) as unknown as FastifyRequest<{ Params: { projectId: string } }>,
    );
    const settled = await Promise.allSettled(requests.map((request) => check(request)));
    assert.equal(statements, 1, 'the reads did not share one statement');
    settled.forEach((result, i) => {
      const expected = cases[i]?.[2] ?? '';
      if (result.status === 'fulfilled') {
        assert.equal(`project ${requests[i]?.project?.id}`, expected, `case ${i}`);
        assert.ok(requests[i]?.principal, `case ${i}: no principal`);
      } else {
        assert.ok(result.reason instanceof AppError, `case ${i}: ${String(result.reason)}`);
        assert.ok(
          `${result.reason.code}: ${result.reason.message}`.startsWith(expected),
          `case ${i}: got ${result.reason.code}: ${result.reason.message}, expected ${expected}`,
        );
      }
    });
    assert.deepEqual(keyErrors, []);
  });
});
