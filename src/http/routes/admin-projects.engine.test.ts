// A project's "engine" through the admin API (POST and PATCH /v2/admin/projects): Errand's own
// by default; another one only when it is installed on the server and fits the project's model
// (its own, else the server's default). Each refusal is a 400 that says what to do and stores
// nothing. The server's engines directory is a temporary one, holding what a test installs there
// with the real install code (a small local package standing in for the engine's CLI).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type ServiceWithCodex,
  startServiceWithCodex,
} from '../../../test/support/engine-package.ts';
import { assertError, unchanged } from '../../../test/support/route-cases.ts';
import type { TestService } from '../../../test/support/service.ts';
import type { ProjectRecord } from '../../records/project.ts';

const REPO = 'https://github.com/acme/widgets.git';
// The test service's default model (no ERRAND_MODEL): an Anthropic one.
const DEFAULT_MODEL = /^anthropic:/;

describe("a project's engine", () => {
  let server: ServiceWithCodex;
  let svc: TestService;

  before(async () => {
    // Codex is installed on this server; Claude Code and OpenCode are not.
    server = await startServiceWithCodex();
    svc = server.svc;
  });
  after(async () => {
    await server?.close();
  });

  const create = (fields: Record<string, unknown>) =>
    svc.request('POST', '/v2/admin/projects', {
      body: { name: 'engine', repository: REPO, ...fields },
    });
  const patch = (id: string, fields: Record<string, unknown>) =>
    svc.request('PATCH', `/v2/admin/projects/${id}`, { body: fields });

  /** Asserts a 400 whose message matches, with nothing stored or changed. */
  const refused = async (act: () => ReturnType<typeof create>, pattern: RegExp) => {
    const res = await unchanged(svc, act);
    assertError(res, 400, 'bad_request');
    assert.match(res.json.error ?? '', pattern);
  };

  test("Errand's own is the default, and is kept by an update that does not name one", async () => {
    const res = await create({});
    assert.equal(res.status, 201, res.text);
    const project = res.json as ProjectRecord;
    assert.equal(project.engine, 'errand');
    const renamed = await patch(project.id, { name: 'renamed' });
    assert.equal((renamed.json as ProjectRecord).engine, 'errand');
    const read = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.equal((read.json as ProjectRecord).engine, 'errand');
  });

  test('an installed engine with a model it runs is set, shown and changed back', async () => {
    const res = await create({ engine: 'codex', model: 'openai:gpt-5' });
    assert.equal(res.status, 201, res.text);
    const project = res.json as ProjectRecord;
    assert.equal(project.engine, 'codex');
    const listed = await svc.request('GET', '/v2/admin/projects');
    const row = (listed.json.projects as ProjectRecord[] | undefined)?.find(
      (p) => p.id === project.id,
    );
    assert.equal(row?.engine, 'codex');
    const stored = await svc.service.ctx.db
      .selectFrom('projects')
      .select('engine')
      .where('id', '=', project.id)
      .executeTakeFirstOrThrow();
    assert.equal(stored.engine, 'codex');

    const back = await patch(project.id, { engine: 'errand', model: 'google:gemini-2.5-pro' });
    assert.equal(back.status, 200, back.text);
    assert.equal((back.json as ProjectRecord).engine, 'errand');
  });

  test('an engine that is not installed is refused with the command that installs it', async () => {
    await refused(
      () => create({ engine: 'claude-code', model: 'anthropic:claude-sonnet-4-5' }),
      /^engine claude-code is not installed on the server: run `errand engine install claude-code` there/,
    );
    await refused(
      () => create({ engine: 'opencode' }),
      /^engine opencode is not installed on the server: run `errand engine install opencode`/,
    );
    const project = (await create({})).json as ProjectRecord;
    await refused(
      () => patch(project.id, { engine: 'claude-code' }),
      /`errand engine install claude-code`/,
    );
  });

  test('an engine with a model of a vendor it does not talk to is refused', async () => {
    await refused(
      () => create({ engine: 'codex', model: 'anthropic:claude-sonnet-4-5' }),
      /^engine codex cannot run model 'anthropic:claude-sonnet-4-5': it talks to openai: models only; choose such a model in "model", or another engine$/,
    );
    // Without a model of its own, the project runs the server's default.
    const res = await unchanged(svc, () => create({ engine: 'codex' }));
    assertError(res, 400, 'bad_request');
    assert.match(
      res.json.error ?? '',
      /^engine codex cannot run model '([^']+)' \(the server's default\)/,
    );
    assert.match(/'([^']+)'/.exec(res.json.error ?? '')?.[1] ?? '', DEFAULT_MODEL);
    // Checked before the install: the vendor is the first thing to fix.
    await refused(
      () => create({ engine: 'claude-code', model: 'openai:gpt-5' }),
      /^engine claude-code cannot run model 'openai:gpt-5': it talks to anthropic: models only/,
    );
    await refused(
      () => create({ engine: 'opencode', model: 'google:gemini-2.5-pro' }),
      /^engine opencode cannot run model 'google:gemini-2.5-pro': it talks to anthropic:, openai:, openai-compatible: models only/,
    );

    // A project on an engine keeps a model that engine runs.
    const project = (await create({ engine: 'codex', model: 'openai:gpt-5' }))
      .json as ProjectRecord;
    await refused(
      () => patch(project.id, { model: 'anthropic:claude-sonnet-4-5' }),
      /^engine codex cannot run model 'anthropic:claude-sonnet-4-5'/,
    );
    await refused(
      () => patch(project.id, { model: null }),
      /^engine codex cannot run model '[^']+' \(the server's default\)/,
    );
    const changed = await patch(project.id, { model: 'openai:gpt-5-mini' });
    assert.equal(changed.status, 200, changed.text);
  });

  test("a job that asks for a model its project's engine does not run is refused", async () => {
    const project = (await create({ engine: 'codex', model: 'openai:gpt-5' }))
      .json as ProjectRecord;
    const res = await unchanged(svc, () =>
      svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'hello', model: 'anthropic:claude-sonnet-4-5' },
      }),
    );
    assertError(res, 400, 'model_unavailable');
    assert.equal(
      res.json.error,
      `engine codex cannot run model 'anthropic:claude-sonnet-4-5': it talks to openai: models only (the engine of project ${project.id}): ask for such a model, or change the project's engine`,
    );
  });

  test('an engine that is not one of the four is refused by name', async () => {
    for (const engine of ['claude', 'Codex', '', 'errand ', 42, null]) {
      await refused(
        () => create({ engine }),
        /^"engine" must be one of errand, claude-code, codex, opencode$/,
      );
    }
  });
});
