// A project's secrets with each engine's real CLI in the real sandbox, against a fake of its
// model API over loopback: the engine's shell tool reads a secret of exposure "commands" from
// its environment (never one of exposure "setup"), and what it printed reaches the model only
// scrubbed, by the model proxy: no request the fake received holds a value in any form. An
// engine not installed in ERRAND_ENGINES_DIR is skipped with the command that installs it.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, afterEach, before, describe, test } from 'node:test';
import type { InstallableEngine } from '../../src/engines/catalog.ts';
import { secretForms } from '../../src/secrets/scrub.ts';
import {
  type FakeLlm,
  type FakeToolCall,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import type { TestService } from '../support/service.ts';
import { ENGINE_MODELS, engineSkip, startEngineProject } from './inside.ts';

const COMMAND_TOKEN = `cmd_${randomBytes(16).toString('hex')}`;
const SETUP_ONLY = `setup_${randomBytes(16).toString('hex')}`;

interface EngineCase {
  engine: InstallableEngine;
  /** The engine's own tool call that runs `command` in the checkout. */
  run: (command: string) => FakeToolCall;
}

const CASES: EngineCase[] = [
  {
    engine: 'claude-code',
    run: (command) => ({ name: 'Bash', input: { command, description: 'run it' } }),
  },
  {
    engine: 'codex',
    run: (command) => ({ name: 'exec_command', input: { cmd: command, yield_time_ms: 30_000 } }),
  },
  {
    engine: 'opencode',
    run: (command) => ({ name: 'bash', input: { command, description: 'run it' } }),
  },
];

/** The forms of either value in `text` (empty: none). */
function leaks(text: string): string[] {
  return [...secretForms(COMMAND_TOKEN), ...secretForms(SETUP_ONLY)].filter((f) =>
    text.includes(f),
  );
}

for (const c of CASES) {
  const skip = await engineSkip(c.engine, 'secrets');
  const { vendorModel } = ENGINE_MODELS[c.engine];

  describe(`engine ${c.engine} with secrets`, { skip }, () => {
    const key = `sk-${c.engine}-secrets-0a1b2c3d4e5f`;
    let tmp: string;
    let llm: FakeLlm;
    let svc: TestService;
    let projectId: string;

    before(async () => {
      tmp = await makeTempDir(`engine-secrets-${c.engine}`);
      llm = await startFakeLlm({ apiKey: key, models: [vendorModel] });
      ({ svc, projectId } = await startEngineProject(c.engine, {
        tmp,
        llmUrl: llm.url,
        key,
        env: { ERRAND_SECRET_KEY: 'test-secret-key-for-engine-secrets' },
      }));
      for (const [name, value, exposure] of [
        ['COMMAND_TOKEN', COMMAND_TOKEN, 'commands'],
        ['SETUP_ONLY', SETUP_ONLY, 'setup'],
      ] as const) {
        const res = await svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/${name}`, {
          body: { value, exposure },
        });
        assert.equal(res.status, 201, res.text);
      }
    });
    after(async () => {
      await svc?.close();
      await llm?.close();
      await removeDir(tmp);
    });
    afterEach(() => {
      try {
        llm.assertDone();
      } finally {
        llm.reset();
      }
    });

    test('its shell reads a commands secret, never a setup one; the model gets neither', async () => {
      llm.script(
        toolCalls([
          c.run(
            'echo "cmd=[$COMMAND_TOKEN] setup=[$SETUP_ONLY]"; printf %s "$COMMAND_TOKEN" | base64; echo',
          ),
        ]),
        reply('Nothing to change'),
      );
      const jobId = await createJob(svc, projectId, 'Show the environment');
      const job = await untilStatus(svc, projectId, jobId, 'completed', {
        failFast: true,
        timeoutMs: 120_000,
      });
      // The command's output, as the model read it: the value was there, and was scrubbed.
      const second = JSON.stringify(llm.requests[1]?.body);
      assert.match(
        second,
        /cmd=\[\[secret COMMAND_TOKEN\]\] setup=\[\]/,
        `the command's output is not in the next request (${llm.unexpected.join('; ')})`,
      );
      for (const request of llm.requests) {
        assert.deepEqual(leaks(JSON.stringify(request.body)), [], `request ${request.index}`);
      }
      const events = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`);
      assert.deepEqual(leaks(events.text + JSON.stringify(job)), []);
    });
  });
}
