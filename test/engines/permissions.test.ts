// OpenCode's permissions against what the installed pinned version itself says it has: the keys
// of its configuration schema (read from its executable) and every permission its agents have a
// default rule for (`opencode agent list`). Errand's configuration must name each of them, and
// name nothing else; with it, OpenCode's own rules (the last rule that matches wins, nothing
// matched asks) give every permission of every agent Errand's decision and never `ask`, which a
// headless run answers by rejecting the call and ending the session. So a pinned version that
// adds a permission fails here until Errand names it. Skipped where OpenCode is not installed.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { installedEngine } from '../../src/engines/catalog.ts';
import { OPENCODE_PERMISSIONS, opencode } from '../../src/engines/opencode.ts';

const run = promisify(execFile);
const ENGINES_DIR = process.env.ERRAND_ENGINES_DIR ?? '/var/cache/errand-ci/engines';
/** A permission no version has: whatever a later one adds is decided by `*`. */
const UNKNOWN = 'errand_not_a_permission_yet';

interface Rule {
  permission: string;
  pattern: string;
  action: string;
}

/** OpenCode's wildcard match: `*` any run of characters, `?` one; the whole string. */
function wildcard(text: string, pattern: string): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, 's').test(text);
}

/**
 * Every decision OpenCode can reach for `permission`, whatever the call's pattern: the last rule
 * matching it for every pattern (`*`), and any later one for some patterns; `ask` when no rule
 * matches every pattern.
 */
function decisions(rules: readonly Rule[], permission: string): Set<string> {
  const matching = rules.filter((rule) => wildcard(permission, rule.permission));
  const lastForAll = matching.findLastIndex((rule) => rule.pattern === '*');
  const reached = matching.slice(Math.max(lastForAll, 0)).map((rule) => rule.action);
  return new Set(lastForAll === -1 ? ['ask', ...reached] : reached);
}

/** `opencode agent list`: each agent's rules, as `<name> (<mode>)` and a JSON array. */
function parseAgents(text: string): Map<string, Rule[]> {
  const agents = new Map<string, Rule[]>();
  const headers = [...text.matchAll(/^(\S+) \((\w+)\)$/gm)];
  for (const [i, header] of headers.entries()) {
    const start = (header.index ?? 0) + header[0].length;
    const end = headers[i + 1]?.index ?? text.length;
    agents.set(header[1] ?? '', JSON.parse(text.slice(start, end)) as Rule[]);
  }
  return agents;
}

/**
 * The keys of OpenCode's permission configuration as its executable declares them (the schema
 * `PermissionRuleConfig` is part of), streamed through rather than read whole (180 MB).
 */
async function schemaKeys(bin: string): Promise<string[]> {
  const declaration =
    /identifier:"PermissionRuleConfig"\}\),[\w$]+=[\w$]+\.StructWithRest\([\w$]+\.Struct\(\{([^}]*)\}\)/;
  let window = '';
  for await (const chunk of createReadStream(bin, { encoding: 'latin1', highWaterMark: 1 << 22 })) {
    window = window.slice(-4096) + chunk;
    const found = declaration.exec(window);
    if (found)
      return [...(found[1] ?? '').matchAll(/([\w$]+):[\w$]+\.optional\(/g)].map((m) => m[1] ?? '');
  }
  assert.fail(
    `OpenCode's permission schema (PermissionRuleConfig) is not in ${bin}: a new version declares its configuration differently; read its permission keys from its config schema, update OPENCODE_PERMISSIONS and this test`,
  );
}

const installed = await installedEngine({ enginesDir: ENGINES_DIR }, 'opencode');
const skip = installed
  ? false
  : `opencode is not installed in ${ENGINES_DIR}: run \`errand engine install opencode\` with ERRAND_ENGINES_DIR=${ENGINES_DIR}`;
if (skip) process.stdout.write(`# OpenCode permission tests skipped: ${skip}\n`);

describe('OpenCode permissions', { skip }, () => {
  let tmp: string;
  const bin = installed?.bin ?? '';
  /** `opencode agent list` with Errand's environment for it, with or without its configuration. */
  const agents = async (configured: boolean): Promise<Map<string, Rule[]>> => {
    const { env } = opencode.invocation({
      bin,
      workspace: tmp,
      model: { provider: 'openai', id: 'gpt-4.1' },
      proxyOrigin: 'http://127.0.0.1:8787',
      prompt: '',
      resume: undefined,
      title: '',
      home: tmp,
      mcp: [],
      images: [],
    });
    const { OPENCODE_CONFIG_CONTENT, ...defaults } = env;
    const home = await mkdtemp(path.join(tmp, 'home-'));
    const { stdout } = await run(bin, ['agent', 'list'], {
      cwd: tmp,
      env: { ...(configured ? env : defaults), HOME: home, PATH: process.env.PATH ?? '' },
      timeout: 120_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const parsed = parseAgents(stdout);
    assert.ok(parsed.has('build'), `no build agent in:\n${stdout}`);
    return parsed;
  };

  before(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'errand-opencode-permissions-'));
  });
  after(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  test("Errand's configuration names every permission the pinned version has, and no other", async () => {
    const fromSchema = await schemaKeys(bin);
    assert.ok(fromSchema.includes('external_directory'), fromSchema.join(', '));
    const fromRules = [...(await agents(false)).values()]
      .flat()
      .map((rule) => rule.permission)
      .filter((name) => name !== '*');
    const pinned = new Set([...fromSchema, ...fromRules]);
    const named = new Set(Object.keys(OPENCODE_PERMISSIONS).filter((name) => name !== '*'));
    assert.deepEqual(
      [...pinned].filter((name) => !named.has(name)).sort(),
      [],
      'permissions of the pinned OpenCode that OPENCODE_PERMISSIONS does not name',
    );
    assert.deepEqual(
      [...named].filter((name) => !pinned.has(name)).sort(),
      [],
      'names in OPENCODE_PERMISSIONS the pinned OpenCode does not have',
    );
  });

  test('with it, no permission of any agent is ever asked: each is allowed but those that only ask the user something', async () => {
    const defaults = await agents(false);
    const configured = await agents(true);
    const names = new Set([UNKNOWN, ...Object.keys(OPENCODE_PERMISSIONS)]);
    for (const rules of defaults.values()) {
      for (const rule of rules) names.add(rule.permission);
    }
    // Without Errand's configuration some would be asked (else this proves nothing).
    const build = defaults.get('build') ?? [];
    assert.ok(decisions(build, 'external_directory').has('ask'));
    assert.ok(decisions(build, 'read').has('ask'));
    assert.deepEqual([...configured.keys()].sort(), [...defaults.keys()].sort());
    for (const [agent, rules] of configured) {
      for (const name of names) {
        const expected = OPENCODE_PERMISSIONS[name] ?? OPENCODE_PERMISSIONS['*'];
        assert.deepEqual(
          [...decisions(rules, name)],
          [expected],
          `agent ${agent}, permission ${name}: ${JSON.stringify(rules.filter((r) => wildcard(name, r.permission)))}`,
        );
      }
    }
  });

  test('every option Errand gives `opencode run` is one the pinned version knows (it ignores others without a word), --auto among them', async () => {
    const { stdout, stderr } = await run(bin, ['run', '--help'], {
      cwd: tmp,
      env: { HOME: tmp, PATH: process.env.PATH ?? '' },
      timeout: 60_000,
    });
    const help = stdout + stderr;
    const { argv } = opencode.invocation({
      bin,
      workspace: tmp,
      model: { provider: 'openai', id: 'gpt-4.1' },
      proxyOrigin: 'http://127.0.0.1:8787',
      prompt: 'the prompt',
      resume: 'ses_1',
      title: 'a title',
      home: tmp,
      mcp: [],
      // Its images are attached by an option too: checked against the help like the rest.
      images: [{ mediaType: 'image/png', data: new Uint8Array([0x89]) }],
    });
    const options = argv.filter((word) => word.startsWith('--')).map((word) => word.split('=')[0]);
    assert.ok(options.includes('--auto'), argv.join(' '));
    assert.ok(options.includes('--file'), argv.join(' '));
    for (const option of options) {
      assert.match(
        help,
        new RegExp(`^\\s+(-\\w, )?${option}\\s`, 'm'),
        `${option} is not in:\n${help}`,
      );
    }
    // A permission still asked is granted once instead of rejected.
    assert.match(help, /--auto\s+auto-approve permissions/);
  });
});
