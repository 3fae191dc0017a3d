import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  buildSystemPrompt,
  REPO_INSTRUCTIONS_MAX_BYTES,
  readRepoInstructions,
  setupNote,
} from './prompt.ts';

const base = await mkdtemp(join(tmpdir(), 'errand-prompt-'));
after(() => rm(base, { recursive: true, force: true }));

let n = 0;
async function checkout(files: Record<string, string> = {}): Promise<string> {
  const dir = join(base, `repo${++n}`);
  await mkdir(dir);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), content);
  }
  return dir;
}

describe('buildSystemPrompt', () => {
  it('states the repository, the branch and the rules', () => {
    const prompt = buildSystemPrompt({
      repository: 'https://git.example/acme/app',
      branch: 'errand/j1',
    });
    assert.match(prompt, /Repository: https:\/\/git\.example\/acme\/app/);
    assert.match(prompt, /Branch: errand\/j1/);
    assert.match(prompt, /small and reviewable/);
    assert.match(prompt, /conventions/);
    assert.match(prompt, /Never try to read secrets/);
    assert.match(prompt, /under 72 characters/);
    assert.doesNotMatch(prompt, /repository-instructions/);
  });

  it('appends the repository instructions in their own section', () => {
    const prompt = buildSystemPrompt({
      repository: 'r',
      branch: 'b',
      repoInstructions: '  Run `make test` before finishing.\n',
    });
    assert.match(
      prompt,
      /<repository-instructions>\nRun `make test` before finishing\.\n<\/repository-instructions>$/,
    );
    assert.doesNotMatch(
      buildSystemPrompt({ repository: 'r', branch: 'b', repoInstructions: ' \n' }),
      /repository-instructions/,
    );
  });

  it('asks for the repository checks and their result only when run_command is offered', () => {
    const offered = buildSystemPrompt({ repository: 'r', branch: 'b', commands: true });
    assert.match(offered, /run_command runs a shell command in the repository/);
    assert.match(offered, /run the repository's checks/);
    assert.match(offered, /package\.json scripts, Makefile/);
    assert.match(offered, /which checks you ran and their result/);
    assert.doesNotMatch(offered, /setup command/);
    for (const prompt of [
      buildSystemPrompt({ repository: 'r', branch: 'b' }),
      buildSystemPrompt({ repository: 'r', branch: 'b', commands: false }),
    ]) {
      assert.doesNotMatch(prompt, /run_command|checks|shell/);
    }
  });

  it('says how the setup command went in a note of the turn, not in the system prompt', () => {
    const setup = (exitCode: number | null, timedOut = false) =>
      setupNote({ command: 'npm ci', exitCode, timedOut, outputTail: 'added 12 packages\n' });
    const ok = setup(0);
    assert.match(ok, /setup command ran in the sandbox: it succeeded \(exit code 0\)\./);
    assert.doesNotMatch(ok, /may fail for that reason/);
    assert.match(
      ok,
      /<setup-command>npm ci<\/setup-command>\n<setup-output-tail>\nadded 12 packages\n<\/setup-output-tail>\]$/,
    );
    assert.match(
      setup(1),
      /it failed with exit code 1\. Checks that need what it sets up may fail/,
    );
    assert.match(setup(null, true), /it was stopped at its time limit/);
    assert.match(setup(null), /it was killed \(a limit stopped it\)/);
    // The system prompt is the same at every turn: nothing of the setup's output is in it.
    const system = buildSystemPrompt({ repository: 'r', branch: 'b', commands: true });
    assert.doesNotMatch(system, /setup/);
  });
});

describe('readRepoInstructions', () => {
  it('prefers .errand/AGENTS.md over AGENTS.md', async () => {
    const both = await checkout({ '.errand/AGENTS.md': 'errand rules', 'AGENTS.md': 'root rules' });
    assert.equal(await readRepoInstructions(both), 'errand rules');
    const rootOnly = await checkout({ 'AGENTS.md': 'root rules' });
    assert.equal(await readRepoInstructions(rootOnly), 'root rules');
    assert.equal(await readRepoInstructions(await checkout()), undefined);
  });

  it('lets an empty .errand/AGENTS.md hide the root one', async () => {
    const dir = await checkout({ '.errand/AGENTS.md': '\n', 'AGENTS.md': 'root rules' });
    assert.equal(await readRepoInstructions(dir), undefined);
  });

  it('refuses symlinks that lead outside the checkout', async () => {
    const outside = join(base, 'host-secret.txt');
    await writeFile(outside, 'HOST SECRET');
    const dir = await checkout({ 'AGENTS.md': 'root rules' });
    await mkdir(join(dir, '.errand'));
    await symlink(outside, join(dir, '.errand', 'AGENTS.md'));
    assert.equal(await readRepoInstructions(dir), 'root rules');

    const relative = await checkout();
    await symlink('../host-secret.txt', join(relative, 'AGENTS.md'));
    assert.equal(await readRepoInstructions(relative), undefined);

    // The directory itself pointing outside is caught too.
    const elsewhere = await checkout({ 'AGENTS.md': 'not this repository' });
    const viaDir = await checkout();
    await symlink(elsewhere, join(viaDir, '.errand'));
    assert.equal(await readRepoInstructions(viaDir), undefined);
  });

  it('follows symlinks that stay inside, but not into .git', async () => {
    const dir = await checkout({ 'docs/agents.md': 'docs rules', '.git/config': 'secret-ish' });
    await symlink('docs/agents.md', join(dir, 'AGENTS.md'));
    assert.equal(await readRepoInstructions(dir), 'docs rules');
    const git = await checkout({ '.git/config': '[core]' });
    await symlink('.git/config', join(git, 'AGENTS.md'));
    assert.equal(await readRepoInstructions(git), undefined);
  });

  it('skips what is not a regular file without hanging', async () => {
    const dir = await checkout({ 'AGENTS.md': 'root rules' });
    await mkdir(join(dir, '.errand', 'AGENTS.md'), { recursive: true });
    assert.equal(await readRepoInstructions(dir), 'root rules');
    const fifo = await checkout();
    execFileSync('mkfifo', [join(fifo, 'AGENTS.md')]);
    assert.equal(await readRepoInstructions(fifo), undefined);
  });

  it('cuts off very long instructions', async () => {
    const dir = await checkout({ 'AGENTS.md': 'x'.repeat(REPO_INSTRUCTIONS_MAX_BYTES + 5000) });
    const text = await readRepoInstructions(dir);
    assert.ok(text);
    assert.ok(text.startsWith('x'.repeat(REPO_INSTRUCTIONS_MAX_BYTES)));
    assert.match(text, /\[AGENTS\.md is longer than 32 KiB; the rest was left out\]$/);
  });
});
